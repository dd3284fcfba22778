#include "tvmffi_jit/compile/launch.h"

#include <algorithm>

#include "compile/command.h"
#include "tvmffi_jit/compile/cost_log.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {
// --split-compile auto: the threads of a unit whose cost is unknown (above).
constexpr int kUnknownUnitSplit = 4;
}  // namespace

size_t count_launcher_fallbacks(const std::vector<CommandRecord>& commands) {
  return static_cast<size_t>(
      std::count_if(commands.begin(), commands.end(), [](const CommandRecord& c) { return c.launcher_fallback; }));
}

Expected<CommandRecord, CommandFailure> run_step_command(const CompileStep& step, const std::string& build_dir,
                                                         const ExecuteOptions& options) {
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
  const double queued_at = options.trace ? options.trace->now() : 0;
  util::JobMemoryEstimate* estimate = nullptr;
  // What this job is expected to cost (compile/cost_log.h): its weight in
  // the gate is its chain, the unit then its module's link, so the longest
  // chains start first whatever module they are in.
  std::optional<CostEstimate> expected;
  const CostScope scope(options.plan_name, options.base_dir);
  if (options.costs) expected = options.costs->estimate_unit(scope, step);
  // --split-compile auto: up to 8 cores for one nvcc (its cicc and ptxas
  // passes split; the host passes stay one thread), as many as the gate finds
  // idle (util/job_gate.h: the tail, or a job longer than its share).
  const int max_slots = step.split_compile == kSplitCompileAuto && options.gate ? std::min(8, options.gate->slots()) : 1;
  int slots = 1;
  if (options.gate) {
    // hipcc (clang with device passes) is sized like nvcc.
    const bool device = cuda || step.language == Language::kHip;
    uint64_t bytes = device ? options.cuda_job_bytes : host_job_bytes(options.cuda_job_bytes);
    if (options.memory) {
      estimate = device ? &options.memory->cuda : &options.memory->host;
      bytes = estimate->reservation();
    }
    // A job whose own peak is known reserves that (and a quarter more), not
    // the largest of its kind.
    if (expected && expected->source == EstimateSource::kLog && expected->cost.peak_rss_bytes > 0 && options.memory)
      bytes = std::max<uint64_t>(expected->cost.peak_rss_bytes + expected->cost.peak_rss_bytes / 4, 64ull << 20);
    // Heavier first (util/job_gate.h): the estimated seconds of the job's
    // chain; without a cost model, a device pass per target on top of the
    // host passes for nvcc, one for a host compile.
    const double weight = expected ? expected->cost.cpu_seconds + options.costs->estimate_link(options.plan_name).cost.cpu_seconds
                                   : device ? 2.0 + std::max(1, step.gencode_targets()) : 1.0;
    ticket = options.gate->acquire(max_slots, bytes, util::JobGate::Priority::kNormal, weight, options.party);
    slots = ticket.slots();
  }
  // A unit never built before (no cost of its own in the log) may be the
  // one that ends the build last, and nothing tells it apart before it runs:
  // its cicc and ptxas passes get kUnknownUnitSplit threads on the one slot
  // it holds. While every slot is busy the kernel shares the cores among
  // them (the gate still bounds the jobs); once the queue drains, the long
  // units left running spread over the cores the short ones gave back,
  // which a unit started on one thread never could (nvcc cannot grow a
  // running compile). The price: on idle cores split passes cost no more
  // CPU, but with every slot busy their extra threads oversubscribe the
  // cores, and a cold FlashInfer batch at -j 16 took 1.25x ninja's CPU
  // (docs/benchmarks.md). Why `auto` is opt-in.
  int split = 0;
  if (step.split_compile == kSplitCompileAuto) {
    const bool cost_unknown = !expected || (expected->source != EstimateSource::kLog &&
                                            expected->source != EstimateSource::kSameSource);
    split = cost_unknown && options.gate ? std::max(slots, std::min(kUnknownUnitSplit, options.gate->slots())) : slots;
  }
  const double started_at = options.trace ? options.trace->now() : 0;
  auto finish = [&](CommandRecord& rec) {
    rec.queued_at = queued_at;
    rec.started_at = started_at;
    rec.threads = nvcc_threads;
    rec.slots = options.gate ? slots : 0;
    rec.split = split > 1 ? split : 0;
    // ru_maxrss is one process's peak; with --threads N, N device passes may
    // peak together.
    if (estimate) estimate->observe(rec.max_rss_bytes * static_cast<uint64_t>(std::max(1, nvcc_threads)));
    if (expected) {
      rec.estimated_cpu_seconds = expected->cost.cpu_seconds;
      rec.estimate_source = estimate_source_name(expected->source);
      options.costs->record_unit(scope, step, JobCost{"", rec.cpu_seconds, rec.seconds, rec.max_rss_bytes});
    }
    if (options.trace) options.trace->add(options.traced_module(), rec);
  };
  const std::string what = "compiling " + step.display;

  std::vector<std::string> argv = step.command(true, nvcc_threads, split);
  if (options.verbose) spdlog::info("{}", util::format_command(argv));
  auto first = detail::run_command(argv, build_dir, what, options);
  if (!first) return first;
  CommandRecord& rec = *first;
  auto missing = step.launcher.empty() ? std::nullopt : missing_compile_output(step, build_dir);
  if (!missing) {
    finish(rec);
    return first;
  }

  // The launcher said it worked but did not deliver: the compiler alone decides.
  const std::string reason = util::file_name(step.launcher[0]) + " (from " + step.launcher_source + ") exited 0 but " +
                             *missing;
  options.status_sink().warning(step.display + ": " + reason + "; compiling it again without the launcher");
  util::remove_all(util::join_path(build_dir, step.object_name));
  util::remove_all(util::join_path(build_dir, step.depfile_name));
  argv = step.command(false, nvcc_threads, split);
  if (options.verbose) spdlog::info("{}", util::format_command(argv));
  auto second = detail::run_command(argv, build_dir, what, options);
  if (!second) return second;
  CommandRecord& again = *second;
  if (auto still = missing_compile_output(step, build_dir))
    return Unexpected<CommandFailure>{CommandFailure{CommandFailureKind::kNoOutput,
                                     what + ": the compiler exited 0 but " + *still + ":\n  cd " +
                                         util::shell_quote(build_dir) + " && " + util::format_command(argv) + "\n" +
                                         again.output,
                                     again}};
  again.seconds += rec.seconds;
  again.output = rec.output + again.output;
  again.launcher_fallback = true;
  again.launcher_fallback_reason = reason;
  again.cpu_seconds += rec.cpu_seconds;
  again.max_rss_bytes = std::max(again.max_rss_bytes, rec.max_rss_bytes);
  finish(again);
  return second;
}

}  // namespace tvmffi_jit::compile
