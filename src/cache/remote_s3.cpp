// S3 backend: s3://BUCKET[/PREFIX], object "PREFIX/<namespace>/<portable key>".
//
// An S3 object store is an HTTP server with signed requests, so this backend
// is the HTTP backend (remote_http.cpp: the same libcurl handle, deadlines
// and size limit) given an address and a signer: AWS SigV4 through libcurl's
// CURLOPT_AWS_SIGV4 (libcurl >= 7.75), x-amz-content-sha256 carrying the
// body's SHA-256. Addressing: path-style (<endpoint>/<bucket>/<object>)
// against $AWS_ENDPOINT_URL (SeaweedFS, MinIO, Ceph RGW, R2, GCS interop all
// take it), virtual-hosted style (https://<bucket>.s3.<region>.amazonaws.com)
// against AWS itself. Without credentials requests are unsigned: a public
// bucket is readable anonymously (pull-request builds). What the server says
// when it refuses (its XML error's Code and Message) goes into the warning.
#include <string>
#include <string_view>

#include "remote_http.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

constexpr size_t kMaxErrorBodyBytes = 64 << 10;
constexpr size_t kMaxPrefixBytes = 512;

struct S3Url {
  std::string bucket;
  std::string prefix;  // no leading or trailing '/'; may be empty
};

// s3://BUCKET[/PREFIX[/]] (checked by check_s3_url)
S3Url parse_s3_url(const std::string& url) {
  std::string rest = url.substr(5);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t slash = rest.find('/');
  if (slash == std::string::npos) return {rest, ""};
  return {rest.substr(0, slash), rest.substr(slash + 1)};
}

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

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

}  // namespace

std::string s3_error_code(std::string_view body) {
  std::string_view xml = body.substr(0, kMaxErrorBodyBytes);
  if (xml.find("<Error>") == std::string_view::npos) return "";
  auto code = element(xml, "Code", 64);
  if (!code || code->empty()) return "";
  for (char c : *code)
    if (!is_lower_alnum(c) && !(c >= 'A' && c <= 'Z') && c != '.') return "";
  return std::string(*code);
}

std::string s3_error_reason(std::string_view body) {
  std::string code = s3_error_code(body);
  if (code.empty()) return "";
  std::string out = code;
  if (auto message = element(body.substr(0, kMaxErrorBodyBytes), "Message", 300); message && !message->empty())
    out += ": " + quote_for_message(*message);
  if (const char* hint = hint_for(code)) out += "; " + std::string(hint);
  return out;
}

void check_s3_url(const std::string& url) {
  S3Url u = parse_s3_url(url);
  const std::string shown = quote_for_message(url);
  // The rules of S3's bucket names (what every S3 server accepts and what
  // works as a DNS label for virtual-hosted addressing).
  bool ok = u.bucket.size() >= 3 && u.bucket.size() <= 63 && is_lower_alnum(u.bucket.front()) &&
            is_lower_alnum(u.bucket.back()) && u.bucket.find("..") == std::string::npos;
  for (char c : u.bucket) ok = ok && (is_lower_alnum(c) || c == '-' || c == '.');
  if (!ok)
    throw usage_error("remote " + shown +
                      ": the bucket name must be 3-63 characters of lowercase letters, digits, '-' and '.', "
                      "starting and ending with a letter or digit (s3://BUCKET[/PREFIX])");
  if (u.prefix.size() > kMaxPrefixBytes)
    throw usage_error("remote " + shown + ": the prefix is longer than " + std::to_string(kMaxPrefixBytes) + " bytes");
  if (!u.prefix.empty()) {
    // split_any drops empty parts: an empty segment ("a//b", "//a") is checked here.
    bool seg_ok = u.prefix.front() != '/' && u.prefix.find("//") == std::string::npos;
    for (const auto& seg : util::split_any(u.prefix, "/")) {
      seg_ok = seg_ok && seg != "." && seg != "..";
      for (char c : seg) seg_ok = seg_ok && (is_lower_alnum(c) || (c >= 'A' && c <= 'Z') || c == '-' || c == '_' || c == '.');
      if (!seg_ok)
        throw usage_error("remote " + shown +
                          ": the prefix must be '/'-separated names of letters, digits, '-', '_' and '.' "
                          "(no empty, '.' or '..' part): it becomes part of every object's name");
    }
  }
}

void check_s3_settings(const S3Settings& s3) {
  if (!s3.endpoint_url.empty()) {
    const std::string& e = s3.endpoint_url;
    size_t p = e.find("://");
    std::string scheme = p == std::string::npos ? "" : e.substr(0, p);
    std::string host = p == std::string::npos ? "" : e.substr(p + 3, e.find('/', p + 3) - (p + 3));
    if ((scheme != "http" && scheme != "https") || host.empty() || host[0] == ':' ||
        host.find('@') != std::string::npos || e.find_first_of("?# \t\r\n") != std::string::npos)
      throw usage_error("AWS_ENDPOINT_URL " + quote_for_message(e) +
                        ": expected http(s)://host[:port][/path] (the S3 server; unset it for AWS itself)");
  }
  bool region_ok = !s3.region.empty() && s3.region.size() <= 32;
  for (char c : s3.region) region_ok = region_ok && (is_lower_alnum(c) || c == '-');
  if (!region_ok)
    throw usage_error("AWS_REGION " + quote_for_message(s3.region) +
                      ": expected a region name such as us-east-1 (lowercase letters, digits and '-')");
}

std::unique_ptr<RemoteBackend> make_s3_backend(const std::string& url, const RemoteOptions& options) {
  const S3Url u = parse_s3_url(url);
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
  return make_http_backend(std::move(base), std::move(shown), options, std::move(signing));
}

}  // namespace tvmffi_jit::cache
