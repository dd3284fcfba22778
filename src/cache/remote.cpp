#include "tvmffi_jit/cache/remote.h"

#include "remote_http.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <future>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/portable.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

constexpr const char* kUntrustedPrefix = "untrusted: ";
constexpr const char* kImportedRecordName = ".manifest.json";  // cache/transfer.h

std::string scheme_of(const std::string& url) {
  size_t p = url.find("://");
  return p == std::string::npos ? "" : url.substr(0, p);
}

// Writes the files of one blob entry into a directory, as they arrive. The
// manifest is checked first (begin): the entry asked for, and under trusted
// keys its signature, so an untrusted blob writes nothing at all.
class DirReceiver : public BlobReceiver {
 public:
  DirReceiver(std::string dir, std::string expected_dir, std::string expected_key, const RemoteOptions& options)
      : dir_(std::move(dir)),
        expected_dir_(std::move(expected_dir)),
        expected_key_(std::move(expected_key)),
        options_(options) {}
  void begin(const BlobManifest& m) override {
    const BlobEntry& e = m.entries.front();
    if (e.key != expected_key_ || e.dir != expected_dir_)
      throw io_error("the blob holds " + e.dir + ", not " + expected_dir_);
    if (auto why = untrusted_reason(options_, e)) throw io_error(kUntrustedPrefix + *why);
    record_ = e;
  }
  void open(const BlobEntry&, const BlobFile& f) override { file_ = create_blob_file(util::join_path(dir_, f.name), f); }
  void write(const char* data, size_t size) override { file_.write({data, size}); }
  void close() override { file_.close(); }
  const BlobEntry& record() const { return record_; }

 private:
  std::string dir_;
  std::string expected_dir_, expected_key_;
  const RemoteOptions& options_;
  BlobEntry record_;
  util::FileWriter file_;
};

// The regular files in `dir` (with `everything`: every name but . and ..).
std::vector<std::string> regular_files(const std::string& dir, bool everything = false) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw io_error(errno_message("cannot list " + dir, errno));
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    struct stat st;
    if (everything || (::lstat(util::join_path(dir, n).c_str(), &st) == 0 && S_ISREG(st.st_mode))) out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

void link_or_copy(const std::string& from, const std::string& to) {
  if (::link(from.c_str(), to.c_str()) == 0) return;
  util::write_file(to, util::read_file(from));
}

}  // namespace

RemoteOptions remote_options_from_environment(RemoteOptions o, bool command_line_read_only,
                                              const toolchain::EnvLookup& env) {
  if (o.urls.empty()) {
    if (auto v = env("TVMFFI_JIT_REMOTE")) {
      for (const auto& part : util::split_any(*v, " \t\n"))
        if (!part.empty()) o.urls.push_back(part);
    }
  }
  o.read_only = command_line_read_only || toolchain::env_flag(env, "TVMFFI_JIT_REMOTE_READ_ONLY");
  if (auto ns = env("TVMFFI_JIT_REMOTE_NAMESPACE"); ns && o.key_namespace == "tvmffi-jit") o.key_namespace = *ns;
  o.first_byte_timeout_ms = static_cast<int>(
      toolchain::env_duration_ms(env, "TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT", o.first_byte_timeout_ms));
  o.transfer_timeout_ms =
      static_cast<int>(toolchain::env_duration_ms(env, "TVMFFI_JIT_REMOTE_TIMEOUT", o.transfer_timeout_ms));
  o.max_blob_bytes = toolchain::env_size(env, "TVMFFI_JIT_REMOTE_MAX_BLOB", o.max_blob_bytes);
  if (auto lib = env("TVMFFI_JIT_LIBCURL"); lib && !lib->empty()) o.libcurl = *lib;
  // AWS's variables, read only when an S3 remote will use them.
  if (std::any_of(o.urls.begin(), o.urls.end(), [](const std::string& u) { return scheme_of(u) == "s3"; })) {
    auto var = [&env](const char* name) -> std::string { return env(name).value_or(""); };
    o.s3.endpoint_url = var("AWS_ENDPOINT_URL");
    if (std::string r = var("AWS_REGION"); !r.empty()) o.s3.region = r;
    else if (std::string d = var("AWS_DEFAULT_REGION"); !d.empty()) o.s3.region = d;
    o.s3.access_key_id = var("AWS_ACCESS_KEY_ID");
    o.s3.secret_access_key = var("AWS_SECRET_ACCESS_KEY");
    o.s3.session_token = var("AWS_SESSION_TOKEN");
    check_s3_settings(o.s3);
  }
  if (o.sign_key_file.empty()) {
    if (auto v = env("TVMFFI_JIT_REMOTE_SIGN_KEY")) o.sign_key_file = *v;
  }
  if (o.trusted_key_files.empty()) {
    if (auto v = env("TVMFFI_JIT_REMOTE_TRUSTED_KEYS")) {
      for (const auto& part : util::split_any(*v, ":"))
        if (!part.empty()) o.trusted_key_files.push_back(part);
    }
  }
  load_remote_keys(o);
  return o;
}

void load_remote_keys(RemoteOptions& o) {
  o.sign_key.reset();
  o.trusted_keys.clear();
  if (!o.sign_key_file.empty()) o.sign_key = read_secret_key(o.sign_key_file);
  for (const auto& f : o.trusted_key_files) o.trusted_keys.push_back(read_public_key(f));
}

std::optional<std::string> untrusted_reason(const RemoteOptions& options, const BlobEntry& record) {
  if (!options.requires_signature()) return std::nullopt;
  if (trusted_signer(options.trusted_keys, record)) return std::nullopt;
  if (record.signatures.empty()) return std::string("it is not signed");
  std::string names;
  for (const auto& s : record.signatures) names += (names.empty() ? "" : ", ") + s.signer;
  return "no trusted key verifies its signature (signed as " + names + ")";
}

void check_remote_urls(const std::vector<std::string>& urls) {
  for (const auto& url : urls) {
    std::string scheme = scheme_of(url);
    if (scheme != "http" && scheme != "https" && scheme != "redis" && scheme != "s3")
      throw usage_error("remote " + redact_url(url) +
                        ": the URL must start with http://, https://, redis:// or s3:// (docs/remote.md)");
    if (scheme == "s3") {
      check_s3_url(url);
      continue;
    }
    std::string rest = url.substr(scheme.size() + 3);
    size_t at = rest.rfind('@', rest.find('/'));
    std::string hostport = rest.substr(at == std::string::npos ? 0 : at + 1);
    hostport = hostport.substr(0, hostport.find('/'));
    if (hostport.empty() || hostport[0] == ':')
      throw usage_error("remote " + redact_url(url) + ": the URL names no host");
    if (scheme == "redis") {
      size_t slash = rest.find('/');
      if (slash != std::string::npos && slash + 1 < rest.size()) {
        std::string db = rest.substr(slash + 1);
        if (db.find_first_not_of("0123456789") != std::string::npos || db.size() > 4)
          throw usage_error("remote " + redact_url(url) + ": the path of a redis:// URL is a database number (redis://host:6379/0)");
      }
    }
  }
}

std::string redact_url(const std::string& url) {
  size_t p = url.find("://");
  if (p == std::string::npos) return url;
  size_t slash = url.find('/', p + 3);
  size_t at = url.rfind('@', slash == std::string::npos ? std::string::npos : slash);
  if (at == std::string::npos || at < p) return url;
  return url.substr(0, p + 3) + "***" + url.substr(at);
}

std::string imported_dir(const Store& store) { return util::join_path(store.root(), "imported"); }

LookupResult adopt_portable_entry(const Store& store, Staging& staging, const std::string& name,
                                  const std::string& portable_key, const std::string& base_dir,
                                  const std::string& entry_dir, const std::string& artifact,
                                  const BlobEntry* manifest_record) {
  const std::string json_path = util::join_path(staging.entry_dir(), kEntryFileName);
  auto text = util::read_small_file(json_path, kMaxEntryFileBytes);
  if (!text) throw io_error("entry.json: " + text.why());
  auto recorded = [&](const std::string& file) -> const BlobFile* {
    if (!manifest_record) return nullptr;
    for (const auto& f : manifest_record->files)
      if (f.name == file) return &f;
    return nullptr;
  };
  if (manifest_record) {
    const BlobFile* f = recorded(kEntryFileName);
    if (!f || f->size != text->size() || f->sha256 != util::sha256_hex(*text))
      throw io_error("entry.json is not the one its manifest lists");
  }
  auto portable = nlohmann::json::parse(*text, nullptr, false);
  if (portable.is_discarded() || !portable.is_object()) throw io_error("entry.json is not a JSON object");
  if (portable.value("key", "") != portable_key || portable.value("portable_key", "") != portable_key)
    throw io_error("entry.json is for another key");
  if (portable.value("name", "") != name || portable.value("kind", "") != "module")
    throw io_error("entry.json describes another module");
  nlohmann::json local = entry_from_portable(portable, BaseDir(base_dir));
  std::string why;
  std::optional<EntryRecord> record = entry_from_json(local, &why);
  if (!record) throw io_error(why);
  bool serves_artifact = false;
  for (const auto& a : record->artifacts) serves_artifact = serves_artifact || a.file == artifact;
  if (!serves_artifact) throw io_error("entry.json does not list " + artifact + ", the artifact this build serves");
  // Only what entry.json lists is published: anything else in the staging
  // dir (an old import, a planted file) is refused, never served.
  for (const auto& f : regular_files(staging.entry_dir(), true)) {
    bool listed = f == kEntryFileName;
    for (const auto& a : record->artifacts) listed = listed || a.file == f;
    if (!listed) throw io_error("the entry holds " + f + ", which its entry.json does not list");
  }
  // The entry's own claims, re-checked against the files (the blob's manifest
  // vouched for the bytes, entry.json for what they are).
  for (const auto& a : record->artifacts) {
    if (manifest_record) {
      const BlobFile* f = recorded(a.file);
      if (!f || f->size != a.size || f->sha256 != a.sha256)
        throw io_error("artifact " + a.file + " is not the one its manifest lists");
    }
    std::string p = util::join_path(staging.entry_dir(), a.file);
    auto stamp = util::file_stamp(p);
    if (!stamp || stamp->size != a.size) throw io_error("artifact " + a.file + " is missing or has the wrong size");
    if (util::sha256_file_hex(p) != a.sha256) throw io_error("artifact " + a.file + " does not match entry.json");
  }
  if (auto changed = check_and_stamp_headers(record->headers, store.digest_memo(true)))
    throw io_error("stale: header " + *changed);
  // Written from the parsed record: header records merged, nothing else kept
  // that this version does not read, and this machine's stats of what was
  // just checked (a portable entry has none), so later local hits of the
  // adopted entry skip re-hashing them.
  util::write_file(json_path, entry_file_text(*record));
  // Checked above (headers re-hashed once: on a CUDA module they are most of a hit's time).
  PublishResult p = store.publish_prepared(staging, entry_dir, *record);
  LookupResult r;
  r.hit = true;
  r.entry_dir = p.entry_dir;
  r.entry = std::move(p.entry);
  return r;
}

BlobPackEntry portable_pack_entry(const std::string& entry_dir) {
  std::string why;
  auto local = read_entry_json(entry_dir, &why);
  if (local.is_discarded()) throw io_error(entry_dir + ": " + why);
  // Parsed for the artifact list: only what entry.json lists travels.
  auto record = entry_from_json(local, &why);
  if (!record) throw io_error(entry_dir + ": " + why);
  nlohmann::json portable = entry_to_portable(local);
  std::string key = portable.value("key", "");
  std::string name = portable.value("name", "");
  BlobPackEntry e;
  e.dir = name + "_" + key.substr(0, 16);
  e.key = key;
  e.files.push_back({kEntryFileName, "", portable.dump(2) + "\n"});
  for (const auto& a : record->artifacts) e.files.push_back({a.file, util::join_path(entry_dir, a.file), std::nullopt});
  return e;
}

std::string pack_portable_entry(const std::string& entry_dir, const SecretKey* sign_key) {
  BlobSigner signer;
  if (sign_key) signer = [sign_key](const BlobEntry& e) { return sign_blob_entry(*sign_key, e); };
  return write_blob_to_string({portable_pack_entry(entry_dir)}, 3, signer);
}

// ---- the tier ----------------------------------------------------------------

struct RemoteTier::Server {
  std::string url;
  std::string shown;  // redacted
  std::unique_ptr<RemoteBackend> backend;
  bool down = false;
};

RemoteTier::RemoteTier(RemoteOptions options, const Store& store, StatsCounters* stats)
    : options_(std::move(options)), store_(store), stats_(stats) {
  for (const auto& url : options_.urls) {
    auto s = std::make_unique<Server>();
    s->url = url;
    s->shown = redact_url(url);
    servers_.push_back(std::move(s));
  }
}

RemoteTier::~RemoteTier() = default;

RemoteTier::Server* RemoteTier::server(size_t i) {
  Server* s = servers_[i].get();
  if (!s->backend) {
    // Opened on first use: a local hit never loads a client library.
    const std::string scheme = scheme_of(s->url);
    s->backend = scheme == "redis" ? make_redis_backend(s->url, options_)
                 : scheme == "s3"  ? make_s3_backend(s->url, options_)
                                   : make_http_backend(s->url, options_);
  }
  return s;
}

void RemoteTier::give_up(size_t i, const std::string& what, double elapsed_ms) {
  Server* s = servers_[i].get();
  s->down = true;
  s->backend.reset();
  stats_->remote_errors += 1;
  spdlog::warn("remote cache {}: {} (after {:.0f} ms); not using it again in this build", s->shown, what, elapsed_ms);
}

std::string RemoteTier::object_name(const std::string& portable_key) const {
  return options_.key_namespace.empty() ? portable_key : options_.key_namespace + "/" + portable_key;
}

void RemoteTier::count_untrusted(const std::string& source, const std::string& name, const std::string& why) {
  stats_->remote_untrusted += 1;
  // Once per process: a batch of many modules against a server full of
  // unsigned entries says it once; `cache stats` has the count.
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    spdlog::warn("{}: the entry for {} is not used: {}; only entries signed by a trusted key are used "
                 "(--remote-trusted-key); building. Further untrusted entries are counted as `remote untrusted` "
                 "in `tvmffi-jit cache stats`",
                 source, name, why);
  else
    spdlog::info("{}: the entry for {} is not used: {}", source, name, why);
}

std::optional<RemoteHit> RemoteTier::fetch(const std::string& name, const Key& key, const std::string& base_dir,
                                           const std::string& entry_dir, const std::string& artifact) {
  const std::string portable_dir_name = name + "_" + key.portable_hex.substr(0, 16);
  // Entries brought in by `cache import`.
  std::string imported = util::join_path(imported_dir(store_), portable_dir_name);
  struct stat st;
  if (::lstat(imported.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    try {
      // The manifest record it was imported with (older imports have none).
      std::optional<BlobEntry> record;
      if (auto text = util::read_small_file(util::join_path(imported, kImportedRecordName), 1u << 20)) {
        BlobManifest m = parse_blob_manifest(*text, BlobLimits{});
        if (m.entries.front().dir == portable_dir_name && m.entries.front().key == key.portable_hex)
          record = m.entries.front();
      }
      std::optional<std::string> untrusted;
      if (options_.requires_signature())
        untrusted = record ? untrusted_reason(options_, *record)
                           : std::optional<std::string>("it was imported without its signatures");
      if (untrusted) {
        count_untrusted("imported entry " + imported, name, *untrusted);
      } else {
        Staging staging = store_.stage();
        for (const auto& f : regular_files(imported))
          if (f != kImportedRecordName) link_or_copy(util::join_path(imported, f), util::join_path(staging.entry_dir(), f));
        LookupResult r = adopt_portable_entry(store_, staging, name, key.portable_hex, base_dir, entry_dir, artifact,
                                              record ? &*record : nullptr);
        stats_->imported_hits += 1;
        return RemoteHit{r, "imported"};
      }
    } catch (const Error& e) {
      if (util::termination_signal() != 0) throw;
      spdlog::info("imported entry {} is not usable here: {}", imported, e.what());
    }
  }
  if (!options_.enabled()) return std::nullopt;

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
  for (size_t i = 0; i < servers_.size(); ++i) {
    if (servers_[i]->down) continue;
    const auto t0 = std::chrono::steady_clock::now();
    std::optional<std::string> blob;
    Server* s = nullptr;
    try {
      s = server(i);
      blob = s->backend->get(object_name(key.portable_hex), options_.max_blob_bytes);
    } catch (const Error& e) {
      // A termination signal ends the build, not just this server.
      if (e.code() == ExitCode::kMissingTool || util::termination_signal() != 0) throw;
      give_up(i, e.what(), ms_since(t0));
      continue;
    }
    asked = true;
    if (!blob) continue;
    stats_->remote_bytes_received += blob->size();
    if (crypto_ready.valid()) crypto_ready.wait();
    try {
      Staging staging = store_.stage();
      DirReceiver rx(staging.entry_dir(), portable_dir_name, key.portable_hex, options_);
      BlobLimits limits;
      read_blob(blob_source(*blob), rx, limits);
      LookupResult r = adopt_portable_entry(store_, staging, name, key.portable_hex, base_dir, entry_dir, artifact,
                                            &rx.record());
      stats_->remote_hits += 1;
      return RemoteHit{r, s->shown};
    } catch (const Error& e) {
      if (util::termination_signal() != 0) throw;
      std::string what = e.what();
      if (util::starts_with(what, "stale: ")) {
        spdlog::info("remote cache {}: the entry for {} was built against other headers ({}); building",
                     s->shown, name, what.substr(7));
      } else if (util::starts_with(what, kUntrustedPrefix)) {
        count_untrusted("remote cache " + s->shown, name, what.substr(std::char_traits<char>::length(kUntrustedPrefix)));
      } else {
        stats_->remote_corrupt += 1;
        spdlog::warn("remote cache {}: the blob for {} is unusable ({}); building", s->shown, name, what);
      }
    }
  }
  if (asked) stats_->remote_misses += 1;
  return std::nullopt;
}

void RemoteTier::put(const std::string& entry_dir, const Key& key) {
  if (!options_.enabled() || options_.read_only) return;
  std::string blob;
  for (size_t i = 0; i < servers_.size(); ++i) {
    if (servers_[i]->down) continue;
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
    try {
      server(i)->backend->put(object_name(key.portable_hex), blob);
      stats_->remote_stores += 1;
      stats_->remote_bytes_sent += blob.size();
    } catch (const Error& e) {
      if (e.code() == ExitCode::kMissingTool || util::termination_signal() != 0) throw;
      give_up(i, e.what(), ms_since(t0));
    }
  }
}

}  // namespace tvmffi_jit::cache
