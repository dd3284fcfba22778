#include "tvmffi_jit/cache/storage.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <chrono>
#include <future>

#include "tvmffi_jit/cache/transfer/portable_entry.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

using K = RemoteFailureKind;

// Below this much free space the cache is treated as full: a compile that
// runs out of space half-way fails with a confusing message, so build
// outside the root instead (and say why).
constexpr uint64_t kMinFreeBytes = 64ull << 20;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The files of a one-entry blob into a staging entry dir, as they arrive. The
// manifest is checked first (begin): the entry asked for, and under trusted
// keys its signature, so an untrusted blob writes nothing at all.
class EntryReceiver : public BlobFileWriter {
 public:
  EntryReceiver(std::string dir, std::string expected_dir, std::string expected_key, const RemoteOptions& options)
      : dir_(std::move(dir)),
        expected_dir_(std::move(expected_dir)),
        expected_key_(std::move(expected_key)),
        options_(options) {}
  void begin(const BlobManifest& m) override {
    const BlobEntry& e = m.entries.front();
    if (e.key != expected_key_ || e.dir != expected_dir_)
      throw io_error("the blob holds " + e.dir + ", not " + expected_dir_);
    untrusted_ = untrusted_reason(options_, e);
    // Stops the reader before any file is written; the caller asks untrusted().
    if (untrusted_) throw io_error(*untrusted_);
    record_ = e;
  }
  const BlobEntry& record() const { return record_; }
  const std::optional<std::string>& untrusted() const { return untrusted_; }

 private:
  std::string path_for(const BlobEntry&, const BlobFile& f) override { return util::join_path(dir_, f.name); }
  std::string dir_;
  std::string expected_dir_, expected_key_;
  const RemoteOptions& options_;
  BlobEntry record_;
  std::optional<std::string> untrusted_;
};

std::string portable_dir_name(const EntryRequest& r) { return r.name + "_" + r.key.portable_hex.substr(0, 16); }

RemoteFailure from_adopt(const AdoptFailure& f) {
  return {f.kind == AdoptFailureKind::kStale ? K::kStale : K::kCorrupt, f.message};
}

}  // namespace

const char* cache_status_name(CacheStatus status) {
  switch (status) {
    case CacheStatus::kHit: return "hit";
    case CacheStatus::kRemoteHit: return "remote-hit";
    case CacheStatus::kMiss: return "miss";
  }
  return "miss";
}

struct Storage::Server {
  std::optional<RemoteUrl> url;  // empty: `backend` was given
  // How it names objects: given backends (in-memory ones) as paths.
  RemoteScheme scheme = RemoteScheme::kHttp;
  std::string shown;  // redacted
  std::unique_ptr<RemoteBackend> backend;
  bool down = false;
};

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

Storage::~Storage() = default;

RemoteBackend* Storage::open(Server& s) {
  if (s.backend) return s.backend.get();
  const auto t0 = std::chrono::steady_clock::now();
  RemoteOpen opened = make_remote_backend(*s.url, options_);
  if (!opened) {
    give_up(s, opened.error(), ms_since(t0));
    return nullptr;
  }
  s.backend = options_.read_only ? read_only(std::move(opened).value()) : std::move(opened).value();
  return s.backend.get();
}

void Storage::give_up(Server& s, const RemoteFailure& f, double elapsed_ms) {
  s.down = true;
  s.backend.reset();
  stats_->remote_errors += 1;
  if (f.kind == K::kTimeout) stats_->remote_timeouts += 1;
  spdlog::warn("remote cache {}: {} (after {:.0f} ms); not using it again in this build", s.shown, f.message,
               elapsed_ms);
}

void Storage::count_untrusted(const std::string& source, const std::string& name, const std::string& why) {
  stats_->remote_untrusted += 1;
  // Once per process: a batch of many modules against a server full of
  // unsigned entries says it once; `cache stats` has the count.
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    spdlog::warn("{}: the entry for {} is not used: {}; building (with --remote-trusted-key only entries signed by "
                 "a trusted key are used, and a signing build uses only what carries its own key's signature: "
                 "docs/remote.md, \"Trust\"). Further untrusted entries are counted as `remote untrusted` "
                 "in `tvmffi-jit cache stats`",
                 source, name, why);
  else
    spdlog::info("{}: the entry for {} is not used: {}", source, name, why);
}

// What a server sent that is not usable: counted by kind, then a miss.
void Storage::count_failure(Server& s, const RemoteFailure& f, const std::string& module) {
  switch (f.kind) {
    case K::kStale:
      spdlog::info("remote cache {}: the entry for {} was built against other headers ({}); building", s.shown,
                   module, f.message);
      return;
    case K::kUntrusted:
      count_untrusted("remote cache " + s.shown, module, f.message);
      return;
    case K::kCorrupt:
    case K::kError:
    case K::kTimeout:
      stats_->remote_corrupt += 1;
      spdlog::warn("remote cache {}: the blob for {} is unusable ({}); building", s.shown, module, f.message);
      return;
  }
}

std::optional<std::string> Storage::cannot_take_entry() {
  if (!store_.check_writable()) return store_.unwritable_why();
  struct statvfs vfs;
  if (::statvfs(store_.root().c_str(), &vfs) == 0) {
    uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free_bytes < kMinFreeBytes)
      return "the filesystem of " + store_.root() + " is full (" + util::format_bytes(free_bytes) + " free)";
  }
  return std::nullopt;
}

KeepOccupant Storage::keep_occupant(const std::string& entry_dir) const {
  if (replace_.count(entry_dir)) return [](const EntryRecord&) { return false; };
  if (!policy_.active()) return {};
  return [this](const EntryRecord& occupant) { return !policy_.refuses(occupant); };
}

Found Storage::find(const EntryRequest& request, const FindOptions& options) {
  Found miss;
  if (options.force) {
    // --force replaces: what the build publishes takes the place of whatever
    // is there, however valid it looks (it may be the stale or tampered entry
    // the user is forcing out).
    replace_.insert(request.entry_dir);
    miss.miss_reason = "--force";
  } else {
    miss = get(request, Tier::kLocal);
    if (miss.hit()) return miss;
    miss.miss_reason = miss.entry.miss_reason;
  }
  if (options.local_only) return miss;  // the caller builds (or asks the remotes) in a process of its own
  // A shared hit is published locally: a root that cannot take an entry
  // goes straight to a build outside it.
  miss.cannot_store = cannot_take_entry();
  if (!miss.cannot_store) {
    miss.lock = store_.lock(request.entry_dir, options.lock_what, options.lock_timeout_seconds);
    // Whoever held the lock may have just published this very entry.
    if (!options.force || miss.lock.waited_seconds() > 0.05) {
      Found again = get(request, Tier::kLocal);
      if (again.hit()) return again;
    }
    if (!options.force) {
      Found shared = get(request, Tier::kShared);
      if (shared.hit()) return shared;
    }
  }
  stats_->misses += 1;  // the answer is a build
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
      record.artifacts.push_back({name, stamp->size, util::sha256_file_hex(from)});
    }
  }
  record.provenance = built_provenance(record, policy_.sign_key);
  PublishResult p = store_.publish(staging, request.entry_dir, std::move(record), files, keep_occupant(request.entry_dir));
  if (p.ours) {
    stats_->stores += 1;
    stats_->bytes_stored += p.entry.artifacts.front().size;
  }
  return p;
}

Found Storage::get(const EntryRequest& request, Tier tier) {
  if (tier == Tier::kLocal) {
    Found f;
    f.entry = store_.lookup(request.entry_dir, request.key.hex, request.lookup);
    // The trust policy holds at this door too: an entry adopted by a build
    // without trusted keys is not a hit for one with them.
    if (f.entry.hit && policy_.active()) {
      if (auto why = policy_.refuses(*f.entry.entry)) {
        f.entry.hit = false;
        f.entry.miss_reason = "not trusted: " + *why;
        replace_.insert(request.entry_dir);
        if (counted_untrusted_.insert(request.entry_dir).second)
          count_untrusted("cache entry " + request.entry_dir, request.name, *why);
      }
    }
    spdlog::debug("cache: module {}: {}", request.name,
                  f.entry.hit ? "hit in " + f.entry.entry_dir : "miss (" + f.entry.miss_reason + ")");
    if (f.entry.hit) {
      f.status = CacheStatus::kHit;
      stats_->hits += 1;
    } else if (f.entry.corrupt && counted_corrupt_.insert(request.entry_dir).second) {
      stats_->corrupt_entries += 1;
    }
    return f;
  }
  if (auto f = get_imported(request)) return std::move(*f);
  if (auto f = get_remote(request)) return std::move(*f);
  return Found{};
}

std::optional<Found> Storage::get_imported(const EntryRequest& request) {
  const std::string dir_name = portable_dir_name(request);
  const std::string imported = util::join_path(imported_dir(store_), dir_name);
  struct stat st;
  if (::lstat(imported.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  try {
    // The manifest record it was imported with (older imports have none).
    std::optional<BlobEntry> record = imported_record(imported, dir_name, request.key.portable_hex);
    std::optional<std::string> untrusted;
    if (options_.requires_signature())
      untrusted = record ? untrusted_reason(options_, *record)
                         : std::optional<std::string>("it was imported without its signatures");
    if (untrusted) {
      count_untrusted("imported entry " + imported, request.name, *untrusted);
      return std::nullopt;
    }
    Staging staging = store_.stage();
    stage_imported_entry(imported, staging);
    auto adopted = adopt_portable_entry(store_, staging, adopt_request(request, "imported"), record ? &*record : nullptr);
    if (!adopted) {
      spdlog::info("imported entry {} is not usable here: {}", imported,
                   adopted.error().kind == AdoptFailureKind::kStale ? "stale: " + adopted.why() : adopted.why());
      return std::nullopt;
    }
    stats_->imported_hits += 1;
    return Found{CacheStatus::kRemoteHit, std::move(adopted).value(), "imported"};
  } catch (const Error& e) {
    // Reading the import or publishing it failed (Error(kIo)): not usable
    // here, like an entry that fails verification. A signal ends the build.
    if (util::termination_signal() != 0) throw;
    spdlog::info("imported entry {} is not usable here: {}", imported, e.what());
  }
  return std::nullopt;
}

std::optional<Found> Storage::get_remote(const EntryRequest& request) {
  if (servers_.empty()) return std::nullopt;
  // OpenSSL's ed25519 set-up (~1 ms) overlaps the download instead of
  // following it; joined before any blob is read.
  std::future<void> crypto_ready;
  if (options_.requires_signature())
    crypto_ready = std::async(std::launch::async, [] {
      try {
        prepare_signature_check();
      } catch (const Error&) {
        // trusted_signer() reports what is wrong when it needs OpenSSL.
      }
    });
  bool asked = false;
  for (auto& sp : servers_) {
    Server& s = *sp;
    if (s.down) continue;
    const auto t0 = std::chrono::steady_clock::now();
    RemoteBackend* backend = open(s);
    if (!backend) continue;
    RemoteGet blob = backend->get(remote_object_name(s.scheme, options_.key_namespace, request.key.portable_hex),
                                  options_.max_blob_bytes);
    if (!blob) {
      give_up(s, blob.error(), ms_since(t0));
      continue;
    }
    asked = true;
    if (!*blob) continue;
    const std::string& bytes = **blob;
    stats_->remote_bytes_received += bytes.size();
    if (crypto_ready.valid()) crypto_ready.wait();
    std::optional<RemoteFailure> unusable;
    try {
      Staging staging = store_.stage();
      EntryReceiver rx(staging.entry_dir(), portable_dir_name(request), request.key.portable_hex, options_);
      try {
        read_blob(blob_source(bytes), rx, BlobLimits{});
      } catch (const Error&) {
        if (!rx.untrusted() || util::termination_signal() != 0) throw;
        unusable = RemoteFailure{K::kUntrusted, *rx.untrusted()};
      }
      if (!unusable) {
        auto adopted = adopt_portable_entry(store_, staging, adopt_request(request, s.shown), &rx.record());
        if (adopted) {
          stats_->remote_hits += 1;
          return Found{CacheStatus::kRemoteHit, std::move(adopted).value(), s.shown};
        }
        unusable = from_adopt(adopted.error());
      }
    } catch (const Error& e) {
      // The blob reader and the publish throw Error(kIo): a blob that does
      // not read back (bad archive, hash mismatch) is a corrupt one.
      if (util::termination_signal() != 0) throw;
      unusable = RemoteFailure{K::kCorrupt, e.what()};
    }
    count_failure(s, *unusable, request.name);
  }
  if (asked) stats_->remote_misses += 1;
  return std::nullopt;
}

AdoptRequest Storage::adopt_request(const EntryRequest& r, const std::string& source) const {
  return AdoptRequest{r.name,     r.key.portable_hex, r.base_dir, r.entry_dir, r.artifact,
                      source,     keep_occupant(r.entry_dir), r.adoptable_roots};
}

void Storage::upload(const EntryRequest& request, const std::string& entry_dir) {
  // Every remote is behind the read-only wrapper: nothing to pack or connect for.
  if (options_.read_only) return;
  if (policy_.sign_key && !servers_.empty()) {
    // Never a signing oracle: only what this key's build made gets its signature.
    std::string why;
    auto entry = read_entry(entry_dir, &why);
    if (!entry || !carries_own_signature(*policy_.sign_key, *entry)) {
      spdlog::warn("not uploading {}: it does not carry the signature of {} (a signing build uploads only what it "
                   "built itself)", entry_dir, policy_.sign_key->name);
      return;
    }
  }
  std::string blob;
  for (auto& sp : servers_) {
    Server& s = *sp;
    if (s.down) continue;
    if (blob.empty()) {
      try {
        blob = pack_portable_entry(entry_dir, options_.sign_key ? &*options_.sign_key : nullptr);
      } catch (const Error& e) {
        spdlog::warn("cannot pack {} for the remote cache: {}", entry_dir, e.what());
        return;
      }
      if (blob.size() > options_.max_blob_bytes) {
        spdlog::warn("not uploading {}: its blob has {} bytes, above the {} byte limit", entry_dir, blob.size(),
                     options_.max_blob_bytes);
        return;
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    RemoteBackend* backend = open(s);
    if (!backend) continue;
    RemotePut put = backend->put(remote_object_name(s.scheme, options_.key_namespace, request.key.portable_hex), blob);
    if (!put) {
      give_up(s, put.error(), ms_since(t0));
      continue;
    }
    stats_->remote_stores += 1;
    stats_->remote_bytes_sent += blob.size();
  }
}

}  // namespace tvmffi_jit::cache
