#include "cache/store/watched_proofs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <ctime>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/util/fork_safe.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

// How old a stat-checked file's mtime and ctime must be when its stamp is
// taken for the stamp to catch every later write: a timestamp is a coarse
// clock read (one jiffy, at most 10 ms) on the filesystems whose stamps are
// trusted, so a write within the same tick as the stamp's could leave it as
// it was. Younger: the full proof runs again on the next lookup.
constexpr int64_t kWatchSettledNs = 50 * int64_t{1000000};
// A proof not hit for this long gives its watches back (at the next put).
constexpr int64_t kIdleProofNs = 10 * 60 * int64_t{1000000000};
constexpr int64_t kIdleSweepEveryNs = 60 * int64_t{1000000000};

int64_t monotonic_ns() {
  struct timespec now;
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Results proven while watched (util/change_watch.h): entry dir -> the stamp
// of the entry.json that was proven, the proof, and the files a hit still
// stats. Every kept proof holds references on its watches; one replaced,
// voided, not hit for kIdleProofNs, or given back for room releases them.
// Per process, fork-safe (a child's ChangeWatch voids every proof taken
// before the fork, and holds none of its watches). This lock and the
// ChangeWatch's are never held together.
class WatchedProofs {
 public:
  static WatchedProofs& global() {
    static WatchedProofs* p = new WatchedProofs;  // never destroyed: used until exit
    return *p;
  }
  // Whether the proof kept for `entry_dir` at exactly `stamp` still holds:
  // no event touched what it watched, and every stat-checked file has the
  // stamp it had. A proof that fails is released.
  bool holds(const std::string& entry_dir, const util::FullStamp& stamp) {
    std::shared_ptr<Kept> kept;
    {
      std::lock_guard<util::ForkSafeMutex> g(mutex_);
      auto it = proofs_.find(entry_dir);
      if (it == proofs_.end()) return false;
      kept = it->second;
      kept->last_hit_ns.store(monotonic_ns(), std::memory_order_relaxed);
    }
    bool held = kept->entry_stamp == stamp && util::ChangeWatch::global().unchanged(kept->proof);
    for (size_t i = 0; held && i < kept->stat_checked.size(); ++i) {
      const StatChecked& f = kept->stat_checked[i];
      auto now = util::full_stamp(f.path, f.follow_symlinks);
      held = now && *now == f.stamp;
    }
    if (!held) forget(entry_dir, kept.get());
    return held;
  }
  void put(const std::string& entry_dir, const util::FullStamp& stamp, util::ChangeWatch::Proof proof,
           std::vector<StatChecked> stat_checked) {
    auto kept = std::make_shared<Kept>();
    kept->entry_stamp = stamp;
    kept->proof = std::move(proof);
    kept->stat_checked = std::move(stat_checked);
    const int64_t now = monotonic_ns();
    kept->last_hit_ns.store(now, std::memory_order_relaxed);
    std::vector<std::shared_ptr<Kept>> released;
    {
      std::lock_guard<util::ForkSafeMutex> g(mutex_);
      if (proofs_.size() >= kCapacity && !proofs_.count(entry_dir)) take_least_recent_locked(released);
      if (now - last_sweep_ns_ >= kIdleSweepEveryNs) {
        take_idle_locked(now - kIdleProofNs, released);
        last_sweep_ns_ = now;
      }
      auto& slot = proofs_[entry_dir];
      if (slot) released.push_back(std::move(slot));
      slot = std::move(kept);
    }
    release(released);
  }
  void forget(const std::string& entry_dir, const void* only = nullptr) {
    std::vector<std::shared_ptr<Kept>> released;
    {
      std::lock_guard<util::ForkSafeMutex> g(mutex_);
      auto it = proofs_.find(entry_dir);
      if (it == proofs_.end() || (only && it->second.get() != only)) return;
      released.push_back(std::move(it->second));
      proofs_.erase(it);
    }
    release(released);
  }
  // Gives back the watches of the least recently hit half of the kept
  // proofs (at least one): room for a new proof within the process's share.
  bool give_back_least_recent() {
    std::vector<std::shared_ptr<Kept>> released;
    {
      std::lock_guard<util::ForkSafeMutex> g(mutex_);
      take_least_recent_locked(released);
    }
    release(released);
    return !released.empty();
  }
  size_t give_back_idle(int64_t idle_ns) {
    std::vector<std::shared_ptr<Kept>> released;
    {
      std::lock_guard<util::ForkSafeMutex> g(mutex_);
      take_idle_locked(monotonic_ns() - idle_ns, released);
    }
    release(released);
    return released.size();
  }

 private:
  struct Kept {
    util::FullStamp entry_stamp;
    util::ChangeWatch::Proof proof;  // its epoch advances under the ChangeWatch's own lock
    std::vector<StatChecked> stat_checked;
    std::atomic<int64_t> last_hit_ns{0};
  };
  static constexpr size_t kCapacity = 4096;

  void take_least_recent_locked(std::vector<std::shared_ptr<Kept>>& out) {
    if (proofs_.empty()) return;
    std::vector<int64_t> hits;
    hits.reserve(proofs_.size());
    for (const auto& [dir, kept] : proofs_) hits.push_back(kept->last_hit_ns.load(std::memory_order_relaxed));
    auto middle = hits.begin() + static_cast<std::ptrdiff_t>((hits.size() - 1) / 2);
    std::nth_element(hits.begin(), middle, hits.end());
    take_idle_locked(*middle + 1, out);  // hit at or before the median
  }
  void take_idle_locked(int64_t hit_before_ns, std::vector<std::shared_ptr<Kept>>& out) {
    for (auto it = proofs_.begin(); it != proofs_.end();) {
      if (it->second->last_hit_ns.load(std::memory_order_relaxed) < hit_before_ns) {
        out.push_back(std::move(it->second));
        it = proofs_.erase(it);
      } else {
        ++it;
      }
    }
  }
  static void release(const std::vector<std::shared_ptr<Kept>>& proofs) {
    for (const auto& kept : proofs) util::ChangeWatch::global().release(kept->proof);
  }

  util::ForkSafeMutex mutex_;
  int64_t last_sweep_ns_ = 0;
  std::unordered_map<std::string, std::shared_ptr<Kept>> proofs_;
};

bool under_any(const std::string& path, const std::vector<std::string>& dirs) {
  for (const auto& d : dirs)
    if (!d.empty() && util::starts_with(path, d) &&
        (path.size() == d.size() || path[d.size()] == '/' || d.back() == '/'))
      return true;
  return false;
}

}  // namespace

// What a result's proof depends on: its artifacts and recorded inputs, which
// must keep their content, and the shadows, which must stay absent. A proof
// that does not fit in the process's share of watches gets the room of the
// least recently hit proofs, once.
PendingProof watch_result(const std::string& entry_dir, const EntryRecord& entry) {
  util::ChangeWatch& watch = util::ChangeWatch::global();
  std::vector<std::string> present, absent;
  for (const auto& a : entry.artifacts) present.push_back(util::join_path(entry_dir, a.file));
  for (const auto& h : entry.headers) {
    present.push_back(h.path);
    absent.insert(absent.end(), h.shadows.begin(), h.shadows.end());
  }
  auto proof = watch.watch(present, absent);
  if (!proof && proof.error().kind == util::WatchRefusal::kBudget && present.size() < watch.budget() &&
      WatchedProofs::global().give_back_least_recent())
    proof = watch.watch(present, absent);
  if (!proof) return PendingProof();
  return PendingProof(std::move(*proof));
}

// The files a watched hit of this result stats (StatChecked): the artifacts
// it hands back, and every recorded input the calling user owns (the writes
// a watch cannot see are most likely the user's own: an editor or tool
// writing through a mapping), for root those outside `toolchain_dirs` (root
// owns every system header: a stat of each, ~1 us, would cost more than the
// rest of the hit). Their stamps are taken now, before the proving checks.
// nullopt: one is too young for its stamp to catch the next write
// (kWatchSettledNs), or cannot be stat'ed: keep no proof.
std::optional<std::vector<StatChecked>> stamp_stat_checked(const std::string& entry_dir, const EntryRecord& entry,
                                                           const std::vector<std::string>& toolchain_dirs) {
  std::vector<StatChecked> out;
  const int64_t now = util::realtime_now_ns();
  const uid_t me = ::geteuid();
  auto add = [&](std::string path, bool follow, bool owned_only) {
    if (owned_only && me == 0 && under_any(path, toolchain_dirs)) return true;
    struct stat st;
    if ((follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) return false;
    if (owned_only && st.st_uid != me) return true;
    StatChecked f{std::move(path), follow, util::full_stamp_of(st)};
    if (now - f.stamp.mtime_ns < kWatchSettledNs || now - f.stamp.ctime_ns < kWatchSettledNs) return false;
    out.push_back(std::move(f));
    return true;
  };
  for (const auto& a : entry.artifacts)
    if (!add(util::join_path(entry_dir, a.file), false, false)) return std::nullopt;
  for (const auto& h : entry.headers)
    if (!add(h.path, true, true)) return std::nullopt;
  return out;
}

bool watched_proof_holds(const std::string& entry_dir, const util::FullStamp& entry_stamp) {
  return WatchedProofs::global().holds(entry_dir, entry_stamp);
}

void keep_watched_proof(const std::string& entry_dir, const util::FullStamp& entry_stamp,
                        util::ChangeWatch::Proof proof, std::vector<StatChecked> stat_checked) {
  WatchedProofs::global().put(entry_dir, entry_stamp, std::move(proof), std::move(stat_checked));
}

size_t give_back_idle_watches(int64_t idle_ns) { return WatchedProofs::global().give_back_idle(idle_ns); }

}  // namespace tvmffi_jit::cache
