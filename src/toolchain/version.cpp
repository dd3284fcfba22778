#include "tvmffi_jit/toolchain/version.h"

#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::toolchain {

Expected<std::string> query_program(const std::vector<std::string>& argv, const QueryOptions& options) {
  util::ProcessOptions po;
  po.merge_stderr = options.merge_stderr;
  po.timeout_seconds = options.timeout_seconds;
  po.env = {{"LC_ALL", "C"}};
  // A program that is missing or cannot be started is an answer here, not
  // an Error: the caller asks whether the tool works.
  po.not_started_is_result = true;
  util::ProcessResult r = util::run_process(argv, po);
  if (!r.not_started.empty()) return Unexpected{r.not_started};
  if (!r.ok()) return Unexpected{util::format_command(argv) + ": " + r.status_text()};
  return std::move(r.out);
}

Expected<std::string> version_of(const std::string& program, const QueryOptions& options) {
  return query_program({program, "--version"}, options);
}

}  // namespace tvmffi_jit::toolchain
