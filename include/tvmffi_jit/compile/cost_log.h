// What each compile and link of a build cost (CPU seconds, wall seconds, peak
// memory, and for nvcc the part of its CPU seconds that more threads do not
// shorten), learned in the cache root (<root>/costs.log) as ninja learns in
// its .ninja_log, so that a batch starts its longest chains first and gives
// the idle cores to the jobs that would finish last (docs/build.md, "The cost
// log" and "Split compilation").
//
// A job is named by its module, its output and its input (costs survive an
// edit of the source, as ninja's do: the last cost seen is the best guess for
// the next build). An input under the module's base dir (docs/remote.md) is
// named relative to it, so a checkout at another path (a CI runner's own
// workspace) finds its costs; a generated unit (inline code, an export
// wrapper) is named by its text, with the base dir's paths in it made
// relative the same way. A unit never built before is estimated: the cost of
// the same source compiled for another module or output, else (a device
// unit) from the bytes its preprocessor may read (compile/source_size.h),
// else the mean of the logged jobs of its kind (the compiler and its number
// of -gencode targets), else a default per kind. `--job-trace` shows each
// estimate beside the cost measured.
//
// The cost model of one nvcc unit: cpu = serial + splittable, where
// splittable is what nvcc's --split-compile spreads (cicc, ptxas) and serial
// the rest (preprocessing, cudafe++, the host compile, fatbinary), so on n
// threads it takes about serial + splittable / n seconds. Both are learned
// from `nvcc --time` (the phases it reports, read by parse_nvcc_phases), else
// from a split run's wall against its CPU; a unit whose split is unknown is
// assumed serial = min(cpu, 2 + cpu / 4) (two measured points: a small
// kernel, about 55% serial; a 263 s FlashInfer MoE unit, 70 s serial).
//
// The file is text (format_cost_log): a header naming the format's version,
// then one job per line ("<id>\t<kind>\t<cpu ms>\t<wall ms>\t<peak KiB>",
// version 3 adds "\t<serial ms>\t<splittable ms>", "-" when unknown), the
// last line of an id winning. A later version may append fields to a line or
// write lines of its own tagged "v<N>\t"; this one reads the fields it knows
// and keeps the rest verbatim when it rewrites the file, so an older binary
// sharing a root never erases what a newer one learned (version 2 keeps the
// serial and splittable fields of a line it rewrites; they are read back as
// a fraction of the line's CPU seconds, so a stale pair cannot exceed it). A
// command reads the file once (at its first estimate, so a command that
// builds nothing never reads it) and rewrites it once at its end, merged with
// what another command wrote meanwhile, under <root>/costs.lock (atomically:
// a reader sees the old or the new file); when another process holds the
// lock longer than a moment, what this command learned is not saved. It is a
// hint: a missing, unreadable or damaged log only makes estimates worse, and
// a learned peak larger than the memory the build may use is not believed.
//
// With a remote cache the log also travels (docs/remote.md, "The team's
// costs"): each remote keeps one costs object per namespace, "costs", in
// this same format (cache::EntryStorage::get_shared_objects stores it as an
// opaque blob). A command reads it once, beside the local log, at its first
// job's estimate (never for a batch's module order: an all-hit command never
// asks), parsed and clamped as the local log is, the local log's lines
// winning for the same job; a fresh runner with an empty root starts
// learned. At its end, when it learned something and a remote takes
// uploads, it reads the object again, merges what it learned and puts it
// back (no lock: of two writers at once one's costs are lost, a hint
// only). It is not signed: it only orders jobs, sizes memory reservations
// (within -j) and split compiles (--split-compile auto), never what a
// compile outputs otherwise.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <vector>

#include "tvmffi_jit/cache/portable.h"
#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::cache {
class EntryStorage;
}

namespace tvmffi_jit::compile {

class SourceSizer;

struct JobCost {
  std::string kind;  // "nvcc/2" (2 -gencode targets), "c++", "cc", "hipcc", "link"
  double cpu_seconds = 0;
  double wall_seconds = 0;
  uint64_t peak_rss_bytes = 0;
  // Version 3: the part of cpu_seconds that more threads do not shorten
  // (nvcc's passes other than cicc and ptxas); negative: unknown (see
  // serial_seconds_of()). The splittable part is cpu_seconds - serial.
  double serial_seconds = -1;
  // The fields a later version appended to the job's line ("\t"-joined),
  // kept verbatim; empty for a job this version measured first.
  std::string later_fields = {};
};

// Where an estimate came from, for --job-trace.
enum class EstimateSource { kLog, kSameSource, kSourceSize, kKindMean, kDefault };
// "log", "same-source", "source-size", "kind-mean", "default"
const char* estimate_source_name(EstimateSource s);

// The serial part of a job's CPU seconds: what was learned, within
// [0, cpu]; unknown: an nvcc or hipcc unit min(cpu, 2 + cpu / 4), any other
// job all of it.
double serial_seconds_of(const JobCost& cost);

// A cold device unit's CPU seconds from the bytes its preprocessor may read
// (compile/source_size.h): the kind's default plus kSourceSecondsPerMiB per
// MiB and target. Fitted on FlashInfer's 66 units (docs/build.md).
inline constexpr double kSourceSecondsPerMiB = 3.0;
double source_size_cpu_seconds(const std::string& kind, uint64_t bytes);

// What `nvcc --time FILE` wrote (CSV: "source file name , phase name , ...,
// metric , unit" with a header line; times in ms): the seconds of its
// splittable phases (cicc, ptxas) and of the others. nullopt when the text
// holds no phase.
struct NvccPhases {
  double serial_seconds = 0;
  double splittable_seconds = 0;
};
std::optional<NvccPhases> parse_nvcc_phases(std::string_view csv);
// A job's serial seconds from what it measured: its phases when nvcc
// reported them (serial phases run on one thread: their sum, at most the
// CPU), else, split over `split` > 1 threads, from its wall against its CPU
// (wall = serial + p / split, cpu = serial + p); else unknown (-1).
double measured_serial_seconds(const std::optional<NvccPhases>& phases, double cpu_seconds, double wall_seconds,
                               int split);

struct CostEstimate {
  JobCost cost;
  EstimateSource source = EstimateSource::kDefault;
};

// The module a unit is built for, as the log names it: its name, and the
// base dir its sources are named relative to (empty: by absolute path).
struct CostScope {
  explicit CostScope(std::string module_name, const std::string& base_dir = "")
      : module(std::move(module_name)), base(base_dir) {}
  std::string module;
  cache::BaseDir base;
};

// The ids a job is logged under.
std::string unit_cost_id(const CostScope& scope, const CompileStep& step);
std::string unit_source_cost_id(const CostScope& scope, const CompileStep& step);  // the source alone, whatever module or output
std::string link_cost_id(const std::string& module);

// The format this version writes (the header says it).
inline constexpr int kCostLogVersion = 3;

// The log's lines, parsed.
struct CostLog {
  std::unordered_map<std::string, JobCost> jobs;  // id -> the last cost given for it
  // Lines of a later version ("v<N>\t...", N > kCostLogVersion): not read, kept verbatim.
  std::vector<std::string> later_lines;
};
// Malformed lines are skipped (the file is a hint, never a reason to fail),
// and so is a line claiming a CPU or wall time above kMaxJobSeconds.
inline constexpr double kMaxJobSeconds = 24 * 3600;
CostLog parse_cost_log(std::string_view text);
std::string format_cost_log(const CostLog& log);

// One job's cost from two lines of it: `preferred` (measured now, or the
// local log's), with `other`'s serial fraction when `preferred` does not know
// its own, and `other`'s later-version fields when it has none.
JobCost merge_job_cost(JobCost preferred, const JobCost& other);
// What a command learned, into a log: each job's line replaced by what was
// learned (merge_job_cost), every other line and later-version line kept.
void merge_learned(CostLog& log, const std::unordered_map<std::string, JobCost>& learned);

// The name of the team's costs object on a remote (joined to its namespace),
// and the most of it that is read or written: 4 MiB, ~60,000 jobs.
inline constexpr const char* kSharedCostsObject = "costs";
inline constexpr uint64_t kMaxSharedCostsBytes = 4ull << 20;
// What a command puts back: the object's lines (nullopt: absent, unreadable
// or too large) with what it learned merged in; only what it learned when
// that is over kMaxSharedCostsBytes (the object starts over, as an
// oversized local log does); nullopt when even that is over.
std::optional<std::string> shared_costs_text(const std::optional<std::string>& held,
                                             const std::unordered_map<std::string, JobCost>& learned);

// How long save() waits for costs.lock: another command's merge takes
// milliseconds; a holder that takes longer costs this command its update,
// never the wait.
inline constexpr double kCostLockWaitSeconds = 0.25;

// The model one command builds with: loaded lazily from `log_path` ("" keeps
// everything in memory), asked by every job before it queues, told what each
// job cost, and saved once (save()). Thread-safe.
class CostModel {
 public:
  // `memory_budget`: what this build's jobs may reserve together (the job
  // gate's; 0: unlimited). A logged peak above it cannot be this machine's:
  // it is not used (the job reserves as its kind does), with one warning.
  // `shared`: the storage whose remotes keep the team's costs object (null:
  // none; the caller passes none for --only-if-cached).
  explicit CostModel(std::string log_path = "", uint64_t memory_budget = 0, cache::EntryStorage* shared = nullptr);
  ~CostModel();
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // A job's estimate (the local log, and the remotes' costs at the first).
  // `scan_sources`: a device unit the log does not know is estimated from
  // its source's size (reads its headers once per command); false: never.
  CostEstimate estimate_unit(const CostScope& scope, const CompileStep& step, bool scan_sources = true);
  CostEstimate estimate_link(const std::string& module);
  // The longest path through a module: its longest unit, then its link
  // (`scan_sources` as for estimate_unit). A batch's module order, computed
  // before any cache lookup: from the local log alone (asking a remote here
  // would cost a batch of hits a transfer), unless a job's estimate has
  // read the remotes' already.
  double module_chain_seconds(const CostScope& scope, const BuildPlan& plan, bool scan_sources = false);

  void record_unit(const CostScope& scope, const CompileStep& step, const JobCost& cost);
  void record_link(const std::string& module, const JobCost& cost);

  // Merges what this command learned into the log file (no-op when nothing
  // was recorded or there is no file). Waits at most kCostLockWaitSeconds
  // for costs.lock; gives up then (said under -v), keeping what it learned
  // for a later save(). Errors are logged at debug level only. Then, once,
  // into the remotes' costs object (update_shared_object: bounded by the
  // remotes' deadlines; a failure is said under -v).
  void save();

  // Tests: the entries known now (loaded and recorded).
  std::unordered_map<std::string, JobCost> entries();

 private:
  // The local log (once), then the remotes' costs objects (once).
  void load_local_locked();
  void load_locked();
  // A log's jobs into what is known, a peak above the memory budget not
  // used (one warning naming `where`); a job known already keeps its line
  // (merge_job_cost), so the log read first wins.
  void absorb_locked(CostLog log, const std::string& where);
  // `with_shared`: the remotes' costs too (a job's estimate), else the local log alone (a module order).
  CostEstimate estimate_unit_with(const CostScope& scope, const CompileStep& step, bool scan_sources,
                                  bool with_shared);
  CostEstimate estimate_link_with(const std::string& module, bool with_shared);
  void save_local_locked();
  std::string kind_of(const CompileStep& step) const;

  const std::string path_;
  const uint64_t memory_budget_;
  cache::EntryStorage* const shared_;
  std::mutex mutex_;
  bool local_loaded_ = false;
  bool shared_loaded_ = false;
  std::unordered_map<std::string, JobCost> known_;
  std::unordered_map<std::string, JobCost> recorded_;  // this command's, to merge on save
  std::unordered_map<std::string, JobCost> unshared_;  // this command's, not yet in the remotes' object
  // Per kind ("nvcc/2", "c++"): sum of CPU seconds and count of the jobs known.
  std::unordered_map<std::string, std::pair<double, int>> kind_totals_;
  std::unique_ptr<SourceSizer> sizer_;  // the source-size estimates' memo of headers
};

}  // namespace tvmffi_jit::compile
