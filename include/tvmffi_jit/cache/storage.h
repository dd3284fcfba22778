// The storage facade: one door to every tier of the cache (ARCHITECTURE.md,
// "The cache tiers"). The compile layer asks it for an entry and hands it the
// entry it published; which tiers exist, their order, what each checks and
// how their failures are counted is decided here.
//
//   find():     local store -> (miss: the per-key lock, local store again)
//               -> imported entries (`cache import`) -> remote 1 -> remote 2 ...
//               Each tier holds several results per key (cache/results.h);
//               the first tier with a usable result answers; a shared one is
//               verified completely and published into the local store (a
//               remote hit is a local entry from then on). A miss holds the
//               lock until the caller has built and published.
//   publish():  the build's entry into the local store (Store::publish).
//   upload():   then that entry, packed once (signed with the sign key), to
//               every remote that takes uploads (none behind the read-only
//               wrapper).
//
//   find_object() / publish_object(): a translation unit's object entry,
//               local tier only (objects are machine-local: their keys hold
//               absolute paths).
//
//   get_shared_objects() / update_shared_object(): a small opaque object per
//               remote (compile's costs), read, and read-modified-written.
//
// One facade per command (the CLI opens it; the engine library keeps one per
// process and cache root), shared by every module of a batch and their units
// from several threads: a remote that fails (kError, kTimeout) is given up for
// the rest of the command after one warning, so a batch of N modules waits out
// a silent server's deadline once, not N times. What a remote sent that is not
// usable (kCorrupt, kUntrusted, kStale; a value above its read's limit, such
// as an oversized result list, is kCorrupt) is a miss for that key or result
// that builds, and one module's lookup downloads at most
// RemoteOptions::max_lookup_bytes from all remotes together. Every outcome
// is counted (`cache stats`): into the caller's StatsCounters when given, and
// into the root's journal by flush_counts().
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/remote/options.h"
#include "tvmffi_jit/cache/remote/backend.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/cache/transfer/portable_entry.h"
#include "tvmffi_jit/cache/trust.h"
#include "tvmffi_jit/util/expected.h"
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
  std::string key_dir;    // the key's local directory, its results inside (Store::module_key_dir)
  std::string base_dir;   // binds a portable entry to this checkout
  std::string artifact;   // the file the build serves: every tier's entry must list it
  LookupOptions lookup;   // what a local hit checks
  // Where an adopted entry's header and library records may point besides
  // base_dir (the toolchain's and the plan's directories: compile/adoptable_roots.h).
  // Asked only when a shared tier is: finding them resolves paths, which a
  // local hit must not pay for. Unset: nothing besides base_dir.
  std::function<std::vector<std::string>()> adoptable_roots;
};

enum class Tier { kLocal, kShared };

struct Found {
  CacheStatus status = CacheStatus::kMiss;
  // A hit: the local entry (for a shared hit, the one it was published as).
  // A local miss: why (miss_reason, corrupt).
  LookupResult entry;
  std::string source;  // shared hits: the server (redacted URL) or "imported"
  Rehashed rehashed;   // what the local lookups of this find() re-read (cache/proof.h)
  bool hit() const { return status != CacheStatus::kMiss; }
  // find()'s misses: why the lookup missed ("absent", "--force", ...);
  // whether the root can take the entry, or why not (then the caller builds
  // outside it); when it can, the per-key lock, held until the caller has
  // published.
  std::string miss_reason;
  Expected<void> storable;
  util::FileLock lock;
};

struct FindOptions {
  bool force = false;       // --force: no lookup, except the local one after waiting on the lock
  bool local_only = false;  // a local hit or a miss: no lock, no shared tier (build --only-if-cached)
  double lock_timeout_seconds = 600;
  std::string lock_what;  // the holder line of the lock ("building m")
};

// The door compile goes through (compile/cached_build.h takes one): the
// tiers answer, a build's entry goes in, objects come and go, counts are
// kept. Compile sees no store behind it, only these calls, so a test can
// answer them from memory (tests/unit/test_compile_cached_build_fake_storage.cpp).
// Storage is the one implementation; thread-safe.
class EntryStorage {
 public:
  virtual ~EntryStorage() = default;
  // Where a module key's results live (EntryRequest::key_dir; Store::module_key_dir).
  virtual std::string module_key_dir(const std::string& name, const std::string& key_hex) const = 0;
  // A fresh directory to build a missed entry in, beside the entries it is
  // published among (publish() renames it). Throws Error(kIo) if it cannot
  // be made: the caller builds outside the cache.
  virtual Staging stage() = 0;
  // Whether entries can be stored (the root is writable, or assumed so until
  // a miss probes it): a unit's object is only stored when it is.
  virtual bool writable() const = 0;
  // The memo of big files' digests (cache/headers.h) a build hashes what it
  // read through, recording new digests when the root is writable.
  virtual DigestMemo digest_memo() const = 0;
  // The folder compile keeps its compiler identity memos in (`cache clean`
  // removes them); empty: none are kept.
  virtual std::string compilers_dir() const = 0;
  // The trust policy every door applies (cache/trust.h); none: everything
  // self-consistent is served.
  virtual const TrustPolicy* trust_policy() const { return nullptr; }
  // Whether a build's entries go to a shared tier (a remote) as well.
  virtual bool shares() const { return false; }
  // A module's entry through every tier in order (above). Counts a hit of
  // each kind, and a miss that is not local_only. Throws only what ends the
  // command: a termination signal, a missing client library (exit 4), a lock
  // wait past its timeout, an unsafe root.
  virtual Found find(const EntryRequest& request, const FindOptions& options) = 0;
  // Store::publish() of the build's entry at the request's entry dir,
  // counted (stores, bytes). Throws Error(kIo) as Store::publish does.
  virtual PublishResult publish(Staging& staging, const EntryRequest& request, EntryRecord record,
                                const std::vector<std::pair<std::string, std::string>>& files) = 0;
  // After this process published `entry_dir` (the request's entry): to every
  // remote that takes uploads.
  virtual void upload(const EntryRequest& request, const std::string& entry_dir) = 0;
  // A unit's object entry (local tier), every artifact re-hashed: an object
  // is linked into modules, so a same-size corruption must not spread. A
  // corrupt one is counted once.
  virtual LookupResult find_object(const std::string& key_hex) = 0;
  // Store::publish() of an object entry (counted when ours). Throws Error(kIo).
  // `keep`: whether an occupant may answer instead (Store::publish; --force
  // and a signing build replace what they would not use).
  virtual PublishResult publish_object(Staging& staging, const std::string& key_hex, EntryRecord record,
                                       const std::vector<std::pair<std::string, std::string>>& files,
                                       const KeepOccupant& keep = {}) = 0;
  // What the caller counted itself (units compiled, launcher fallbacks...).
  virtual void count(const StatsCounters& delta) = 0;

  // A small object each remote keeps beside the entries, named by `name`
  // joined to the namespace as a key is ("<ns>/costs", "<ns>:costs"): what
  // compile's cost log shares (compile/cost_log.h). Opaque here: not an
  // entry, never verified, signed or adopted; its owner parses it as the
  // hint it is. A transfer of one that fails is said under -v only and does
  // not give its server up (the failure may concern that name alone), so it
  // never changes what happens to the entries.
  // What each remote holds under `name`, in the remotes' order; absent ones,
  // failures and values larger than `max_bytes` (or the blob limit) are
  // left out. No remote: nothing.
  virtual std::vector<std::string> get_shared_objects(const std::string& /*name*/, uint64_t /*max_bytes*/) {
    return {};
  }
  // What a remote holds (nullopt: absent, unreadable, larger than the
  // limit) -> what to put back (nullopt: nothing).
  using ObjectChange = std::function<std::optional<std::string>(const std::optional<std::string>& held)>;
  // A read-modify-write on every remote that takes uploads (none when they
  // are read-only). No lock: of two writers at once the last put wins and
  // the other's change is lost. A server whose read fails is not written.
  virtual void update_shared_object(const std::string& /*name*/, uint64_t /*max_bytes*/,
                                    const ObjectChange& /*change*/) {}
  // Appends what was counted since the last flush to the root's journal.
  virtual void flush_counts() = 0;
};

class Storage : public EntryStorage {
 public:
  // The remotes of `options.servers`, each opened on first use (a local hit
  // never loads a client library), wrapped read-only with options.read_only.
  // `stats` (may be null) also receives every count, for the caller to read.
  Storage(Store& store, RemoteOptions options, StatsCounters* stats = nullptr);
  // These backends instead of options.servers (tests: in-memory servers).
  Storage(Store& store, RemoteOptions options, StatsCounters* stats,
          std::vector<std::unique_ptr<RemoteBackend>> backends);
  ~Storage() override;  // flushes the counts
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // With trusted keys or a sign key, starts OpenSSL's ed25519 set-up
  // (prepare_signature_check, ~1 ms, ten times a verification) on a thread
  // now, so that it overlaps the key's computation instead of delaying the
  // first signature check of a local or remote hit. Joined by the destructor:
  // call it only on a storage that is destroyed before its process can fork
  // again (a command's own storage, not one kept across engine calls).
  // `started`: a start_signature_setup() the caller began earlier still.
  void start_signature_warmup(std::shared_future<void> started = {});

  std::string module_key_dir(const std::string& name, const std::string& key_hex) const override {
    return store_.module_key_dir(name, key_hex);
  }
  Staging stage() override { return store_.stage(); }
  bool writable() const override { return store_.writable(); }
  DigestMemo digest_memo() const override { return store_.digest_memo(true); }
  std::string compilers_dir() const override { return store_.compilers_dir(); }
  Found find(const EntryRequest& request, const FindOptions& options) override;

  // The entry from one tier. kShared needs a writable store (a shared hit is
  // published into it).
  Found get(const EntryRequest& request, Tier tier);

  // Store::publish_result() of the build's entry as a result of the
  // request's key, counted (stores, bytes), with its provenance ("built",
  // signed with the sign key). An occupant of the result's directory stays
  // only if find() did not skip it (--force) and the trust policy admits it.
  // Throws Error(kIo) as Store::publish does.
  PublishResult publish(Staging& staging, const EntryRequest& request, EntryRecord record,
                        const std::vector<std::pair<std::string, std::string>>& files) override;
  // After this process published `entry_dir` (a result of the request's
  // key): the result as its own object, then the key's result list merged
  // with it (cache/results.h). A signing build uploads only an entry that
  // carries its key's signature.
  void upload(const EntryRequest& request, const std::string& entry_dir) override;
  LookupResult find_object(const std::string& key_hex) override;
  PublishResult publish_object(Staging& staging, const std::string& key_hex, EntryRecord record,
                               const std::vector<std::pair<std::string, std::string>>& files,
                               const KeepOccupant& keep = {}) override;
  void count(const StatsCounters& delta) override;
  void flush_counts() override;
  std::vector<std::string> get_shared_objects(const std::string& name, uint64_t max_bytes) override;
  void update_shared_object(const std::string& name, uint64_t max_bytes, const ObjectChange& change) override;

  // The policy every door of this facade applies (cache/trust.h).
  const TrustPolicy& policy() const { return policy_; }
  const TrustPolicy* trust_policy() const override { return &policy_; }
  bool shares() const override { return !servers_.empty(); }

 private:
  struct Server;
  Expected<void> can_take_entry();
  std::optional<Found> get_imported(const EntryRequest& request);
  struct LookupBudget;
  std::optional<Found> get_remote(const EntryRequest& request);
  // One result object of a remote: nullopt when absent or unusable (counted),
  // downloaded within what is left of the lookup's budget.
  std::optional<Found> get_remote_result(Server& s, const EntryRequest& request, const std::string& result_id,
                                         LookupBudget& budget, bool& server_failed);
  RemoteBackend* open(Server& s);
  void count_failure(Server& s, const RemoteFailure& f, const std::string& module);
  void give_up(Server& s, const RemoteFailure& f, double elapsed_ms);
  // `transfer` on each remote not given up, opened, its mutex held.
  void for_each_open_server(const std::function<void(Server&, RemoteBackend&)>& transfer);
  void count_untrusted(const std::string& source, const std::string& name, const std::string& why);
  // Adds `n` to one counter (of the caller's stats and of what is not flushed yet).
  void tally(uint64_t StatsCounters::*counter, uint64_t n = 1);
  // A corrupt entry counts once, however often it is looked up.
  void count_corrupt(const std::string& entry_dir);
  KeepOccupant keep_occupant(const std::string& key_dir) const;
  AdoptRequest adopt_request(const EntryRequest& r, const std::string& source, const std::string& result_id) const;

  Store& store_;
  RemoteOptions options_;
  StatsCounters* stats_;
  std::vector<std::unique_ptr<Server>> servers_;  // each guarded by its own mutex (one transfer at a time)
  TrustPolicy policy_;       // from options_: trusted keys, the sign key
  std::mutex root_mutex_;    // the root's write probe
  mutable std::mutex counts_mutex_;  // guards the members below
  StatsCounters unflushed_;
  std::set<std::string> counted_corrupt_;    // entry dirs
  std::set<std::string> counted_untrusted_;  // entry dirs refused by the policy: warned about and counted once
  std::set<std::string> replace_;            // key dirs whose occupants a publish replaces (--force)
  std::shared_future<void> crypto_ready_;    // start_signature_warmup(), or get_remote's own
};

}  // namespace tvmffi_jit::cache
