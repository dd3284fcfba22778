#include "tvmffi_jit/toolchain/version.h"

#include <unistd.h>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::toolchain {

Expected<std::string> query_program(const std::vector<std::string>& argv, const QueryOptions& options) {
  const std::string& program = argv.at(0);
  // Looked up first, as run_process would, so that absence is an answer here
  // and only a program that exists but cannot be started is an Error.
  std::optional<std::string> found;
  if (program.find('/') != std::string::npos) {
    if (util::is_regular_file(program) && ::access(program.c_str(), X_OK) == 0) found = program;
  } else {
    found = util::find_program(program);
  }
  if (!found) return Unexpected{program + " is not an executable file (looked " +
                                (program.find('/') != std::string::npos ? "at the path" : "on PATH") + ")"};
  util::ProcessOptions po;
  po.merge_stderr = options.merge_stderr;
  po.timeout_seconds = options.timeout_seconds;
  po.env = {{"LC_ALL", "C"}};
  util::ProcessResult r = util::run_process(argv, po);
  if (!r.ok()) return Unexpected{util::format_command(argv) + ": " + r.status_text()};
  return std::move(r.out);
}

Expected<std::string> version_of(const std::string& program, const QueryOptions& options) {
  return query_program({program, "--version"}, options);
}

}  // namespace tvmffi_jit::toolchain
