#include "compile/command.h"

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

std::optional<std::string> missing_compile_output(const CompileStep& step, const std::string& build_dir) {
  for (const std::string* name : {&step.object_name, &step.depfile_name}) {
    if (name->empty()) continue;  // a step that writes no depfile (the embed unit)
    auto stamp = util::file_stamp(util::join_path(build_dir, *name));
    if (!stamp) return *name + " is missing";
    if (stamp->size == 0) return *name + " is empty";
  }
  return std::nullopt;
}

namespace detail {

Expected<CommandRecord, CommandFailure> run_command(const std::vector<std::string>& argv, const std::string& dir,
                                                    const std::string& what, const ExecuteOptions& options,
                                                    const std::vector<std::pair<std::string, std::string>>& env) {
  util::ProcessOptions po;
  po.cwd = dir;
  po.env = env;
  po.merge_stderr = true;
  util::ProcessResult r = options.command_runner().run(argv, po);
  CommandRecord rec;
  rec.argv = argv;
  rec.description = what;
  rec.output = r.out;
  rec.status = r.status_text();
  rec.seconds = r.seconds;
  rec.cpu_seconds = r.cpu_seconds;
  rec.max_rss_bytes = r.max_rss_bytes;
  if (!r.ok()) {
    std::string out = r.out;
    if (!out.empty() && out.back() != '\n') out += '\n';
    std::string message = what + " failed (" + rec.status + "):\n  cd " + util::shell_quote(dir) + " && " +
                          util::format_command(argv) + "\n" + out;
    return Unexpected<CommandFailure>{CommandFailure{CommandFailureKind::kFailed, std::move(message), std::move(rec)}};
  }
  return rec;
}

}  // namespace detail

}  // namespace tvmffi_jit::compile
