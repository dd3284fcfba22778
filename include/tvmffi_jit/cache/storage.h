// The storage facade: one door to every tier of the cache (ARCHITECTURE.md,
// "The cache tiers"). The compile layer asks it for an entry and hands it the
// entry it published; which tiers exist, their order, what each checks and
// how their failures are counted is decided here.
//
//   find():     local store -> (miss: the per-key lock, local store again)
//               -> imported entries (`cache import`) -> remote 1 -> remote 2 ...
//               The first tier with a usable entry answers; a shared entry is
//               verified completely and published into the local store (a
//               remote hit is a local entry from then on). A miss holds the
//               lock until the caller has built and published.
//   publish():  the build's entry into the local store (Store::publish).
//   upload():   then that entry, packed once (signed with the sign key), to
//               every remote that takes uploads (none behind the read-only
//               wrapper).
//
// A remote that fails (kError, kTimeout) is given up for the rest of this
// facade's life after one warning; what a remote sent that is not usable
// (kCorrupt, kUntrusted, kStale) is a miss that builds. Every outcome is
// counted into the caller's StatsCounters (`cache stats`).
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/key.h"
#include "tvmffi_jit/cache/remote/options.h"
#include "tvmffi_jit/cache/remote/backend.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/cache/transfer/portable_entry.h"
#include "tvmffi_jit/cache/trust.h"
#include "tvmffi_jit/util/lock.h"

namespace tvmffi_jit::cache {

// How a module was answered. The names are what `build --json` ("cache")
// and the Python package show: cache_status_name() is the one mapping.
enum class CacheStatus { kHit, kRemoteHit, kMiss };
const char* cache_status_name(CacheStatus status);  // "hit", "remote-hit", "miss"

// The entry a build wants.
struct EntryRequest {
  std::string name;       // the module
  Key key;                // hex: the local entry; portable_hex: imported and remote ones
  std::string entry_dir;  // the local entry's directory (Store::module_entry_dir)
  std::string base_dir;   // binds a portable entry to this checkout
  std::string artifact;   // the file the build serves: every tier's entry must list it
  LookupOptions lookup;   // what a local hit checks
  // Where an adopted entry's header and library records may point besides
  // base_dir (the toolchain's and the plan's directories: compile/adoptable_roots.h).
  std::vector<std::string> adoptable_roots;
};

enum class Tier { kLocal, kShared };

struct Found {
  CacheStatus status = CacheStatus::kMiss;
  // A hit: the local entry (for a shared hit, the one it was published as).
  // A local miss: why (miss_reason, corrupt).
  LookupResult entry;
  std::string source;  // shared hits: the server (redacted URL) or "imported"
  bool hit() const { return status != CacheStatus::kMiss; }
  // find()'s misses: why the lookup missed ("absent", "--force", ...); why the
  // root cannot take the entry (the caller builds outside it), or else the
  // per-key lock, held until the caller has published.
  std::string miss_reason;
  std::optional<std::string> cannot_store;
  util::FileLock lock;
};

struct FindOptions {
  bool force = false;       // --force: no lookup, except the local one after waiting on the lock
  bool local_only = false;  // a local hit or a miss: no lock, no shared tier (build --only-if-cached)
  double lock_timeout_seconds = 600;
  std::string lock_what;  // the holder line of the lock ("building m")
};

class Storage {
 public:
  // The remotes of `options.servers`, each opened on first use (a local hit
  // never loads a client library), wrapped read-only with options.read_only.
  Storage(Store& store, RemoteOptions options, StatsCounters* stats);
  // These backends instead of options.servers (tests: in-memory servers).
  Storage(Store& store, RemoteOptions options, StatsCounters* stats,
          std::vector<std::unique_ptr<RemoteBackend>> backends);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // The entry through every tier in order (above). Counts a hit of each kind,
  // and a miss that is not local_only. Throws only what ends the command: a
  // termination signal, a missing client library (exit 4), a lock wait past
  // its timeout, an unsafe root.
  Found find(const EntryRequest& request, const FindOptions& options);

  // The entry from one tier. kShared needs a writable store (a shared hit is
  // published into it).
  Found get(const EntryRequest& request, Tier tier);

  // Store::publish() of the build's entry at the request's entry dir,
  // counted (stores, bytes), with its provenance ("built", signed with the
  // sign key). An occupant stays only if find() did not refuse or skip it
  // (--force) and the trust policy admits it. Throws Error(kIo) as
  // Store::publish does.
  PublishResult publish(Staging& staging, const EntryRequest& request, EntryRecord record,
                        const std::vector<std::pair<std::string, std::string>>& files);

  // After this process published `entry_dir` (the request's entry). A
  // signing build uploads only an entry that carries its key's signature.
  void upload(const EntryRequest& request, const std::string& entry_dir);

  // The policy every door of this facade applies (cache/trust.h).
  const TrustPolicy& policy() const { return policy_; }

 private:
  struct Server;
  std::optional<std::string> cannot_take_entry();
  std::optional<Found> get_imported(const EntryRequest& request);
  std::optional<Found> get_remote(const EntryRequest& request);
  RemoteBackend* open(Server& s);
  void count_failure(Server& s, const RemoteFailure& f, const std::string& module);
  void give_up(Server& s, const RemoteFailure& f, double elapsed_ms);
  void count_untrusted(const std::string& source, const std::string& name, const std::string& why);
  KeepOccupant keep_occupant(const std::string& entry_dir) const;
  AdoptRequest adopt_request(const EntryRequest& r, const std::string& source) const;

  Store& store_;
  RemoteOptions options_;
  StatsCounters* stats_;
  std::vector<std::unique_ptr<Server>> servers_;
  std::set<std::string> counted_corrupt_;  // entry dirs: a corrupt entry counts once, however often it is looked up
  TrustPolicy policy_;                     // from options_: trusted keys, the sign key
  std::set<std::string> counted_untrusted_; // entry dirs refused by the policy: warned about and counted once
  std::set<std::string> replace_;          // entry dirs whose occupant a publish replaces (--force, refused)
};

}  // namespace tvmffi_jit::cache
