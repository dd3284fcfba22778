#include "tvmffi_jit/compile/uncached_build.h"

#include "tvmffi_jit/compile/executor.h"

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

BuildResult execute_in_disposable_dir(const BuildPlan& plan, const std::string& dir, const ExecuteOptions& exec,
                                      const CompileHooks& hooks, const std::function<void()>& keep,
                                      const std::string& removed_by) {
  // A failed command is a value (try_execute_plan); anything else it throws
  // leaves `dir` to its owner.
  Expected<BuildResult, CommandFailure> built = try_execute_plan(plan, dir, exec, hooks);
  if (built) return std::move(built).value();
  // Stopped by a signal: nothing to re-run, the directory goes.
  if (util::termination_signal() != 0) throw build_error(built.why());
  keep();
  std::string message = built.why();
  if (!message.empty() && message.back() != '\n') message += '\n';
  // A command of the plan failed: it is shown above, to be pasted. NVRTC
  // runs in-process: there is no command, only its sources and log.
  const bool command = !built.error().record.argv.empty();
  message += "(the build directory " + dir + " is kept" +
             (command ? " so that the command above can be re-run; " : " with what the build wrote; ") + removed_by +
             ")";
  throw CommandFailedError(message, built.error().record);
}

BuildResult build_outside_cache(const BuildPlan& plan, const std::string& why, const CachedBuildOptions& options) {
  spdlog::warn("cache: {}; building without caching", why);
  return build_without_cache(plan, options.exec);
}

BuildResult build_without_cache(const BuildPlan& plan, const ExecuteOptions& exec) {
  util::TempDir temp(util::temp_root(), "tvmffi-jit-" + plan.name + "-");
  if (exec.verbose) spdlog::info("building {} in {}", plan.name, temp.path());
  BuildResult result = execute_in_disposable_dir(plan, temp.path(), exec, {}, [&] { temp.keep(); },
                                                 "remove it when done");
  temp.keep();  // the artifact is in it: the caller's now
  return result;
}

}  // namespace tvmffi_jit::compile
