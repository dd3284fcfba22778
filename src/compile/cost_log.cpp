#include "tvmffi_jit/compile/cost_log.h"

#include <algorithm>
#include <cmath>

#include "compile/portable_args.h"
#include "compile/source_size.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

// The header names the version; the layout of a job's first five fields is
// that of versions 1 and 2, which read them too (version 2 keeps the fields
// after them; version 1 drops the lines it does not know).
std::string header() {
  return "# tvmffi-jit cost log v" + std::to_string(kCostLogVersion) +
         ": id kind cpu_ms wall_ms peak_kib serial_ms splittable_ms [fields of later versions]\n";
}

bool device_kind(const std::string& kind) {
  return util::starts_with(kind, "nvcc/") || util::starts_with(kind, "hipcc/");
}

int targets_of(const std::string& kind) {
  const size_t slash = kind.find('/');
  return slash == std::string::npos ? 1 : std::max(1, std::atoi(kind.c_str() + slash + 1));
}
// The log is a hint: a larger file is not read (and is rewritten from what
// this command learned). 200,000 jobs at ~50 bytes each.
constexpr uint64_t kMaxLogBytes = 10ull << 20;
constexpr size_t kMaxEntries = 200000;

// Costs of a job never seen, by kind: relative sizes matter (an nvcc job
// before a host compile, a link last), measured on small kernels
// (docs/benchmarks.md#batch: nvcc ~2-3 CPU-s of host passes plus ~1-1.5 per
// target; a host compile of tvm-ffi's headers ~1.5 s).
double default_cpu_seconds(const std::string& kind) {
  if (device_kind(kind)) return 3.0 + 1.5 * targets_of(kind);
  if (kind == "link") return 0.5;
  if (kind == "cc") return 0.5;
  return 1.5;
}

std::string short_id(char prefix, const std::string& text) {
  return std::string(1, prefix) + util::sha256_hex(text).substr(0, 20);
}

std::optional<uint64_t> parse_number(std::string_view s) {
  if (s.empty() || s.size() > 15) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

bool is_id(std::string_view s) {
  if (s.size() != 21 || (s[0] != 'u' && s[0] != 's' && s[0] != 'l')) return false;
  for (char c : s.substr(1))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool is_kind(std::string_view s) {
  if (s.empty() || s.size() > 16) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/')) return false;
  return true;
}

// "v<N>" opening a line of version N's own layout (N >= 2); nullopt for a job's id.
std::optional<int> later_version(std::string_view field) {
  if (field.size() < 2 || field.size() > 6 || field[0] != 'v') return std::nullopt;
  auto n = parse_number(field.substr(1));
  if (!n) return std::nullopt;
  return static_cast<int>(*n);
}

}  // namespace

const char* estimate_source_name(EstimateSource s) {
  switch (s) {
    case EstimateSource::kLog: return "log";
    case EstimateSource::kSameSource: return "same-source";
    case EstimateSource::kSourceSize: return "source-size";
    case EstimateSource::kKindMean: return "kind-mean";
    case EstimateSource::kDefault: return "default";
  }
  return "default";
}

double serial_seconds_of(const JobCost& cost) {
  const double cpu = std::max(0.0, cost.cpu_seconds);
  if (cost.serial_seconds >= 0) return std::min(cost.serial_seconds, cpu);
  return device_kind(cost.kind) ? std::min(cpu, 2.0 + cpu / 4) : cpu;
}

double source_size_cpu_seconds(const std::string& kind, uint64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  return default_cpu_seconds(kind) + kSourceSecondsPerMiB * mib * targets_of(kind);
}

std::optional<NvccPhases> parse_nvcc_phases(std::string_view csv) {
  NvccPhases out;
  bool any = false;
  for (const std::string& line : util::split_lines(csv)) {
    // source file , phase name , inputs , output , arch , tool , metric , unit
    std::vector<std::string> f;
    for (size_t at = 0; at <= line.size();) {
      const size_t comma = std::min(line.find(',', at), line.size());
      f.emplace_back(util::trim(std::string_view(line).substr(at, comma - at)));
      at = comma + 1;
    }
    if (f.size() < 8) continue;
    if (f[f.size() - 1] != "ms") continue;  // the header line says "unit"
    char* end = nullptr;
    const double ms = std::strtod(f[f.size() - 2].c_str(), &end);
    if (end == f[f.size() - 2].c_str() || !(ms >= 0) || ms > 1e9) continue;
    const std::string& phase = f[1];
    if (phase == "nvcc (driver)") continue;  // the driver's own bookkeeping
    (phase == "cicc" || phase == "ptxas" ? out.splittable_seconds : out.serial_seconds) += ms / 1000.0;
    any = true;
  }
  if (!any) return std::nullopt;
  return out;
}

double measured_serial_seconds(const std::optional<NvccPhases>& phases, double cpu_seconds, double wall_seconds,
                               int split) {
  const double cpu = std::max(0.0, cpu_seconds);
  if (phases) return std::min(cpu, phases->serial_seconds);
  if (split > 1 && wall_seconds > 0 && cpu > 0) {
    const double s = split;
    const double splittable = std::max(0.0, (cpu - wall_seconds) * s / (s - 1));
    return std::clamp(cpu - splittable, 0.0, cpu);
  }
  return -1;
}

std::string unit_cost_id(const CostScope& scope, const CompileStep& step) {
  // A generated unit's input is its fixed name (main.cpp, cpp_0_k.exports.cpp).
  const std::string input = step.generated_text ? step.generated_name : scope.base.portable_path(step.input_path);
  return short_id('u', scope.module + '\0' + step.object_name + '\0' + input);
}

std::string unit_source_cost_id(const CostScope& scope, const CompileStep& step) {
  // A generated source (an export wrapper, inline code) is named by its text,
  // where a wrapper includes its file by absolute path.
  const std::string input = step.generated_text
                                ? "text " + util::sha256_hex(portable_text(scope.base, *step.generated_text))
                                : scope.base.portable_path(step.input_path);
  return short_id('s', std::string(language_name(step.language)) + '\0' + input);
}

std::string link_cost_id(const std::string& module) { return short_id('l', module); }

CostLog parse_cost_log(std::string_view text) {
  CostLog out;
  for (const std::string& line : util::split_lines(text)) {
    if (line.empty() || line[0] == '#') continue;
    // The five fields this version knows, then whatever a later one appended.
    std::vector<std::string_view> f;
    size_t at = 0;
    while (f.size() < 5 && at <= line.size()) {
      const size_t tab = std::min(line.find('\t', at), line.size());
      f.push_back(std::string_view(line).substr(at, tab - at));
      at = tab + 1;
    }
    if (out.jobs.size() + out.later_lines.size() >= kMaxEntries && !out.jobs.count(std::string(f[0]))) continue;
    if (auto version = later_version(f[0])) {
      if (*version > kCostLogVersion) out.later_lines.push_back(line);
      continue;
    }
    if (f.size() < 5 || !is_id(f[0]) || !is_kind(f[1])) continue;
    auto cpu = parse_number(f[2]), wall = parse_number(f[3]), kib = parse_number(f[4]);
    if (!cpu || !wall || !kib) continue;
    if (static_cast<double>(std::max(*cpu, *wall)) > kMaxJobSeconds * 1000) continue;  // no compile takes a day
    JobCost cost{std::string(f[1]), *cpu / 1000.0, *wall / 1000.0, *kib * 1024};
    // Version 3: serial and splittable ms ("-" unknown). Read as a fraction
    // of the CPU seconds: a version 2 binary that measured the job again
    // kept them from an older run.
    if (at < line.size()) {
      std::string_view rest = std::string_view(line).substr(at);
      std::vector<std::string_view> v3;
      size_t r = 0;
      while (v3.size() < 2 && r <= rest.size()) {
        const size_t tab = std::min(rest.find('\t', r), rest.size());
        v3.push_back(rest.substr(r, tab - r));
        r = tab + 1;
      }
      auto serial = v3.size() == 2 ? parse_number(v3[0]) : std::nullopt;
      auto splittable = v3.size() == 2 ? parse_number(v3[1]) : std::nullopt;
      if (serial && splittable && *serial + *splittable > 0)
        cost.serial_seconds =
            cost.cpu_seconds * static_cast<double>(*serial) / static_cast<double>(*serial + *splittable);
      const bool known = v3.size() == 2 && (serial || v3[0] == "-") && (splittable || v3[1] == "-");
      if (!known) r = 0;  // not this version's fields: all kept as they are
      if (r < rest.size()) cost.later_fields = std::string(rest.substr(r));
    }
    out.jobs[std::string(f[0])] = std::move(cost);
  }
  return out;
}

std::string format_cost_log(const CostLog& log) {
  std::vector<const std::pair<const std::string, JobCost>*> sorted;
  for (const auto& e : log.jobs) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  std::string out = header();
  for (const auto* e : sorted) {
    const JobCost& c = e->second;
    const double cpu = std::max(0.0, c.cpu_seconds);
    std::string serial = "-", splittable = "-";
    if (c.serial_seconds >= 0) {
      const double s = std::min(c.serial_seconds, cpu);
      serial = std::to_string(std::llround(s * 1000));
      splittable = std::to_string(std::llround((cpu - s) * 1000));
    }
    out += e->first + "\t" + c.kind + "\t" + std::to_string(std::llround(cpu * 1000)) + "\t" +
           std::to_string(std::llround(std::max(0.0, c.wall_seconds) * 1000)) + "\t" +
           std::to_string(c.peak_rss_bytes / 1024) + "\t" + serial + "\t" + splittable +
           (c.later_fields.empty() ? "" : "\t" + c.later_fields) + "\n";
  }
  for (const auto& line : log.later_lines) out += line + "\n";
  return out;
}

JobCost merge_job_cost(JobCost preferred, const JobCost& other) {
  // Measured without its split (no `nvcc --time`: a launcher ran it), or
  // logged before version 3: the other's fraction still holds for its CPU seconds.
  if (preferred.serial_seconds < 0 && other.serial_seconds >= 0 && other.cpu_seconds > 0)
    preferred.serial_seconds =
        std::max(0.0, preferred.cpu_seconds) * std::min(1.0, other.serial_seconds / other.cpu_seconds);
  if (preferred.later_fields.empty()) preferred.later_fields = other.later_fields;  // a later version's stay
  return preferred;
}

void merge_learned(CostLog& log, const std::unordered_map<std::string, JobCost>& learned) {
  for (const auto& [id, cost] : learned) {
    auto [it, added] = log.jobs.try_emplace(id, cost);
    if (!added) it->second = merge_job_cost(cost, it->second);
  }
}

std::optional<std::string> shared_costs_text(const std::optional<std::string>& held,
                                             const std::unordered_map<std::string, JobCost>& learned) {
  CostLog log;
  if (held) log = parse_cost_log(*held);
  merge_learned(log, learned);
  std::string text = format_cost_log(log);
  if (text.size() > kMaxSharedCostsBytes && held) return shared_costs_text(std::nullopt, learned);
  if (text.size() > kMaxSharedCostsBytes) return std::nullopt;
  return text;
}

CostModel::CostModel(std::string log_path, uint64_t memory_budget, cache::EntryStorage* shared)
    : path_(std::move(log_path)),
      memory_budget_(memory_budget),
      shared_(shared),
      sizer_(std::make_unique<SourceSizer>()) {}

CostModel::~CostModel() = default;

void CostModel::load_local_locked() {
  if (local_loaded_) return;
  local_loaded_ = true;
  if (path_.empty()) return;
  auto text = util::read_small_file(path_, kMaxLogBytes);
  if (!text) {
    spdlog::debug("no cost log read from {}: {}", path_, text.why());
    return;
  }
  absorb_locked(parse_cost_log(*text), "cost log " + path_);
}

void CostModel::load_locked() {
  load_local_locked();
  if (shared_loaded_) return;
  shared_loaded_ = true;
  if (!shared_) return;
  // Under the model's lock: the first estimates wait for the remotes'
  // answer (their deadlines bound it) instead of being made without it.
  for (const std::string& text : shared_->get_shared_objects(kSharedCostsObject, kMaxSharedCostsBytes)) {
    CostLog log = parse_cost_log(text);
    spdlog::debug("the remote costs object holds {} job(s) in {} bytes", log.jobs.size(), text.size());
    // Its peaks only order and size nothing: a writer of the remote who set
    // every peak tiny would make the gate admit -j jobs whatever the memory.
    // A job's reservation comes from this machine's log or its kind.
    for (auto& [id, cost] : log.jobs) cost.peak_rss_bytes = 0;
    absorb_locked(std::move(log), "the remote costs object");
  }
}

void CostModel::absorb_locked(CostLog log, const std::string& where) {
  size_t unbelievable = 0;
  uint64_t largest = 0;
  for (auto& [id, cost] : log.jobs) {
    if (memory_budget_ > 0 && cost.peak_rss_bytes > memory_budget_) {
      // Not a peak this machine could have measured: the job reserves as
      // its kind does. A job that does need more still runs alone (the gate
      // clamps a reservation to its budget).
      largest = std::max(largest, cost.peak_rss_bytes);
      ++unbelievable;
      cost.peak_rss_bytes = 0;
    }
    auto [it, added] = known_.try_emplace(id, cost);
    if (!added) {
      it->second = merge_job_cost(std::move(it->second), cost);
      continue;
    }
    if (id[0] == 'u') {
      auto& t = kind_totals_[cost.kind];
      t.first += cost.cpu_seconds;
      t.second += 1;
    }
  }
  if (unbelievable > 0)
    spdlog::warn("{}: {} job(s) learned a peak memory larger than the {} this build may use (up to {}); "
                 "not used for their reservations (the log is a hint: delete it to forget every cost)",
                 where, unbelievable, util::format_bytes(memory_budget_), util::format_bytes(largest));
}

std::string CostModel::kind_of(const CompileStep& step) const {
  switch (step.language) {
    case Language::kCuda: return "nvcc/" + std::to_string(std::max(1, step.gencode_targets()));
    case Language::kHip: return "hipcc/1";
    case Language::kC: return "cc";
    case Language::kCxx: return "c++";
  }
  return "c++";
}

CostEstimate CostModel::estimate_unit(const CostScope& scope, const CompileStep& step, bool scan_sources) {
  return estimate_unit_with(scope, step, scan_sources, true);
}

CostEstimate CostModel::estimate_link(const std::string& module) { return estimate_link_with(module, true); }

CostEstimate CostModel::estimate_unit_with(const CostScope& scope, const CompileStep& step, bool scan_sources,
                                           bool with_shared) {
  const std::string kind = kind_of(step);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    with_shared ? load_locked() : load_local_locked();
    if (auto it = known_.find(unit_cost_id(scope, step)); it != known_.end())
      return {it->second, EstimateSource::kLog};
    if (auto it = known_.find(unit_source_cost_id(scope, step)); it != known_.end())
      return {it->second, EstimateSource::kSameSource};
  }
  // A device unit never built: from what its preprocessor may read, which
  // ranks a kernel library's units where one mean per kind cannot (the
  // sizer has its own lock: other jobs' estimates do not wait for its reads).
  if (scan_sources && device_kind(kind)) {
    if (const uint64_t bytes = sizer_->closure_bytes(step); bytes > 0) {
      const double cpu = source_size_cpu_seconds(kind, bytes);
      return {JobCost{kind, cpu, cpu, 0}, EstimateSource::kSourceSize};
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = kind_totals_.find(kind); it != kind_totals_.end() && it->second.second > 0)
    return {JobCost{kind, it->second.first / it->second.second, it->second.first / it->second.second, 0},
            EstimateSource::kKindMean};
  const double d = default_cpu_seconds(kind);
  return {JobCost{kind, d, d, 0}, EstimateSource::kDefault};
}

CostEstimate CostModel::estimate_link_with(const std::string& module, bool with_shared) {
  std::lock_guard<std::mutex> lock(mutex_);
  with_shared ? load_locked() : load_local_locked();
  if (auto it = known_.find(link_cost_id(module)); it != known_.end()) return {it->second, EstimateSource::kLog};
  return {JobCost{"link", default_cpu_seconds("link"), default_cpu_seconds("link"), 0}, EstimateSource::kDefault};
}

double CostModel::module_chain_seconds(const CostScope& scope, const BuildPlan& plan, bool scan_sources) {
  double longest = 0;
  for (const auto* steps : {&plan.device_steps, &plan.compile_steps})
    for (const auto& s : *steps)
      longest = std::max(longest, estimate_unit_with(scope, s, scan_sources, false).cost.cpu_seconds);
  return longest + (plan.link ? estimate_link_with(scope.module, false).cost.cpu_seconds : 0);
}

void CostModel::record_unit(const CostScope& scope, const CompileStep& step, const JobCost& measured) {
  JobCost cost = measured;
  cost.kind = kind_of(step);
  std::lock_guard<std::mutex> lock(mutex_);
  load_locked();
  const std::string unit_id = unit_cost_id(scope, step);
  // Measured without its split (no `nvcc --time`: a launcher ran it): the
  // fraction learned before still holds for the new CPU seconds.
  if (auto it = known_.find(unit_id); it != known_.end()) cost = merge_job_cost(std::move(cost), it->second);
  cost.later_fields.clear();  // what a later version wrote stays where it was written (merge_learned)
  for (const std::string& id : {unit_id, unit_source_cost_id(scope, step)}) {
    known_[id] = cost;
    recorded_[id] = cost;
    unshared_[id] = cost;
  }
  auto& t = kind_totals_[cost.kind];
  t.first += cost.cpu_seconds;
  t.second += 1;
}

void CostModel::record_link(const std::string& module, const JobCost& measured) {
  JobCost cost = measured;
  cost.kind = "link";
  std::lock_guard<std::mutex> lock(mutex_);
  load_locked();
  known_[link_cost_id(module)] = cost;
  recorded_[link_cost_id(module)] = cost;
  unshared_[link_cost_id(module)] = cost;
}

void CostModel::save() {
  std::lock_guard<std::mutex> lock(mutex_);
  save_local_locked();
  if (!shared_ || unshared_.empty()) return;
  // Read, merged, written back, on every remote that takes uploads: one
  // round trip each way, bounded by the remotes' deadlines.
  shared_->update_shared_object(kSharedCostsObject, kMaxSharedCostsBytes,
                                [&](const std::optional<std::string>& held) { return shared_costs_text(held, unshared_); });
  unshared_.clear();
}

void CostModel::save_local_locked() {
  if (path_.empty() || recorded_.empty()) return;
  try {
    util::LockOptions lo;
    lo.timeout_seconds = kCostLockWaitSeconds;  // a hint: never hold a build up
    lo.note = "updating the cost log";
    util::FileLock file_lock = util::FileLock::acquire(util::join_path(util::parent_path(path_), "costs.lock"), lo);
    if (!file_lock.locked()) {
      // Under -v: the build did not wait, and says why nothing was learned.
      if (util::log_verbosity() >= 1) {
        const auto& holder = file_lock.last_holder();
        spdlog::info("cost log {} not updated: {} (what this build's jobs cost is not learned)", path_,
                     file_lock.status() == util::LockStatus::kTimedOut
                         ? "costs.lock is held by " + (holder ? holder->text : std::string("another process"))
                         : std::string("costs.lock cannot be locked"));
      }
      return;
    }
    CostLog merged;
    if (auto text = util::read_small_file(path_, kMaxLogBytes)) merged = parse_cost_log(*text);
    merge_learned(merged, recorded_);
    util::write_file_atomic(path_, format_cost_log(merged));
    recorded_.clear();
  } catch (const Error& e) {
    spdlog::debug("cost log {} not saved: {}", path_, e.what());
  }
}

std::unordered_map<std::string, JobCost> CostModel::entries() {
  std::lock_guard<std::mutex> lock(mutex_);
  load_locked();
  return known_;
}

}  // namespace tvmffi_jit::compile
