#include "tvmffi_jit/compile/job_trace.h"

#include "tvmffi_jit/util/job_gate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/job_gate.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

using Clock = std::chrono::steady_clock;

// A job's fields as the JSON lines spell them (docs/build.md#job-trace); the
// trace-event file carries the same object as each job's "args".
nlohmann::json job_object(const TracedJob& job) {
  nlohmann::json j;
  j["module"] = job.module;
  j["step"] = job.step;
  j["queued"] = job.queued;
  j["start"] = job.start;
  j["end"] = job.end;
  j["cpu"] = job.cpu;
  j["rss"] = job.rss;
  j["threads"] = job.threads;
  if (job.slots > 0) j["slots"] = job.slots;
  if (job.split > 0) j["split"] = job.split;
  if (job.split_lent) j["split_lent"] = true;
  if (job.serial >= 0) j["serial"] = std::round(job.serial * 1000) / 1000;  // what nvcc --time said
  if (job.admission >= 0) j["admission"] = job.admission;  // the gate's order (ties of `start` apart)
  if (!job.estimate_source.empty()) {
    // How good the estimate was: the cost model's CPU seconds beside the
    // measured ones (cpu), and what it was based on.
    j["estimate"] = job.estimate;
    j["estimate_source"] = job.estimate_source;
  }
  return j;
}

int64_t micros(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1e6)); }

// "compiling /p/k.cu" -> "k.cu", "linking k.so" -> "k.so".
std::string step_file(const std::string& step) {
  const size_t space = step.find(' ');
  return space == std::string::npos ? step : util::file_name(step.substr(space + 1));
}

std::string step_category(const std::string& step) {
  if (util::starts_with(step, "linking")) return "link";
  if (util::starts_with(step, "compiling")) return "compile";
  return step.substr(0, step.find(' '));
}

constexpr int kPid = 1;
constexpr int kPlanningLane = 0;  // lanes of jobs are 1, 2, ...

nlohmann::json metadata(const char* what, int tid, nlohmann::json args) {
  nlohmann::json e{{"ph", "M"}, {"pid", kPid}, {"name", what}, {"args", std::move(args)}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

}  // namespace

JobTrace::JobTrace() : start_(Clock::now()) {}

double JobTrace::now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

void JobTrace::add(const std::string& module, const CommandRecord& record) {
  TracedJob job;
  job.module = module;
  job.step = record.description;
  job.queued = record.queued_at;
  job.start = record.started_at;
  job.end = record.started_at + record.seconds;
  job.cpu = record.cpu_seconds;
  job.rss = record.max_rss_bytes;
  job.threads = record.threads;
  job.slots = record.slots;
  job.split = record.split;
  job.split_lent = record.split_lent;
  job.estimate = record.estimated_cpu_seconds;
  job.estimate_source = record.estimate_source;
  job.serial = record.serial_seconds;
  job.admission = record.admission;
  std::lock_guard<std::mutex> lock(mutex_);
  jobs_.push_back(std::move(job));
}

void JobTrace::add_lent_sample(int in_use) {
  const double at = now();
  std::lock_guard<std::mutex> lock(mutex_);
  lent_.push_back({at, in_use});
}

std::vector<LentSample> JobTrace::lent_samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lent_;
}

std::vector<TracedJob> JobTrace::jobs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return jobs_;
}

std::string JobTrace::job_trace_lines(const std::vector<TracedJob>& jobs) {
  std::string out;
  for (const auto& job : jobs) out += util::dump_json(job_object(job), -1) + "\n";
  return out;
}

namespace {

// One event per job on a lane, with its split threads nested under it, and
// the lanes' names; the number of lanes. Lanes: each job, in order of start,
// takes the lowest lane whose last job has ended by then; a lane is a job
// slot as it was used, not a thread.
size_t add_job_events(nlohmann::json& events, const std::vector<TracedJob>& jobs) {
  std::vector<size_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return jobs[a].start < jobs[b].start; });
  std::vector<int64_t> lane_end;  // lane k + 1 is free from lane_end[k] (µs)
  bool planning = false;
  for (size_t i : order) {
    const TracedJob& job = jobs[i];
    const int64_t ts = micros(job.start);
    const int64_t dur = std::max<int64_t>(0, micros(job.end) - ts);
    int lane = kPlanningLane;
    if (job.module.empty()) {
      planning = true;
    } else {
      size_t k = 0;
      while (k < lane_end.size() && lane_end[k] > ts) ++k;
      if (k == lane_end.size()) lane_end.push_back(0);
      lane_end[k] = ts + dur;
      lane = static_cast<int>(k) + 1;
    }
    nlohmann::json e{{"ph", "X"},
                     {"pid", kPid},
                     {"tid", lane},
                     {"ts", ts},
                     {"dur", dur},
                     {"name", job.module.empty() ? job.step : job.module + ": " + step_file(job.step)},
                     {"cat", job.module.empty() ? std::string("planning") : step_category(job.step)},
                     {"args", job_object(job)}};
    events.push_back(std::move(e));
    // nvcc --split-compile=N: its N device-pass threads, nested under the job
    // (each a microsecond shorter than the one above it, so every viewer
    // nests them the same way).
    for (int t = 1; !job.split_lent && t <= job.split; ++t)
      events.push_back({{"ph", "X"},
                        {"pid", kPid},
                        {"tid", lane},
                        {"ts", ts},
                        {"dur", std::max<int64_t>(0, dur - t)},
                        {"name", "split thread " + std::to_string(t) + "/" + std::to_string(job.split)},
                        {"cat", "split"}});
  }
  if (planning) {
    events.push_back(metadata("thread_name", kPlanningLane, {{"name", "planning"}}));
    events.push_back(metadata("thread_sort_index", kPlanningLane, {{"sort_index", kPlanningLane}}));
  }
  for (size_t k = 0; k < lane_end.size(); ++k) {
    const int lane = static_cast<int>(k) + 1;
    events.push_back(metadata("thread_name", lane, {{"name", "job lane " + std::to_string(lane)}}));
    events.push_back(metadata("thread_sort_index", lane, {{"sort_index", lane}}));
  }
  return lane_end.size();
}

// What ran at once, a counter event at every start and end: jobs, and the
// threads of their split device passes (a job unsplit counts one).
void add_running_counters(nlohmann::json& events, const std::vector<TracedJob>& jobs) {
  std::vector<std::pair<int64_t, int>> changes;  // (µs, +threads at a start / -threads at an end)
  for (const auto& job : jobs) {
    if (job.module.empty()) continue;
    const int threads = job.split_lent ? 1 : std::max(1, job.split);
    changes.emplace_back(micros(job.start), threads);
    changes.emplace_back(std::max(micros(job.start), micros(job.end)), -threads);
  }
  std::sort(changes.begin(), changes.end());  // at one instant, ends (negative) before starts
  int running = 0, threads = 0;
  for (size_t i = 0; i < changes.size();) {
    const int64_t at = changes[i].first;
    for (; i < changes.size() && changes[i].first == at; ++i) {
      running += changes[i].second > 0 ? 1 : -1;
      threads += changes[i].second;
    }
    events.push_back({{"ph", "C"},
                      {"pid", kPid},
                      {"name", "running"},
                      {"ts", at},
                      {"args", {{"jobs", running}, {"split threads", threads}}}});
  }
}

// The document, written by hand around one event per line, so a diff or a
// grep of the file still reads.
std::string trace_document(const nlohmann::json& events, size_t jobs, size_t lanes) {
  const nlohmann::json other{{"tool", "tvmffi-jit build --job-trace"}, {"jobs", jobs}, {"lanes", lanes}};
  std::string out = "{\"displayTimeUnit\":\"ms\",\"otherData\":" + util::dump_json(other, -1) + ",\n\"traceEvents\":[\n";
  for (size_t i = 0; i < events.size(); ++i)
    out += util::dump_json(events[i], -1) + (i + 1 < events.size() ? ",\n" : "\n");
  out += "]}\n";
  return out;
}

}  // namespace

std::string JobTrace::chrome_trace_json(const std::vector<TracedJob>& jobs, const std::vector<LentSample>& lent) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(metadata("process_name", -1, {{"name", "tvmffi-jit build"}}));
  const size_t lanes = add_job_events(events, jobs);
  add_running_counters(events, jobs);
  for (const auto& s : lent)
    events.push_back({{"ph", "C"}, {"pid", kPid}, {"name", "lent slots in use"}, {"ts", micros(s.at)},
                      {"args", {{"split threads", s.in_use}}}});
  return trace_document(events, jobs.size(), lanes);
}

LentSampler::LentSampler(JobTrace* trace, const util::JobGate& gate) {
  if (!trace) return;
  thread_ = std::thread([this, trace, &gate] {
    int last = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stopping_; })) {
      const int now = gate.lent_in_use();
      if (now != last) trace->add_lent_sample(now);
      last = now;
    }
  });
}

LentSampler::~LentSampler() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  thread_.join();
}

bool is_chrome_trace_path(const std::string& path) { return util::extension(path) == ".json"; }

std::string job_trace_text(const JobTrace& trace, const std::string& path) {
  return is_chrome_trace_path(path) ? trace.chrome_trace() : trace.json_lines();
}

}  // namespace tvmffi_jit::compile
