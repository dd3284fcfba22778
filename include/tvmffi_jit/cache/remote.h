// The remote tier: whole module entries on existing servers (docs/remote.md).
//
//   build: local hit -> imported entry -> remote hit (verified, published
//          locally) -> build -> publish locally -> PUT (unless read-only)
//
// Backends: HTTP(S) GET/PUT (nginx WebDAV, bazel-remote /ac/) and S3
// (SigV4-signed GET/PUT, same transfer code) through libcurl, opened with
// dlopen() only when an http(s) or s3 remote is used; Redis GETRANGE/SET
// through hiredis (linked statically). Objects are named by the portable key
// (cache/portable.h), so checkouts at other paths and other machines find them:
//   http://host/path     ->  http://host/path/<namespace>/<portable key>
//   s3://bucket/prefix   ->  object "prefix/<namespace>/<portable key>"
//   redis://host:port    ->  key "<namespace>:<portable key>"
// A blob (cache/blob.h) is verified completely (every file's SHA-256, the
// entry's own claims, its recorded headers re-hashed here) before the one
// rename that publishes it; anything wrong is a miss that rebuilds. A server
// that cannot be reached is given up for the rest of the process after one
// attempt bounded by the connect timeout (a warning; stats count it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/blob.h"
#include "tvmffi_jit/cache/key.h"
#include "tvmffi_jit/cache/signing.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/store.h"

namespace tvmffi_jit::cache {

// S3 settings: AWS's standard variables (docs/remote.md, "S3"). The secret
// and the session token are never put into a message, a log line or JSON.
struct S3Settings {
  std::string endpoint_url;  // $AWS_ENDPOINT_URL: path-style requests to it; empty: AWS, virtual-hosted style
  std::string region = "us-east-1";  // $AWS_REGION, else $AWS_DEFAULT_REGION
  std::string access_key_id;         // empty (or no secret): anonymous, unsigned requests
  std::string secret_access_key;
  std::string session_token;  // $AWS_SESSION_TOKEN: temporary credentials (x-amz-security-token)
  bool anonymous() const { return access_key_id.empty() || secret_access_key.empty(); }
};


// Every transfer is bounded three ways (docs/remote.md, "Limits"): the
// connection must be made within connect_timeout_ms; once the request is
// sent, the server's first byte must come within first_byte_timeout_ms (a
// server that accepts and never answers); and the whole request, upload and
// answer included, must end within transfer_timeout_ms (a server that drips
// a byte every second). A termination signal ends a transfer at once.
struct RemoteOptions {
  std::vector<std::string> urls;  // tried in order
  bool read_only = false;         // never PUT
  std::string key_namespace = "tvmffi-jit";
  int connect_timeout_ms = 100;
  int first_byte_timeout_ms = 5000;
  int transfer_timeout_ms = 60000;
  // As received; memory for a download is at most this plus a small constant,
  // checked before anything is buffered.
  uint64_t max_blob_bytes = 1ull << 30;
  std::string libcurl;  // $TVMFFI_JIT_LIBCURL: the libcurl to dlopen (empty: the usual sonames)
  S3Settings s3;
  // Signing (cache/signing.h, docs/remote.md "Trust"): the files as given,
  // then the keys load_remote_keys() read from them.
  std::string sign_key_file;                   // uploads and exports are signed with it
  std::vector<std::string> trusted_key_files;  // any given: only entries signed by one are used
  std::optional<SecretKey> sign_key;
  std::vector<PublicKey> trusted_keys;
  bool enabled() const { return !urls.empty(); }
  bool requires_signature() const { return !trusted_keys.empty(); }
};

// Checks what the caller read from the environment (cli/build_request.h,
// remote_options_from_environment): with an s3:// URL among the urls, the
// AWS settings (S3Settings; a malformed $AWS_ENDPOINT_URL or $AWS_REGION is
// usage_error, exit 2); then loads the key files (load_remote_keys).
void finish_remote_options(RemoteOptions& options);

// Reads sign_key_file and trusted_key_files into sign_key and trusted_keys;
// usage_error (exit 2) naming a file that is not a key of its kind.
void load_remote_keys(RemoteOptions& options);

// Checks every URL's syntax (scheme http, https, redis or s3; host; Redis db
// number; S3 bucket name and prefix). Throws usage_error (exit 2) naming the URL.
void check_remote_urls(const std::vector<std::string>& urls);

// "redis://:secret@h:1/0" -> "redis://***@h:1/0": URLs as logs show them.
std::string redact_url(const std::string& url);

// One server. get() returns nullopt when the object is absent; both throw
// Error(kIo) when the server cannot be reached or answers wrongly, and
// Error(kMissingTool) when the client library is missing.
class RemoteBackend {
 public:
  virtual ~RemoteBackend() = default;
  virtual std::optional<std::string> get(const std::string& object, uint64_t max_bytes) = 0;
  virtual void put(const std::string& object, const std::string& blob) = 0;
};

std::unique_ptr<RemoteBackend> make_http_backend(const std::string& url, const RemoteOptions& options);
std::unique_ptr<RemoteBackend> make_redis_backend(const std::string& url, const RemoteOptions& options);
std::unique_ptr<RemoteBackend> make_s3_backend(const std::string& url, const RemoteOptions& options);

// `cache import` keeps entries here, in portable form, until a build in some
// base directory adopts them: <root>/imported/<name>_<portable key16>/.
std::string imported_dir(const Store& store);

struct RemoteHit {
  LookupResult lookup;  // the local entry it became
  std::string source;   // redacted URL, or "imported"
};

// Verifies a portable entry staged in `staging`'s entry dir (entry.json in
// portable form and its files), binds it to `base_dir`, re-hashes its
// headers and publishes it as `entry_dir`. The entry must list `artifact`
// (what the build will serve), the staging dir must hold nothing but
// entry.json and the artifacts it lists, and with `record` (the manifest
// record the files came with) entry.json and every artifact must have the
// record's SHA-256. Throws Error(kIo) saying what is wrong; stale headers
// throw with a message starting "stale:".
LookupResult adopt_portable_entry(const Store& store, Staging& staging, const std::string& name,
                                  const std::string& portable_key, const std::string& base_dir,
                                  const std::string& entry_dir, const std::string& artifact,
                                  const BlobEntry* record);

// An entry is used under trusted keys only when one of them signed its
// manifest record (cache/signing.h); nullopt when it may be used, else why
// not ("not signed", "signed by ci-old, which is not trusted here").
std::optional<std::string> untrusted_reason(const RemoteOptions& options, const BlobEntry& record);

// A module entry (local form, on disk) as a one-entry blob in portable form,
// signed with `sign_key` when given. Only entry.json and the artifacts it
// lists are packed.
std::string pack_portable_entry(const std::string& entry_dir, const SecretKey* sign_key = nullptr);
// The pack list of that entry (for multi-entry exports).
BlobPackEntry portable_pack_entry(const std::string& entry_dir);

class RemoteTier {
 public:
  RemoteTier(RemoteOptions options, const Store& store, StatsCounters* stats);
  ~RemoteTier();
  // After a local miss: an entry that lists `artifact`. nullopt: build.
  std::optional<RemoteHit> fetch(const std::string& name, const Key& key, const std::string& base_dir,
                                 const std::string& entry_dir, const std::string& artifact);
  // After this process published `entry_dir`.
  void put(const std::string& entry_dir, const Key& key);

 private:
  struct Server;
  Server* server(size_t i);
  void give_up(size_t i, const std::string& what, double elapsed_ms);
  void count_untrusted(const std::string& source, const std::string& name, const std::string& why);
  std::string object_name(const std::string& portable_key) const;
  RemoteOptions options_;
  const Store& store_;
  StatsCounters* stats_;
  std::vector<std::unique_ptr<Server>> servers_;
};

}  // namespace tvmffi_jit::cache
