// A remote cache URL, parsed once (docs/remote.md, "Servers"):
//
//   http(s)://[user:password@]host[:port][/path]   objects at <url>/<namespace>/<portable key>
//   redis://[[user]:password@]host[:port][/db]     key "<namespace>:<portable key>"
//   s3://BUCKET[/PREFIX]                           object "PREFIX/<namespace>/<portable key>"
//
// The scheme table (kSchemes in cache/remote/backend.cpp, RemoteScheme in
// cache/remote/backend.h) is the one place a scheme is registered: its name,
// the syntax of its URLs, its object names and its backend. The backends take
// the parsed struct and never look at the text again, and
// remote_object_name() is the one place a namespace is joined to a key.
#pragma once

#include <string>
#include <vector>

namespace tvmffi_jit::cache {

struct RemoteScheme;  // a row of the scheme table (cache/remote/backend.h)

struct RemoteUrl {
  const RemoteScheme* scheme = nullptr;  // its row of the scheme table
  std::string text;   // as given: may hold a password, so never shown
  std::string shown;  // redact_url(text): what messages and logs name
  // http(s) and redis: the host (IPv6 without its brackets); s3: empty.
  std::string host;
  int port = 0;  // redis: 6379 unless given; http(s): 0 (the scheme's)
  // redis: AUTH's user (may be empty) and password. http(s) credentials stay
  // in `text`, which libcurl reads for basic auth.
  std::string user;
  std::string password;
  int db = 0;          // redis: SELECT's database number
  std::string bucket;  // s3
  std::string prefix;  // s3: no leading or trailing '/'; may be empty
};

// A server's name for the blob of `portable_key` under `key_namespace`
// (empty: none), joined by the scheme's separator: "<ns>/<key>" for HTTP and
// S3 (a path), "<ns>:<key>" for Redis (its usual separator). A null scheme
// (a backend given directly, as tests do) names objects as paths.
std::string remote_object_name(const RemoteScheme* scheme, const std::string& key_namespace,
                               const std::string& portable_key);

// Parses and checks one URL with its scheme's syntax (host, Redis database
// number, S3 bucket name and prefix...). Throws usage_error (exit 2) naming
// the (redacted) URL. These two and is_s3_url() are defined in backend.cpp,
// beside the scheme table they read; the syntax parsers its rows point at
// are in url.cpp.
RemoteUrl parse_remote_url(const std::string& url);
std::vector<RemoteUrl> parse_remote_urls(const std::vector<std::string>& urls);

// Whether `url` names an S3 bucket (its scheme only; nothing else checked).
bool is_s3_url(const std::string& url);

// "redis://:secret@h:1/0" -> "redis://***@h:1/0": URLs as logs show them.
std::string redact_url(const std::string& url);

}  // namespace tvmffi_jit::cache
