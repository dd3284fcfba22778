// What each compile and link of a build cost (CPU seconds, wall seconds, peak
// memory), learned in the cache root (<root>/costs.log) as ninja learns in its
// .ninja_log, so that a batch starts its longest chains first and gives the
// idle cores of its tail to the jobs that would finish last.
//
// A job is named by its module, its output and its input (costs survive an
// edit of the source, as ninja's do: the last cost seen is the best guess for
// the next build). A unit never built before is estimated: the cost of the same
// source compiled for another module or output, else the mean of the logged
// jobs of its kind (the compiler and its number of -gencode targets), else a
// default per kind. `--job-trace` shows each estimate beside the cost measured.
//
// The file is text, one job per line ("<id>\t<kind>\t<cpu ms>\t<wall ms>\t<peak KiB>"),
// the last line of an id winning; a command reads it once (at its first
// estimate, so a command that builds nothing never reads it) and rewrites it
// once at its end, merged with what another command wrote meanwhile, under
// <root>/costs.lock (atomically: a reader sees the old or the new file). It
// is a hint: a missing, unreadable or damaged log only makes estimates worse.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::compile {

struct JobCost {
  std::string kind;  // "nvcc/2" (2 -gencode targets), "c++", "cc", "hipcc", "link"
  double cpu_seconds = 0;
  double wall_seconds = 0;
  uint64_t peak_rss_bytes = 0;
};

// Where an estimate came from, for --job-trace.
enum class EstimateSource { kLog, kSameSource, kKindMean, kDefault };
const char* estimate_source_name(EstimateSource s);  // "log", "same-source", "kind-mean", "default"

struct CostEstimate {
  JobCost cost;
  EstimateSource source = EstimateSource::kDefault;
};

// The ids a job is logged under.
std::string unit_cost_id(const std::string& module, const CompileStep& step);
std::string unit_source_cost_id(const CompileStep& step);  // the source alone, whatever module or output
std::string link_cost_id(const std::string& module);

// The log's lines, parsed: id -> the last cost given for it. Malformed lines
// are skipped (the file is a hint, never a reason to fail).
std::unordered_map<std::string, JobCost> parse_cost_log(std::string_view text);
std::string format_cost_log(const std::unordered_map<std::string, JobCost>& entries);

// The model one command builds with: loaded lazily from `log_path` ("" keeps
// everything in memory), asked by every job before it queues, told what each
// job cost, and saved once (save()). Thread-safe.
class CostModel {
 public:
  explicit CostModel(std::string log_path = "");
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  CostEstimate estimate_unit(const std::string& module, const CompileStep& step);
  CostEstimate estimate_link(const std::string& module);
  // The longest path through a module: its longest unit, then its link.
  double module_chain_seconds(const std::string& module, const BuildPlan& plan);

  void record_unit(const std::string& module, const CompileStep& step, const JobCost& cost);
  void record_link(const std::string& module, const JobCost& cost);

  // Merges what this command learned into the log file (no-op when nothing
  // was recorded or there is no file). Errors are logged at debug level only.
  void save();

  // Tests: the entries known now (loaded and recorded).
  std::unordered_map<std::string, JobCost> entries();

 private:
  void load_locked();
  std::string kind_of(const CompileStep& step) const;

  const std::string path_;
  std::mutex mutex_;
  bool loaded_ = false;
  std::unordered_map<std::string, JobCost> known_;
  std::unordered_map<std::string, JobCost> recorded_;  // this command's, to merge on save
  // Per kind ("nvcc/2", "c++"): sum of CPU seconds and count of the jobs known.
  std::unordered_map<std::string, std::pair<double, int>> kind_totals_;
};

}  // namespace tvmffi_jit::compile
