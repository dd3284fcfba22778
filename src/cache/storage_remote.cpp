// The remote tier of cache::Storage (cache/storage.h): servers opened and
// given up, a key's result list and results fetched within the lookup's
// download budget, verified and adopted; a published entry uploaded; the
// small shared objects read and rewritten.
#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>

#include "cache/storage_server.h"
#include "tvmffi_jit/cache/results.h"
#include "tvmffi_jit/cache/transfer/portable_entry.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// What EntryReceiver raises to stop the blob reader before any file is
// written. Like the backends' RemoteFault it never leaves this file:
// get_remote() returns it as a kUntrusted failure.
struct UntrustedBlob {
  std::string reason;
};

// The files of a one-entry blob into a staging entry dir, as they arrive. The
// manifest is checked first (begin): the entry asked for, and under the trust
// policy (trusted keys, or a signing build's own key) its signature, so an
// untrusted blob writes nothing at all.
class EntryReceiver : public BlobFileWriter {
 public:
  EntryReceiver(std::string dir, std::string expected_dir, std::string expected_key, const TrustPolicy& policy)
      : dir_(std::move(dir)),
        expected_dir_(std::move(expected_dir)),
        expected_key_(std::move(expected_key)),
        policy_(policy) {}
  void begin(const BlobManifest& m) override {
    const BlobEntry& e = m.entries.front();
    if (e.key != expected_key_ || e.dir != expected_dir_)
      throw io_error("the blob holds " + e.dir + ", not " + expected_dir_);
    if (auto why = policy_.refuses_record(e)) throw UntrustedBlob{std::move(*why)};
    record_ = e;
  }
  const BlobEntry& record() const { return record_; }

 private:
  std::string path_for(const BlobEntry&, const BlobFile& f) override { return util::join_path(dir_, f.name); }
  std::string dir_;
  std::string expected_dir_, expected_key_;
  const TrustPolicy& policy_;
  BlobEntry record_;
};

// The remote's name of the key's result list, and of one of its results.
std::string result_list_object(const RemoteScheme* scheme, const RemoteOptions& o, const std::string& portable_key) {
  return remote_object_name(scheme, o.key_namespace, portable_key);
}
std::string result_object(const RemoteScheme* scheme, const RemoteOptions& o, const std::string& portable_key,
                          const std::string& result_id) {
  return remote_object_name(scheme, o.key_namespace, portable_key + "." + result_id);
}

RemoteFailure from_adopt(const AdoptFailure& f) {
  return {f.kind == AdoptFailureKind::kStale ? RemoteFailureKind::kStale : RemoteFailureKind::kCorrupt, f.message};
}

// A server's own failure (it is given up); anything else a get() returns is
// about the one value asked for (a value above the read's limit: kCorrupt).
bool gives_up_server(const RemoteFailure& f) {
  return f.kind == RemoteFailureKind::kError || f.kind == RemoteFailureKind::kTimeout;
}

// One object read, changed and written back (a key's result list, a shared
// object): what the server holds (absent, or larger than `max_bytes` or
// malformed for the caller: nullopt) through `change`, whose answer is put.
// No lock: of two writers at once the last put wins. Returns the bytes put
// (0: `change` put nothing), or the server's failure, of the read (nothing
// is then put: a server that did not answer may still hold what `change`
// would have kept) or of the put.
Expected<uint64_t, RemoteFailure> rewrite_object(RemoteBackend& backend, const std::string& object,
                                                 uint64_t max_bytes, const EntryStorage::ObjectChange& change) {
  RemoteGet old = backend.get(object, max_bytes);
  if (!old && gives_up_server(old.error())) return Unexpected<RemoteFailure>{old.error()};
  std::optional<std::string> text = change(old ? std::move(*old) : std::nullopt);
  if (!text) return uint64_t{0};
  RemotePut put = backend.put(object, *text);
  if (!put) return Unexpected<RemoteFailure>{put.error()};
  return static_cast<uint64_t>(text->size());
}

// A shared object's transfer that failed: a hint lost, said under -v.
void shared_object_failed(const std::string& server, const std::string& object, const char* what,
                          const RemoteFailure& f, double elapsed_ms) {
  if (util::log_verbosity() >= 1)
    spdlog::info("remote cache {}: {} {} ({}, after {:.0f} ms); the server stays in use", server, object, what,
                 f.message, elapsed_ms);
}

}  // namespace

// What one module's lookup may still download from the remotes, lists and
// results of every server together (RemoteOptions::max_lookup_bytes). A read
// refused as too large is charged its whole cap: at most that much of it
// may have travelled (Redis sends the first chunk with STRLEN, a chunked
// HTTP answer is cut off at the cap).
struct Storage::LookupBudget {
  uint64_t total = 0;
  uint64_t left = 0;
  // What one read may take: its own limit, or what is left when less.
  uint64_t cap(uint64_t limit) const { return std::min(limit, left); }
  void spend(uint64_t bytes) { left -= std::min(left, bytes); }
  // The limit a read refused as too large ran into, for its message.
  std::string limit_name(uint64_t cap, uint64_t limit, const std::string& limit_is) const {
    return cap < limit ? "what is left of this lookup's " + util::format_bytes(total) +
                             " download budget, TVMFFI_JIT_REMOTE_MAX_LOOKUP"
                       : limit_is;
  }
};

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
  tally(&StatsCounters::remote_errors);
  if (f.kind == RemoteFailureKind::kTimeout) tally(&StatsCounters::remote_timeouts);
  spdlog::warn("remote cache {}: {} (after {:.0f} ms); not using it again in this build", s.shown, f.message,
               elapsed_ms);
}

// What a server sent that is not usable: counted by kind, then a miss.
void Storage::count_failure(Server& s, const RemoteFailure& f, const std::string& module) {
  switch (f.kind) {
    case RemoteFailureKind::kStale:
      spdlog::info("remote cache {}: the entry for {} was built against other headers ({}); building", s.shown,
                   module, f.message);
      return;
    case RemoteFailureKind::kUntrusted:
      count_untrusted("remote cache " + s.shown, module, f.message);
      return;
    case RemoteFailureKind::kCorrupt:
    case RemoteFailureKind::kError:
    case RemoteFailureKind::kTimeout:
      tally(&StatsCounters::remote_corrupt);
      spdlog::warn("remote cache {}: the blob for {} is unusable ({}); building", s.shown, module, f.message);
      return;
  }
}

std::optional<Found> Storage::get_remote(const EntryRequest& request) {
  if (servers_.empty()) return std::nullopt;
  // OpenSSL's ed25519 set-up (~1 ms) overlaps the download instead of
  // following it, if start_signature_warmup() did not start it already;
  // waited for before any blob is read.
  if (policy_.active()) {
    std::lock_guard<std::mutex> lock(counts_mutex_);
    if (!crypto_ready_.valid()) crypto_ready_ = start_signature_setup();
  }
  LookupBudget budget{options_.max_lookup_bytes, options_.max_lookup_bytes};
  bool asked = false;
  for (auto& sp : servers_) {
    Server& s = *sp;
    if (budget.left == 0) break;
    std::unique_lock<std::mutex> server_lock(s.mutex);
    if (s.down) continue;
    const auto t0 = std::chrono::steady_clock::now();
    RemoteBackend* backend = open(s);
    if (!backend) continue;
    // The key's result list: a hint, capped, each of its ids verified below.
    const uint64_t cap = budget.cap(kMaxResultListBytes);
    RemoteGet list_blob = backend->get(result_list_object(s.scheme, options_, request.key.portable_hex), cap);
    if (!list_blob && gives_up_server(list_blob.error())) {
      give_up(s, list_blob.error(), ms_since(t0));
      continue;
    }
    server_lock.unlock();  // what it sent is checked without holding the server
    asked = true;
    if (!list_blob) {
      // Larger than a list may be: one corrupt answer for this key, like a
      // malformed list (an upload replaces it); the server stays in use.
      budget.spend(cap);
      const std::string limit = budget.limit_name(
          cap, kMaxResultListBytes,
          "the " + util::format_bytes(kMaxResultListBytes) + " cap of a result list, which holds at most " +
              std::to_string(kMaxResultsPerKey) + " ids");
      count_failure(s, RemoteFailure{RemoteFailureKind::kCorrupt, "its result list: " + list_blob.error().message + " (" + limit + ")"},
                    request.name);
      continue;
    }
    if (!*list_blob) continue;
    tally(&StatsCounters::remote_bytes_received, (*list_blob)->size());
    budget.spend((*list_blob)->size());
    Expected<ResultList> list = parse_result_list(**list_blob, request.key.portable_hex);
    if (!list) {
      count_failure(s, RemoteFailure{RemoteFailureKind::kCorrupt, list.why()}, request.name);
      continue;
    }
    bool server_failed = false;
    for (const auto& id : list->result_ids) {
      if (budget.left == 0) break;
      if (auto found = get_remote_result(s, request, id, budget, server_failed)) return found;
      if (server_failed) break;
    }
  }
  if (budget.left == 0)
    spdlog::warn("remote cache: the lookup of {} spent its {} download budget (TVMFFI_JIT_REMOTE_MAX_LOOKUP) "
                 "without finding a usable result; building",
                 request.name, util::format_bytes(budget.total));
  if (asked) tally(&StatsCounters::remote_misses);
  return std::nullopt;
}

std::optional<Found> Storage::get_remote_result(Server& s, const EntryRequest& request, const std::string& id,
                                                LookupBudget& budget, bool& server_failed) {
  std::unique_lock<std::mutex> server_lock(s.mutex);
  if (s.down) {
    server_failed = true;
    return std::nullopt;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t cap = budget.cap(options_.max_blob_bytes);
  RemoteGet blob = s.backend->get(result_object(s.scheme, options_, request.key.portable_hex, id), cap);
  if (!blob && gives_up_server(blob.error())) {
    give_up(s, blob.error(), ms_since(t0));
    server_failed = true;
    return std::nullopt;
  }
  server_lock.unlock();  // what it sent is checked without holding the server
  if (!blob) {
    // Larger than this read may take: that result is unusable, the next is tried.
    budget.spend(cap);
    const std::string limit = budget.limit_name(cap, options_.max_blob_bytes, "TVMFFI_JIT_REMOTE_MAX_BLOB");
    count_failure(s, RemoteFailure{RemoteFailureKind::kCorrupt, blob.error().message + " (" + limit + ")"}, request.name);
    return std::nullopt;
  }
  if (!*blob) {
    spdlog::debug("remote cache {}: result {} of {} is listed but absent", s.shown, result_dir_name(id), request.name);
    return std::nullopt;
  }
  const std::string& bytes = **blob;
  tally(&StatsCounters::remote_bytes_received, bytes.size());
  budget.spend(bytes.size());
  if (policy_.active()) {
    std::shared_future<void> ready;
    {
      std::lock_guard<std::mutex> lock(counts_mutex_);
      ready = crypto_ready_;
    }
    if (ready.valid()) ready.wait();
  }
  std::optional<RemoteFailure> unusable;
  try {
    Staging staging = store_.stage();
    EntryReceiver rx(staging.entry_dir(), result_blob_dir(request.key.portable_hex, id), request.key.portable_hex,
                     policy_);
    try {
      read_blob(blob_source(bytes), rx, BlobLimits{});
    } catch (UntrustedBlob& u) {
      unusable = RemoteFailure{RemoteFailureKind::kUntrusted, std::move(u.reason)};
    }
    if (!unusable) {
      auto adopted = adopt_portable_entry(store_, staging, adopt_request(request, s.shown, id), &rx.record());
      if (adopted) {
        tally(&StatsCounters::remote_hits);
        return shared_tier_hit(std::move(adopted).value(), s.shown);
      }
      unusable = from_adopt(adopted.error());
    }
  } catch (const Error& e) {
    // The blob reader and the publish throw Error(kIo): a blob that does
    // not read back (bad archive, hash mismatch) is a corrupt one.
    if (util::termination_signal() != 0) throw;
    unusable = RemoteFailure{RemoteFailureKind::kCorrupt, e.what()};
  }
  count_failure(s, *unusable, request.name);
  return std::nullopt;
}

void Storage::upload(const EntryRequest& request, const std::string& entry_dir) {
  // Every remote is behind the read-only wrapper: nothing to pack or connect for.
  if (options_.read_only) return;
  if (policy_.sign_key && !servers_.empty()) {
    // Never a signing oracle: only what this key's build made gets its signature.
    auto entry = read_entry(entry_dir);
    if (!entry || !carries_own_signature(*policy_.sign_key, **entry)) {
      spdlog::warn("not uploading {}: it does not carry the signature of {} (a signing build uploads only what it "
                   "built itself)", entry_dir, policy_.sign_key->name);
      return;
    }
  }
  std::string blob;
  std::string id;
  for (auto& sp : servers_) {
    Server& s = *sp;
    std::lock_guard<std::mutex> server_lock(s.mutex);
    if (s.down) continue;
    if (blob.empty()) {
      try {
        blob = pack_portable_entry(entry_dir, options_.sign_key ? &*options_.sign_key : nullptr, &id);
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
    // The result first, under its own immutable name: a reader that finds
    // its id in a list finds it (or skips an id whose object is gone).
    RemotePut put = backend->put(result_object(s.scheme, options_, request.key.portable_hex, id), blob);
    if (!put) {
      give_up(s, put.error(), ms_since(t0));
      continue;
    }
    tally(&StatsCounters::remote_stores);
    tally(&StatsCounters::remote_bytes_sent, blob.size());
    // Then the list, merged with what the server has: two writers at once
    // lose at most one id of the hint, never a result object. A list that
    // failed to read (too big, corrupt) is replaced.
    auto merge = [&](const std::optional<std::string>& held) -> std::optional<std::string> {
      std::optional<ResultList> old_list;
      if (held)
        if (auto parsed = parse_result_list(*held, request.key.portable_hex)) old_list = std::move(*parsed);
      return result_list_text(merge_result_list(old_list, request.key.portable_hex, id));
    };
    auto sent = rewrite_object(*backend, result_list_object(s.scheme, options_, request.key.portable_hex),
                               kMaxResultListBytes, merge);
    if (!sent) {
      give_up(s, sent.error(), ms_since(t0));
      continue;
    }
    tally(&StatsCounters::remote_bytes_sent, *sent);
  }
}

void Storage::for_each_open_server(const std::function<void(Server&, RemoteBackend&)>& transfer) {
  for (auto& sp : servers_) {
    Server& s = *sp;
    std::lock_guard<std::mutex> server_lock(s.mutex);
    if (s.down) continue;
    if (RemoteBackend* backend = open(s)) transfer(s, *backend);
  }
}

std::vector<std::string> Storage::get_shared_objects(const std::string& name, uint64_t max_bytes) {
  std::vector<std::string> held;
  for_each_open_server([&](Server& s, RemoteBackend& backend) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string object = remote_object_name(s.scheme, options_.key_namespace, name);
    RemoteGet got = backend.get(object, std::min(max_bytes, options_.max_blob_bytes));
    if (!got) return shared_object_failed(s.shown, object, "not read", got.error(), ms_since(t0));
    if (!*got) return;
    tally(&StatsCounters::remote_bytes_received, (*got)->size());
    held.push_back(std::move(**got));
  });
  return held;
}

void Storage::update_shared_object(const std::string& name, uint64_t max_bytes, const ObjectChange& change) {
  if (options_.read_only) return;  // every remote is behind the read-only wrapper
  for_each_open_server([&](Server& s, RemoteBackend& backend) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string object = remote_object_name(s.scheme, options_.key_namespace, name);
    auto sent = rewrite_object(backend, object, std::min(max_bytes, options_.max_blob_bytes), change);
    if (!sent) return shared_object_failed(s.shown, object, "not updated", sent.error(), ms_since(t0));
    tally(&StatsCounters::remote_bytes_sent, *sent);
  });
}

}  // namespace tvmffi_jit::cache
