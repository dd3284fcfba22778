// The HTTP transfer shared by the http(s) and the S3 backends (private to the
// cache layer): one libcurl handle (libcurl loaded with dlopen() on first use),
// the same deadlines and size limit for both. S3 adds only how requests are
// signed and how its XML error bodies are read.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "cache/remote/backends.h"

namespace tvmffi_jit::cache {

// How the requests of one backend are authenticated. Empty: as the URL says
// (basic auth from user:password@ in it, else none).
struct HttpSigning {
  std::string aws_sigv4;  // CURLOPT_AWS_SIGV4 provider, "aws:amz:<region>:s3"
  std::string key_id;     // the SigV4 credentials (never shown)
  std::string secret;
  std::string session_token;  // sent (and signed) as x-amz-security-token when not empty
};

// `base_url` (no trailing '/') + "/" + object is what GET and PUT address;
// `shown` is how messages name the server (no secret in it). `unresolved_hint`
// follows the host's name when it cannot be resolved (S3: where the host came
// from and which variable changes it).
std::unique_ptr<RemoteBackend> make_http_backend(std::string base_url, std::string shown, const RemoteOptions& options,
                                                 HttpSigning signing, std::string unresolved_hint = {});

// $AWS_ENDPOINT_URL (http(s)://host[:port][/path]) and the region; usage_error
// naming the variable. (In url.cpp, with the other syntax checks.)
void check_s3_settings(const S3Settings& s3);

}  // namespace tvmffi_jit::cache
