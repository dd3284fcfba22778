#include "tvmffi_jit/compile/launch.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "compile/command.h"
#include "compile/pch_unit.h"
#include "tvmffi_jit/compile/cost_log.h"
#include "tvmffi_jit/compile/precompiled_headers.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

size_t count_launcher_fallbacks(const std::vector<CommandRecord>& commands) {
  return static_cast<size_t>(
      std::count_if(commands.begin(), commands.end(), [](const CommandRecord& c) { return c.launcher_fallback; }));
}

namespace {

// --split-compile auto: the most threads one nvcc job takes. Only its cicc
// and ptxas passes split; a FlashInfer MoE unit fits 70 s + 193 s / N
// (docs/benchmarks.md), so past 8 a thread more saves little.
constexpr int kMaxSplit = 8;

// --split-compile auto with the gate's jobserver: the N of --split-compile=N,
// the most threads one nvcc may take from lent slots. nvcc cuts its device
// passes into N pieces up front and runs each on a lent slot or, when none
// is there, on its own thread: more pieces balance the tail better and cost
// no more CPU (a 24-kernel MoE unit: 31.2 CPU-s at N=16 with no token, 31.4
// at N=8, 30.2 unsplit; docs/benchmarks.md).
constexpr int kJobserverSplit = 16;

bool refuses_jobserver_option(const CommandFailure& failure) {
  const std::string& out = failure.record.output;
  return out.find("nvcc fatal") != std::string::npos && out.find("jobserver") != std::string::npos;
}

// `nvcc --time` (the phases the cost log splits a unit's seconds into) was
// refused by this nvcc (an old one): not asked again in this process.
std::atomic<bool> nvcc_time_refused{false};

bool refuses_time_option(const CommandFailure& failure) {
  const std::string& out = failure.record.output;
  return out.find("nvcc fatal") != std::string::npos && out.find("option") != std::string::npos &&
         out.find("time") != std::string::npos;
}

// nvcc runs its per-arch device passes (cicc, ptxas) on --threads, but its
// host passes (preprocessing, cudafe++, the host compile) one after the
// other: over a whole job it keeps about one core busy, so it takes one
// slot and always runs its -gencode targets in parallel. Charging a slot
// per target (as before) left cores idle that `xargs -P` filled. A thread
// more, for the host front end beside the device passes, was measured and
// not kept: with 16 jobs on 16 cores its effect on the batch's time was
// within the run-to-run spread (docs/benchmarks.md#batch).
int nvcc_threads_of(const CompileStep& step) {
  const bool cuda = step.language == Language::kCuda;
  return cuda && step.gencode_targets() > 1 ? step.gencode_targets() : 0;
}

// One compile job from its place in the gate's queue to its record: what it
// is expected to cost, the slots and memory it holds, the threads it runs
// on, and what it cost told back to the cost log, the memory estimate and
// the trace.
class StepJob {
 public:
  StepJob(const CompileStep& step, const ExecuteOptions& options)
      : step_(step), options_(options), scope_(options.plan_name, options.base_dir) {
    nvcc_threads_ = nvcc_threads_of(step);
    queued_at_ = options.trace ? options.trace->now() : 0;
    // What this job is expected to cost (compile/cost_log.h): its weight in
    // the gate is its chain, the unit then its module's link, so the longest
    // chains start first whatever module they are in.
    if (options.costs) expected_ = options.costs->estimate_unit(scope_, step);
    // What its phases cost (`nvcc --time`: the cost log's serial and
    // splittable seconds), in a file of the build's temp dir named after
    // the object: never with a launcher (it would hash or forward the
    // option), never in the user's --build-dir. Like --threads, not in
    // argv() and so in no key.
    if (options.costs && !options.incremental && step.language == Language::kCuda && !nvcc_time_refused.load())
      time_file_ = step.object_name + ".time.csv";
  }

  // Waits for the gate's slots and memory (no gate: one slot, at once).
  void reserve() {
    if (!options_.gate) return;
    // --split-compile auto: up to 8 cores for one nvcc (its cicc and ptxas
    // passes split; the host passes stay one thread), as many as the gate
    // finds idle (util/job_gate.h: the tail, or a job longer than its share).
    const bool split = step_.split_compile == kSplitCompileAuto;
    // With the gate's jobserver a job holds one slot and its compiler takes
    // the idle ones as they come (util/job_gate.h, lending). Not through a
    // launcher: sccache runs nvcc's steps itself and loses its outputs with
    // --jobserver ("fatbinary fatal: Could not open input file"), so a
    // launched job splits on the slots it holds.
    if (split && step_.language == Language::kCuda && step_.launcher.empty())
      makeflags_ = options_.gate->jobserver_makeflags();
    const int max_slots = split && !makeflags_ ? std::min(kMaxSplit, options_.gate->slots()) : 1;
    ticket_ = options_.gate->acquire(max_slots, reserved_bytes(), util::JobGate::Priority::kNormal, shape(),
                                     options_.party);
    slots_ = ticket_.slots();
  }

  // The threads its cicc and ptxas passes split into (--split-compile), then
  // the clock it starts on.
  void start(const std::string& build_dir) {
    split_ = split_threads();
    started_at_ = options_.trace ? options_.trace->now() : 0;
    build_dir_ = build_dir;
    // Built here at its flag set's third compile, on this job's slot.
    if (options_.pch) pch_folder_ = options_.pch->folder_for(step_, options_);
    if (!time_file_.empty()) util::remove_all(util::join_path(build_dir_, time_file_));  // nvcc appends to it
  }

  std::vector<std::string> command(bool with_launcher) const {
    std::vector<std::string> a = step_.command(with_launcher, nvcc_threads_, split_, makeflags_.has_value());
    if (timed(with_launcher)) a.insert(a.end() - 4, {"--time", time_file_});
    // First on the include path, so GCC finds the .gch before the header;
    // -fpch-deps: the depfile lists what the PCH stands for.
    if (pch_folder_) {
      const size_t program = with_launcher ? step_.launcher.size() : 0;
      a.insert(a.begin() + static_cast<std::ptrdiff_t>(program + 1), {"-I" + *pch_folder_, "-fpch-deps"});
    }
    return a;
  }
  bool uses_pch() const { return pch_folder_.has_value(); }
  // What the unit read, as without the PCH (compile/precompiled_headers.h).
  void forget_pch_reads(const std::string& build_dir) const {
    if (pch_folder_ && !step_.depfile_name.empty())
      compile::forget_pch_reads(util::join_path(build_dir, step_.depfile_name), *pch_folder_, step_.object_name);
  }
  // The compiler could not load the PCH: the job runs again without it.
  void drop_pch() {
    options_.pch->discard(step_);
    pch_folder_.reset();
  }
  bool timed(bool with_launcher) const { return !time_file_.empty() && !(with_launcher && !step_.launcher.empty()); }
  // This nvcc does not know --time: the job runs again without it.
  void drop_time() {
    nvcc_time_refused = true;
    time_file_.clear();
  }
  // The compiler's environment: the jobserver's MAKEFLAGS (ours replaces a
  // make's above us: the gate's slots are what this build may use).
  std::vector<std::pair<std::string, std::string>> env() const {
    if (!makeflags_) return {};
    return {{"MAKEFLAGS", *makeflags_}};
  }
  bool uses_jobserver() const { return makeflags_.has_value(); }
  // This nvcc does not know --jobserver: the job runs again on its own slot,
  // and the gate lends no more (the jobs after it split on the slots they hold).
  void drop_jobserver() {
    options_.gate->stop_lending();
    makeflags_.reset();
    split_ = split_threads();
  }

  // The record's scheduling fields, and what the job cost to whoever learns from it.
  void finish(CommandRecord& rec) {
    rec.queued_at = queued_at_;
    rec.started_at = started_at_;
    rec.threads = nvcc_threads_;
    rec.slots = options_.gate ? slots_ : 0;
    rec.admission = options_.gate ? static_cast<int64_t>(ticket_.admission()) : -1;
    rec.split = split_ > 1 ? split_ : 0;
    rec.split_lent = makeflags_.has_value() && rec.split > 0;
    // ru_maxrss is one process's peak; with --threads N, N device passes may
    // peak together.
    if (estimate_) estimate_->observe(rec.max_rss_bytes * static_cast<uint64_t>(std::max(1, nvcc_threads_)));
    std::optional<NvccPhases> phases;
    if (!time_file_.empty()) {
      const std::string path = util::join_path(build_dir_, time_file_);
      if (auto text = util::read_small_file(path, 1u << 20)) phases = parse_nvcc_phases(*text);
      util::remove_all(path);
    }
    // Lent slots: how many threads it ran on is not known, so only `nvcc
    // --time` tells its serial seconds.
    if (device())
      rec.serial_seconds = measured_serial_seconds(phases, rec.cpu_seconds, rec.seconds, makeflags_ ? 0 : split_);
    if (expected_) {
      rec.estimated_cpu_seconds = expected_->cost.cpu_seconds;
      rec.estimate_source = estimate_source_name(expected_->source);
      JobCost measured{"", rec.cpu_seconds, rec.seconds, rec.max_rss_bytes};
      measured.serial_seconds = rec.serial_seconds;
      options_.costs->record_unit(scope_, step_, measured);
    }
    if (options_.trace) options_.trace->add(options_.traced_module(), rec);
  }

 private:
  // hipcc (clang with device passes) is sized like nvcc.
  bool device() const { return step_.language == Language::kCuda || step_.language == Language::kHip; }

  // The memory it reserves: its kind's estimate (which its peak then
  // teaches: finish()), or its own logged peak and a quarter more.
  uint64_t reserved_bytes() {
    uint64_t bytes = device() ? options_.cuda_job_bytes : host_job_bytes(options_.cuda_job_bytes);
    if (options_.memory) {
      estimate_ = device() ? &options_.memory->cuda : &options_.memory->host;
      bytes = estimate_->reservation();
    }
    if (expected_ && expected_->source == EstimateSource::kLog && expected_->cost.peak_rss_bytes > 0 &&
        options_.memory)
      bytes = std::max<uint64_t>(expected_->cost.peak_rss_bytes + expected_->cost.peak_rss_bytes / 4, 64ull << 20);
    return bytes;
  }

  // Heavier first (util/job_gate.h): the estimated seconds of the job's
  // chain (the unit, then its module's link; without a cost model, a device
  // pass per target on top of the host passes for nvcc, one for a host
  // compile), the part of it more slots do not shorten (the unit's serial
  // passes and the link), and a stable name for ties (the module, the
  // source as progress lines name it, the output), so equal estimates start in one order whatever the manifests'.
  util::JobGate::Shape shape() const {
    util::JobGate::Shape s;
    s.key = options_.plan_name + '\0' + step_.display + '\0' + step_.object_name;
    if (expected_) {
      const double link = options_.costs->estimate_link(options_.plan_name).cost.cpu_seconds;
      s.weight = expected_->cost.cpu_seconds + link;
      s.serial = serial_seconds_of(expected_->cost) + link;
    } else {
      s.weight = device() ? 2.0 + std::max(1, step_.gencode_targets()) : 1.0;
    }
    return s;
  }

  // --split-compile auto: the N of --split-compile=N is the slots the gate
  // gave the job (one, or more on the critical path or in the tail), never
  // more: while every slot is busy, the threads of the running jobs do not
  // exceed the slots (the cores), so a cold unit no longer oversubscribes
  // them. A unit of unknown cost is ranked by its estimate (its source's
  // size) like any other.
  int split_threads() const {
    if (step_.split_compile != kSplitCompileAuto) return 0;
    return makeflags_ ? kJobserverSplit : slots_;
  }

  const CompileStep& step_;
  const ExecuteOptions& options_;
  const CostScope scope_;
  int nvcc_threads_ = 0;
  double queued_at_ = 0;
  double started_at_ = 0;
  std::optional<CostEstimate> expected_;
  util::JobMemoryEstimate* estimate_ = nullptr;
  util::JobGate::Ticket ticket_;
  int slots_ = 1;
  int split_ = 0;
  std::string time_file_;  // relative to the build dir; empty: no --time
  std::optional<std::string> makeflags_;  // the gate's jobserver (split jobs with lent slots)
  std::optional<std::string> pch_folder_;  // a precompiled header's include folder
  std::string build_dir_;
};

Expected<CommandRecord, CommandFailure> run_compiler(const std::vector<std::string>& argv, const std::string& build_dir,
                                                     const std::string& what, const ExecuteOptions& options,
                                                     const StepJob& job) {
  if (options.verbose) spdlog::info("{}", util::format_command(argv));
  return detail::run_command(argv, build_dir, what, options, job.env());
}

// The launcher said it worked but did not deliver (`missing`): the compiler
// alone decides. The record is the second run's, with the first one's time,
// output and resources added.
Expected<CommandRecord, CommandFailure> run_without_launcher(const CompileStep& step, const std::string& build_dir,
                                                             const ExecuteOptions& options, StepJob& job,
                                                             const std::string& what, const CommandRecord& first,
                                                             const std::string& missing) {
  const std::string reason =
      util::file_name(step.launcher[0]) + " (from " + step.launcher_source + ") exited 0 but " + missing;
  options.status_sink().warning(step.display + ": " + reason + "; compiling it again without the launcher");
  util::remove_all(util::join_path(build_dir, step.object_name));
  util::remove_all(util::join_path(build_dir, step.depfile_name));
  const std::vector<std::string> argv = job.command(false);
  auto second = run_compiler(argv, build_dir, what, options, job);
  if (!second) return second;
  CommandRecord& again = *second;
  if (auto still = missing_compile_output(step, build_dir))
    return Unexpected<CommandFailure>{CommandFailure{CommandFailureKind::kNoOutput,
                                     what + ": the compiler exited 0 but " + *still + ":\n  cd " +
                                         util::shell_quote(build_dir) + " && " + util::format_command(argv) + "\n" +
                                         again.output,
                                     again}};
  again.seconds += first.seconds;
  again.output = first.output + again.output;
  again.launcher_fallback = true;
  again.launcher_fallback_reason = reason;
  again.cpu_seconds += first.cpu_seconds;
  again.max_rss_bytes = std::max(again.max_rss_bytes, first.max_rss_bytes);
  job.finish(again);
  return second;
}

}  // namespace

Expected<CommandRecord, CommandFailure> run_step_command(const CompileStep& step, const std::string& build_dir,
                                                         const ExecuteOptions& options) {
  StepJob job(step, options);
  job.reserve();
  job.start(build_dir);
  const std::string what = "compiling " + step.display;
  auto first = run_compiler(job.command(true), build_dir, what, options, job);
  if (!first && job.uses_jobserver() && refuses_jobserver_option(first.error())) {
    job.drop_jobserver();  // an nvcc older than --jobserver: split on its own slot
    first = run_compiler(job.command(true), build_dir, what, options, job);
  }
  if (!first && job.uses_pch() && mentions_precompiled_header(first.error().record.output)) {
    job.drop_pch();
    first = run_compiler(job.command(true), build_dir, what, options, job);
  }
  if (!first && job.timed(true) && refuses_time_option(first.error())) {
    job.drop_time();  // an nvcc older than --time: the job as it would have run without the cost log
    first = run_compiler(job.command(true), build_dir, what, options, job);
  }
  if (!first) return first;
  job.forget_pch_reads(build_dir);
  auto missing = step.launcher.empty() ? std::nullopt : missing_compile_output(step, build_dir);
  if (missing) return run_without_launcher(step, build_dir, options, job, what, *first, *missing);
  job.finish(*first);
  return first;
}

}  // namespace tvmffi_jit::compile
