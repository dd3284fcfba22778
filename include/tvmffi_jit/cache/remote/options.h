// Remote cache options (docs/remote.md): the servers, their limits, the
// signing keys. The tier itself is the storage facade (cache/storage.h); the
// URLs' syntax is cache/remote/url.h, the servers cache/remote/backend.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/transfer/blob.h"
#include "tvmffi_jit/cache/remote/url.h"
#include "tvmffi_jit/cache/transfer/signing.h"
#include "tvmffi_jit/util/expected.h"

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
  std::vector<std::string> urls;  // as given (command line, else $TVMFFI_JIT_REMOTE)
  // `urls` parsed (parse_remote_urls): the servers the facade asks, in order.
  std::vector<RemoteUrl> servers;
  bool read_only = false;         // never PUT
  std::string key_namespace = "tvmffi-jit";
  int connect_timeout_ms = 100;
  int first_byte_timeout_ms = 5000;
  int transfer_timeout_ms = 60000;
  // As received; memory for a download is at most this plus a small constant,
  // checked before anything is buffered.
  uint64_t max_blob_bytes = 1ull << 30;
  // The most one module's lookup downloads in total, from every remote: the
  // result lists and each result it tries (docs/remote.md, "Limits"). Every
  // download is capped by what is left, so a list of 8 ids whose objects are
  // garbage costs at most this, not 8 blob limits. The environment's default
  // is twice max_blob_bytes (remote_options_from_environment), as here.
  uint64_t max_lookup_bytes = 2ull << 30;
  std::string libcurl;  // $TVMFFI_JIT_LIBCURL: the libcurl to dlopen (empty: the usual sonames)
  S3Settings s3;
  // Signing (cache/transfer/signing.h, docs/remote.md "Trust"): the files as given,
  // then the keys load_remote_keys() read from them.
  std::string sign_key_file;                   // uploads and exports are signed with it
  std::vector<std::string> trusted_key_files;  // any given: only entries signed by one are used
  std::optional<SecretKey> sign_key;
  std::vector<PublicKey> trusted_keys;
  bool enabled() const { return !servers.empty(); }
};

// Checks what the caller read from the environment (cli/build_request.h,
// remote_options_from_environment): with an s3:// URL among the urls, the
// AWS settings (S3Settings; a malformed $AWS_ENDPOINT_URL or $AWS_REGION is
// usage_error, exit 2); then loads the key files (load_remote_keys).
void finish_remote_options(RemoteOptions& options);

// Reads sign_key_file and trusted_key_files into sign_key and trusted_keys;
// usage_error (exit 2) naming a file that is not a key of its kind.
void load_remote_keys(RemoteOptions& options);

}  // namespace tvmffi_jit::cache
