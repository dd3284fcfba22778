// What the tiers of cache::Storage (cache/storage.h) share, below them all
// (cache/storage.cpp: the local and imported tiers; cache/storage_remote.cpp:
// the remote one): the counts and their flush to the root's journal, the
// warning for an untrusted entry, and the trust policy's say over an
// occupant and an adoption.
#include <atomic>
#include <mutex>

#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::cache {

void Storage::tally(uint64_t StatsCounters::*counter, uint64_t n) {
  std::lock_guard<std::mutex> lock(counts_mutex_);
  unflushed_.*counter += n;
  if (stats_) (*stats_).*counter += n;
}

void Storage::count_corrupt(const std::string& entry_dir) {
  {
    std::lock_guard<std::mutex> lock(counts_mutex_);
    if (!counted_corrupt_.insert(entry_dir).second) return;
  }
  tally(&StatsCounters::corrupt_entries);
}

void Storage::count(const StatsCounters& delta) {
  std::lock_guard<std::mutex> lock(counts_mutex_);
  unflushed_.add(delta);
  if (stats_) stats_->add(delta);
}

void Storage::flush_counts() {
  StatsCounters delta;
  {
    std::lock_guard<std::mutex> lock(counts_mutex_);
    std::swap(delta, unflushed_);
  }
  if (!delta.empty()) store_.count(delta);
}

void Storage::count_untrusted(const std::string& source, const std::string& name, const std::string& why) {
  tally(&StatsCounters::remote_untrusted);
  // Once per process: a batch of many modules against a server full of
  // unsigned entries says it once; `cache stats` has the count.
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    spdlog::warn("{}: the entry for {} is not used: {}; building (with --remote-trusted-key only entries signed by "
                 "a trusted key are used, and a signing build uses only what it built itself or what its own key "
                 "or a trusted key signed: docs/remote.md, \"Trust\"). Further untrusted entries are counted as "
                 "`remote untrusted` in `tvmffi-jit cache stats`",
                 source, name, why);
  else
    spdlog::info("{}: the entry for {} is not used: {}", source, name, why);
}

KeepOccupant Storage::keep_occupant(const std::string& key_dir) const {
  bool replace;
  {
    std::lock_guard<std::mutex> lock(counts_mutex_);
    replace = replace_.count(key_dir) != 0;
  }
  if (replace) return [](const EntryRecord&) { return false; };
  if (!policy_.active()) return {};
  return [this](const EntryRecord& occupant) { return !policy_.refuses(occupant); };
}

AdoptRequest Storage::adopt_request(const EntryRequest& r, const std::string& source,
                                    const std::string& result_id) const {
  return AdoptRequest{r.name,    r.key.portable_hex, r.base_dir, r.key_dir,
                      r.artifact, result_id,         source,     keep_occupant(r.key_dir),
                      r.adoptable_roots ? r.adoptable_roots() : std::vector<std::string>{}};
}

}  // namespace tvmffi_jit::cache
