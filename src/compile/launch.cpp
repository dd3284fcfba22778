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
  const bool cuda = step.language == Language::kCuda;
  // nvcc runs its per-arch device passes (cicc, ptxas) on --threads, but its
  // host passes (preprocessing, cudafe++, the host compile) one after the
  // other: over a whole job it keeps about one core busy, so it takes one
  // slot and always runs its -gencode targets in parallel. Charging a slot
  // per target (as before) left cores idle that `xargs -P` filled. A thread
  // more, for the host front end beside the device passes, was measured and
  // not kept: with 16 jobs on 16 cores its effect on the batch's time was
  // within the run-to-run spread (docs/benchmarks.md#batch).
  const int nvcc_threads = cuda && step.gencode_targets() > 1 ? step.gencode_targets() : 0;
  const double queued_at = options && options->trace ? options->trace->now() : 0;
  util::JobMemoryEstimate* estimate = nullptr;
  if (options && options->gate) {
    // hipcc (clang with device passes) is sized like nvcc.
    const bool device = cuda || step.language == Language::kHip;
    uint64_t bytes = device ? options->cuda_job_bytes : host_job_bytes(options->cuda_job_bytes);
    if (options->memory) {
      estimate = device ? &options->memory->cuda : &options->memory->host;
      bytes = estimate->reservation();
    }
    // Heavier first (util/job_gate.h): an nvcc job weighs a device pass per
    // target on top of its host passes; a host compile weighs one.
    const double weight = device ? 2.0 + std::max(1, step.gencode_targets()) : 1.0;
    ticket = options->gate->acquire(1, bytes, util::JobGate::Priority::kNormal, weight, options->party);
  }
  const double started_at = options && options->trace ? options->trace->now() : 0;
  auto finish = [&](CommandRecord& rec) {
    rec.queued_at = queued_at;
    rec.started_at = started_at;
    rec.threads = nvcc_threads;
    // ru_maxrss is one process's peak; with --threads N, N device passes may
    // peak together.
    if (estimate) estimate->observe(rec.max_rss_bytes * static_cast<uint64_t>(std::max(1, nvcc_threads)));
    if (options && options->trace) options->trace->add(options->module, rec);
  };
  const bool verbose = options && options->verbose;
  const std::string what = "compiling " + step.display;

  std::vector<std::string> argv = step.command(true, nvcc_threads);
  if (verbose) spdlog::info("{}", util::format_command(argv));
  CommandRecord rec = detail::run_checked(argv, build_dir, what);
  if (step.launcher.empty() || !missing_compile_output(step, build_dir)) {
    finish(rec);
    return rec;
  }
  auto missing = missing_compile_output(step, build_dir);

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
  again.cpu_seconds += rec.cpu_seconds;
  again.max_rss_bytes = std::max(again.max_rss_bytes, rec.max_rss_bytes);
  finish(again);
  return again;
}

}  // namespace tvmffi_jit::compile
