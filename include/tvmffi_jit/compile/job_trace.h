// Where the time of a build (or batch) went: one record per process a compile
// or link ran, with when it asked the gate, started and ended (seconds since
// the trace began), its CPU time, its peak RSS and what the gate gave it.
// `build --job-trace FILE` writes it (docs/build.md#job-trace) in one of two
// formats: JSON lines (one object per job, what bench/ reads) or Chrome's
// trace-event JSON (one lane per job running at once, for Perfetto and
// chrome://tracing), chosen by FILE's extension (job_trace_text).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tvmffi_jit::util {
class JobGate;
}

namespace tvmffi_jit::compile {

struct CommandRecord;

// One traced process (or the planning span: module empty, no process).
struct TracedJob {
  std::string module;  // the module's name; empty for the planning span
  std::string step;    // "compiling /p/k.cu", "linking k.so", "planning 32 modules"
  double queued = 0, start = 0, end = 0;  // seconds since the trace began
  double cpu = 0;                         // user + system seconds of the process and its children
  uint64_t rss = 0;                       // bytes: the largest resident set among them
  int threads = 0;                        // nvcc --threads, 0 when none
  int slots = 0;                          // what the gate gave it, 0 without a gate
  int split = 0;                          // nvcc --split-compile=N it ran with, 0 unsplit
  bool split_lent = false;                // its split threads took lent slots (split: the most it could)
  double estimate = 0;                    // the cost model's CPU seconds
  std::string estimate_source;            // "log", "same-source", "source-size", "kind-mean", "default"; empty: not estimated
  double serial = -1;                     // nvcc: its serial seconds (compile/cost_log.h); negative: unknown
  int64_t admission = -1;                 // its place in the job gate's order; -1: no gate
};

// The slots the job gate had lent that compiler threads were using, at one
// moment (sampled while the build runs: util::JobGate::lent_in_use).
struct LentSample {
  double at = 0;  // seconds since the trace began
  int in_use = 0;
};

class JobTrace {
 public:
  JobTrace();
  double now() const;  // seconds since the trace began
  void add(const std::string& module, const CommandRecord& record);
  void add_lent_sample(int in_use);  // at now()
  std::vector<TracedJob> jobs() const;  // in the order they were added
  std::vector<LentSample> lent_samples() const;
  std::string json_lines() const { return job_trace_lines(jobs()); }
  std::string chrome_trace() const { return chrome_trace_json(jobs(), lent_samples()); }

  // The JSON lines: one object per job, in the order they ended.
  static std::string job_trace_lines(const std::vector<TracedJob>& jobs);
  // Chrome's trace-event JSON ({"traceEvents": [...]}): every job a complete
  // ("X") event named "<module>: <file>" on the lowest lane free when it
  // started (so there are as many lanes as jobs ever ran at once), its split
  // threads as N slices nested under it, the planning span on a lane of its
  // own, and a "running" counter (jobs, split threads) at every start and end.
  // A job whose split threads took lent slots counts one thread there, and
  // `lent` adds a "lent slots in use" counter (split threads beyond the jobs').
  static std::string chrome_trace_json(const std::vector<TracedJob>& jobs, const std::vector<LentSample>& lent = {});

 private:
  const std::chrono::steady_clock::time_point start_;
  mutable std::mutex mutex_;
  std::vector<TracedJob> jobs_;
  std::vector<LentSample> lent_;
};

// While it lives, samples how many lent slots the gate's compilers hold
// (every 50 ms, kept when it changes) into the trace; nothing without a trace.
class LentSampler {
 public:
  LentSampler(JobTrace* trace, const util::JobGate& gate);
  ~LentSampler();
  LentSampler(const LentSampler&) = delete;
  LentSampler& operator=(const LentSampler&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::thread thread_;
};

// What `--job-trace FILE` writes: Chrome's trace-event JSON when FILE's name
// ends in ".json" (any case), else JSON lines (".jsonl", ".trace", ...).
bool is_chrome_trace_path(const std::string& path);
std::string job_trace_text(const JobTrace& trace, const std::string& path);

}  // namespace tvmffi_jit::compile
