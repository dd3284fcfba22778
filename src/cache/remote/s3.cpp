// S3 backend: s3://BUCKET[/PREFIX], object "PREFIX/<namespace>/<portable key>".
//
// An S3 object store is an HTTP server with signed requests, so this backend
// is the HTTP backend (http.cpp: the same libcurl handle, deadlines
// and size limit) given an address and a signer: AWS SigV4 through libcurl's
// CURLOPT_AWS_SIGV4 (libcurl >= 7.75), x-amz-content-sha256 carrying the
// body's SHA-256. Addressing: path-style (<endpoint>/<bucket>/<object>)
// against $AWS_ENDPOINT_URL (SeaweedFS, MinIO, Ceph RGW, R2, GCS interop all
// take it), virtual-hosted style (https://<bucket>.s3.<region>.amazonaws.com)
// against AWS itself. Without credentials requests are unsigned: a public
// bucket is readable anonymously (pull-request builds). What the server says
// when it refuses (its XML error's Code and Message) goes into the warning
// (s3_errors.cpp, read by the HTTP transfer).
#include <string>

#include "cache/remote/http.h"

namespace tvmffi_jit::cache {

std::unique_ptr<RemoteBackend> make_s3_backend(const RemoteUrl& u, const RemoteOptions& options) {
  const S3Settings& s3 = options.s3;
  std::string base;
  if (!s3.endpoint_url.empty()) {
    base = s3.endpoint_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    base += "/" + u.bucket;
  } else if (u.bucket.find('.') != std::string::npos) {
    // A dotted bucket name does not match the wildcard certificate of
    // *.s3.<region>.amazonaws.com: path-style there.
    base = "https://s3." + s3.region + ".amazonaws.com/" + u.bucket;
  } else {
    base = "https://" + u.bucket + ".s3." + s3.region + ".amazonaws.com";
  }
  if (!u.prefix.empty()) base += "/" + u.prefix;
  HttpSigning signing;
  if (!s3.anonymous()) {
    signing.aws_sigv4 = "aws:amz:" + s3.region + ":s3";
    signing.key_id = s3.access_key_id;
    signing.secret = s3.secret_access_key;
    signing.session_token = s3.session_token;
  }
  std::string shown = "s3://" + u.bucket + (u.prefix.empty() ? "" : "/" + u.prefix);
  // Without AWS_ENDPOINT_URL an s3:// URL means AWS: a name that does not
  // resolve is most often a server of one's own that the variable should name.
  std::string hint = s3.endpoint_url.empty()
                         ? " (AWS_ENDPOINT_URL is not set, so s3:// goes to AWS, region " + s3.region +
                               "; for another S3 server set AWS_ENDPOINT_URL=http://HOST:PORT)"
                         : " (from AWS_ENDPOINT_URL)";
  return make_http_backend(std::move(base), std::move(shown), options, std::move(signing), std::move(hint));
}

}  // namespace tvmffi_jit::cache
