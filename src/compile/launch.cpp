#include "tvmffi_jit/compile/launch.h"

#include <algorithm>

#include "compile/backends.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

std::optional<std::string> missing_compile_output(const CompileStep& step, const std::string& build_dir) {
  for (const std::string* name : {&step.object_name, &step.depfile_name}) {
    auto stamp = util::file_stamp(util::join_path(build_dir, *name));
    if (!stamp) return *name + " is missing";
    if (stamp->size == 0) return *name + " is empty";
  }
  return std::nullopt;
}

size_t count_launcher_fallbacks(const std::vector<CommandRecord>& commands) {
  return static_cast<size_t>(
      std::count_if(commands.begin(), commands.end(), [](const CommandRecord& c) { return c.launcher_fallback; }));
}

CommandRecord run_step_command(const CompileStep& step, const std::string& build_dir, const ExecuteOptions* options) {
  util::JobGate::Ticket ticket;
  int nvcc_threads = 0;
  if (options && options->gate) {
    // hipcc (clang with device passes) is sized like nvcc.
    const bool cuda = step.language == Language::kCuda || step.language == Language::kHip;
    const uint64_t bytes = cuda ? options->cuda_job_bytes : host_job_bytes(options->cuda_job_bytes);
    ticket = options->gate->acquire(std::max(1, step.gencode_targets()), bytes);
    if (cuda && ticket.slots() > 1) nvcc_threads = ticket.slots();
  }
  const bool verbose = options && options->verbose;
  const std::string what = "compiling " + step.display;

  std::vector<std::string> argv = step.command(true, nvcc_threads);
  if (verbose) spdlog::info("{}", util::format_command(argv));
  CommandRecord rec = detail::run_checked(argv, build_dir, what);
  if (step.launcher.empty()) return rec;
  auto missing = missing_compile_output(step, build_dir);
  if (!missing) return rec;

  // The launcher said it worked but did not deliver: the compiler alone decides.
  const std::string reason = util::file_name(step.launcher[0]) + " (from " + step.launcher_source + ") exited 0 but " +
                             *missing;
  spdlog::warn("{}: {}; compiling it again without the launcher", step.display, reason);
  util::remove_all(util::join_path(build_dir, step.object_name));
  util::remove_all(util::join_path(build_dir, step.depfile_name));
  argv = step.command(false, nvcc_threads);
  if (verbose) spdlog::info("{}", util::format_command(argv));
  CommandRecord again = detail::run_checked(argv, build_dir, what);
  if (auto still = missing_compile_output(step, build_dir))
    throw build_error(what + ": the compiler exited 0 but " + *still + ":\n  cd " + util::shell_quote(build_dir) +
                      " && " + util::format_command(argv) + "\n" + again.output);
  again.seconds += rec.seconds;
  again.output = rec.output + again.output;
  again.launcher_fallback = true;
  again.launcher_fallback_reason = reason;
  return again;
}

}  // namespace tvmffi_jit::compile
