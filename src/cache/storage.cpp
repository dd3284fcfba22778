// cache::Storage (cache/storage.h), the facade over the tiers: their order
// (find), the local and imported tiers, publish. The remote tier is
// cache/storage_remote.cpp; what the tiers share (counts, the trust policy's
// say over occupants and adoptions) is cache/storage_shared.cpp.
#include "tvmffi_jit/cache/storage.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <future>
#include <mutex>

#include "cache/storage_server.h"
#include "tvmffi_jit/cache/results.h"
#include "tvmffi_jit/cache/transfer/portable_entry.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

// Below this much free space the cache is treated as full: a compile that
// runs out of space half-way fails with a confusing message, so build
// outside the root instead (and say why).
constexpr uint64_t kMinFreeBytes = 64ull << 20;

}  // namespace

const char* cache_status_name(CacheStatus status) {
  switch (status) {
    case CacheStatus::kHit: return "hit";
    case CacheStatus::kRemoteHit: return "remote-hit";
    case CacheStatus::kMiss: return "miss";
  }
  return "miss";
}

Storage::Storage(Store& store, RemoteOptions options, StatsCounters* stats)
    : store_(store), options_(std::move(options)), stats_(stats) {
  policy_.trusted = options_.trusted_keys;
  policy_.sign_key = options_.sign_key ? &*options_.sign_key : nullptr;
  for (const auto& url : options_.servers) {
    auto s = std::make_unique<Server>();
    s->url = url;
    s->scheme = url.scheme;
    s->shown = url.shown;
    servers_.push_back(std::move(s));
  }
}

Storage::Storage(Store& store, RemoteOptions options, StatsCounters* stats,
                 std::vector<std::unique_ptr<RemoteBackend>> backends)
    : store_(store), options_(std::move(options)), stats_(stats) {
  policy_.trusted = options_.trusted_keys;
  policy_.sign_key = options_.sign_key ? &*options_.sign_key : nullptr;
  for (auto& b : backends) {
    auto s = std::make_unique<Server>();
    s->shown = b->name();
    s->backend = options_.read_only ? read_only(std::move(b)) : std::move(b);
    servers_.push_back(std::move(s));
  }
}

Storage::~Storage() {
  if (crypto_ready_.valid()) crypto_ready_.wait();
  flush_counts();
}

void Storage::start_signature_warmup(std::shared_future<void> started) {
  if (!policy_.active()) return;
  std::lock_guard<std::mutex> lock(counts_mutex_);
  if (!crypto_ready_.valid()) crypto_ready_ = started.valid() ? std::move(started) : start_signature_setup();
}

LookupResult Storage::find_object(const std::string& key_hex) {
  LookupOptions verify_object;
  verify_object.rehash_artifacts = true;  // objects keep full hashing (cache/proof.h)
  LookupResult r = store_.lookup(store_.object_entry_dir(key_hex), key_hex, verify_object);
  if (r.corrupt) count_corrupt(r.entry_dir);
  return r;
}

PublishResult Storage::publish_object(Staging& staging, const std::string& key_hex, EntryRecord record,
                                      const std::vector<std::pair<std::string, std::string>>& files,
                                      const KeepOccupant& keep) {
  PublishResult p = store_.publish(staging, store_.object_entry_dir(key_hex), std::move(record), files, keep);
  if (p.ours) {
    tally(&StatsCounters::stores);
    tally(&StatsCounters::bytes_stored, p.entry.artifacts.front().size);
  }
  return p;
}

Expected<void> Storage::can_take_entry() {
  {
    std::lock_guard<std::mutex> lock(root_mutex_);
    if (!store_.check_writable()) return Unexpected{store_.unwritable_why()};
  }
  struct statvfs vfs;
  if (::statvfs(store_.root().c_str(), &vfs) == 0) {
    uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free_bytes < kMinFreeBytes)
      return Unexpected{"the filesystem of " + store_.root() + " is full (" + util::format_bytes(free_bytes) + " free)"};
  }
  return {};
}

Found Storage::find(const EntryRequest& request, const FindOptions& options) {
  Found miss;
  if (options.force) {
    // --force replaces: what the build publishes takes the place of whatever
    // is there, however valid it looks (it may be the stale or tampered entry
    // the user is forcing out).
    {
      std::lock_guard<std::mutex> lock(counts_mutex_);
      replace_.insert(request.key_dir);
    }
    miss.miss_reason = "--force";
  } else {
    miss = get(request, Tier::kLocal);
    miss.rehashed = miss.entry.rehashed;
    if (miss.hit()) return miss;
    miss.miss_reason = miss.entry.miss_reason;
  }
  if (options.local_only) return miss;  // the caller builds (or asks the remotes) in a process of its own
  // A shared hit is published locally: a root that cannot take an entry
  // goes straight to a build outside it.
  miss.storable = can_take_entry();
  if (miss.storable) {
    miss.lock = store_.lock(request.key_dir, options.lock_what, options.lock_timeout_seconds);
    // Whoever held the lock may have just published this very entry.
    if (!options.force || miss.lock.waited_seconds() > 0.05) {
      Found again = get(request, Tier::kLocal);
      miss.rehashed.add(again.entry.rehashed);
      again.rehashed = miss.rehashed;
      if (again.hit()) return again;
    }
    if (!options.force) {
      Found shared = get(request, Tier::kShared);
      if (shared.hit()) return shared;
    }
  }
  tally(&StatsCounters::misses);  // the answer is a build
  return miss;
}

PublishResult Storage::publish(Staging& staging, const EntryRequest& request, EntryRecord record,
                               const std::vector<std::pair<std::string, std::string>>& files) {
  if (policy_.sign_key) {
    // The signature covers the artifacts as Store::publish will record them.
    record.artifacts.clear();
    for (const auto& [from, name] : files) {
      auto stamp = util::file_stamp(from);
      if (!stamp) throw io_error("cannot stat " + from);
      record.artifacts.push_back({name, stamp->size, util::sha256_file_hex(from), {}});
    }
  }
  record.provenance = built_provenance(record, policy_.sign_key);
  PublishResult p =
      store_.publish_result(staging, request.key_dir, std::move(record), files, keep_occupant(request.key_dir));
  if (p.ours) {
    tally(&StatsCounters::stores);
    tally(&StatsCounters::bytes_stored, p.entry.artifacts.front().size);
  }
  return p;
}

Found Storage::get(const EntryRequest& request, Tier tier) {
  if (tier == Tier::kLocal) {
    Found f;
    LookupOptions lookup = request.lookup;
    // The trust policy holds at this door too: a result adopted by a build
    // without keys is not a hit for one with trusted keys, nor for a signing
    // build unless its own key signed it (the next result of the key is
    // tried instead).
    if (policy_.active()) lookup.refuses = [this](const EntryRecord& e) { return policy_.refuses(e); };
    f.entry = store_.find_result(request.key_dir, request.key.hex, lookup);
    tally(&StatsCounters::rehashed_files, f.entry.rehashed.files);
    tally(&StatsCounters::rehashed_bytes, f.entry.rehashed.bytes);
    for (const auto& [dir, why] : f.entry.refused) {
      bool first;
      {
        std::lock_guard<std::mutex> lock(counts_mutex_);
        first = counted_untrusted_.insert(dir).second;
      }
      if (first) count_untrusted("cache entry " + dir, request.name, why);
    }
    spdlog::debug("cache: module {}: {}", request.name,
                  f.entry.hit ? "hit in " + f.entry.entry_dir : "miss (" + f.entry.miss_reason + ")");
    if (f.entry.hit) {
      f.status = CacheStatus::kHit;
      tally(&StatsCounters::hits);
    } else if (f.entry.corrupt) {
      count_corrupt(request.key_dir);
    }
    return f;
  }
  if (auto f = get_imported(request)) return std::move(*f);
  if (auto f = get_remote(request)) return std::move(*f);
  return Found{};
}

std::optional<Found> Storage::get_imported(const EntryRequest& request) {
  const std::string key_dir = imported_key_dir(store_, request.name, request.key.portable_hex);
  for (const auto& result : list_result_dirs(key_dir)) {
    const std::string& imported = result.path;
    try {
      // The manifest record it was imported with (signatures included),
      // when it is the record of this result: its blob dir names the result.
      std::optional<BlobEntry> record = imported_record(
          imported, request.key.portable_hex.substr(0, 16) + "." + util::file_name(imported), request.key.portable_hex);
      std::optional<std::string> untrusted;
      if (policy_.active())
        untrusted = record ? policy_.refuses_record(*record) : "it was imported without its signatures";
      if (untrusted) {
        count_untrusted("imported entry " + imported, request.name, *untrusted);
        continue;
      }
      Staging staging = store_.stage();
      stage_imported_entry(imported, staging);
      auto adopted = adopt_portable_entry(store_, staging, adopt_request(request, "imported", ""), record ? &*record : nullptr);
      if (!adopted) {
        spdlog::info("imported entry {} is not usable here: {}", imported,
                     adopted.error().kind == AdoptFailureKind::kStale ? "stale: " + adopted.why() : adopted.why());
        continue;
      }
      tally(&StatsCounters::imported_hits);
      return shared_tier_hit(std::move(adopted).value(), "imported");
    } catch (const Error& e) {
      // Reading the import or publishing it failed (Error(kIo)): not usable
      // here, like an entry that fails verification. A signal ends the build.
      if (util::termination_signal() != 0) throw;
      spdlog::info("imported entry {} is not usable here: {}", imported, e.what());
    }
  }
  return std::nullopt;
}

}  // namespace tvmffi_jit::cache
