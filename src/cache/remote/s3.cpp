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
// when it refuses (its XML error's Code and Message) goes into the warning.
#include <cctype>
#include <string>
#include <string_view>

#include "cache/remote/http.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

constexpr size_t kMaxErrorBodyBytes = 64 << 10;
// The text between <tag> and </tag>, searched in `xml` only; nullopt when absent
// or longer than `max`.
std::optional<std::string_view> element(std::string_view xml, std::string_view tag, size_t max) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  size_t b = xml.find(open);
  if (b == std::string_view::npos) return std::nullopt;
  b += open.size();
  size_t e = xml.find(close, b);
  if (e == std::string_view::npos || e - b > max) return std::nullopt;
  return xml.substr(b, e - b);
}

// What a refusal usually means and what to change.
const char* hint_for(std::string_view code) {
  if (code == "AccessDenied" || code == "AllAccessDisabled")
    return "these credentials may not do this on the bucket: see the policies in docs/remote.md (S3); a read-only "
           "identity needs --remote-read-only";
  if (code == "SignatureDoesNotMatch") return "check AWS_SECRET_ACCESS_KEY (and AWS_REGION)";
  if (code == "InvalidAccessKeyId") return "check AWS_ACCESS_KEY_ID";
  if (code == "NoSuchBucket") return "create the bucket, or fix the bucket name in the s3:// URL";
  if (code == "ExpiredToken" || code == "InvalidToken" || code == "TokenRefreshRequired")
    return "renew the temporary credentials (AWS_SESSION_TOKEN)";
  if (code == "AuthorizationHeaderMalformed" || code == "PermanentRedirect" || code == "IllegalLocationConstraintException")
    return "set AWS_REGION to the bucket's region";
  return nullptr;
}

// A server's words with every credential-shaped run hidden: a run of 20 or
// more characters of [A-Za-z0-9+/=_-] (a session token, a secret key, a
// SigV4 signature, a string to sign's hash) becomes "***". Servers echo
// them in <Message> ("The provided token ... <token>"), and the message goes
// into warnings and --json.
std::string redact_credentials(std::string_view text) {
  auto token_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=' || c == '_' || c == '-';
  };
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && token_char(text[j])) ++j;
    if (j == i) {
      out.push_back(text[i++]);
      continue;
    }
    out += j - i >= 20 ? std::string("***") : std::string(text.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

std::string s3_error_code(std::string_view body) {
  std::string_view xml = body.substr(0, kMaxErrorBodyBytes);
  if (xml.find("<Error>") == std::string_view::npos) return "";
  auto code = element(xml, "Code", 64);
  if (!code || code->empty()) return "";
  for (char c : *code)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.') return "";
  return std::string(*code);
}

std::string s3_error_reason(std::string_view body) {
  std::string code = s3_error_code(body);
  if (code.empty()) return "";
  std::string out = code;
  if (auto message = element(body.substr(0, kMaxErrorBodyBytes), "Message", 4096); message && !message->empty()) {
    std::string shown = redact_credentials(*message);
    if (shown.size() > 300) shown = shown.substr(0, 300) + "...";
    out += ": " + quote_for_message(shown);
  }
  if (const char* hint = hint_for(code)) out += "; " + std::string(hint);
  return out;
}

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
