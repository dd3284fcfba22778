#include "tvmffi_jit/cache/remote/url.h"

#include <cstdlib>
#include <string_view>

#include "cache/remote/backends.h"
#include "cache/remote/http.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

constexpr size_t kMaxPrefixBytes = 512;

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

// s3://BUCKET[/PREFIX[/]]: the bucket's and the prefix's rules (what every S3
// server accepts, and what works as a DNS label for virtual-hosted addressing).
void parse_s3_url(RemoteUrl& u) {
  std::string rest = u.text.substr(5);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t slash = rest.find('/');
  u.bucket = rest.substr(0, slash);
  u.prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  const std::string shown = quote_for_message(u.shown);  // never the userinfo a URL should not carry
  if (rest.find('@') != std::string::npos)
    throw usage_error("remote " + shown +
                      ": an s3:// URL carries no credentials; export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                      "(docs/remote.md, S3)");
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

namespace {

// [[user]:password@]host[:port][/rest] of host-based URLs; returns /rest
// without its '/' ("" when none).
std::string parse_authority(RemoteUrl& u, int default_port) {
  std::string rest = u.text.substr(u.text.find("://") + 3);
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  size_t at = authority.rfind('@');
  if (at != std::string::npos) {
    std::string cred = authority.substr(0, at);
    authority = authority.substr(at + 1);
    size_t colon = cred.find(':');
    if (colon == std::string::npos) {
      u.password = cred;
    } else {
      u.user = cred.substr(0, colon);
      u.password = cred.substr(colon + 1);
    }
  }
  if (authority.empty() || authority[0] == ':') throw usage_error("remote " + u.shown + ": the URL names no host");
  u.port = default_port;
  size_t bracket = authority.rfind(']');
  size_t colon = authority.rfind(':');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    // 1-65535 in decimal, nothing else: atoi's "6379x" and 71915 (which
    // wraps to 6379 in a sockaddr) would send the password to another port.
    const std::string port = authority.substr(colon + 1);
    long value = 0;
    bool port_ok = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
    if (port_ok) value = std::strtol(port.c_str(), nullptr, 10);
    if (!port_ok || value < 1 || value > 65535)
      throw usage_error("remote " + u.shown + ": the port " + quote_for_message(port) +
                        " is not a number from 1 to 65535");
    u.port = static_cast<int>(value);
    authority = authority.substr(0, colon);
  }
  if (authority.size() >= 2 && authority.front() == '[' && authority.back() == ']')
    authority = authority.substr(1, authority.size() - 2);
  u.host = authority;
  return slash == std::string::npos ? "" : rest.substr(slash + 1);
}

}  // namespace

void parse_host_url(RemoteUrl& u) { parse_authority(u, 0); }

void parse_redis_url(RemoteUrl& u) {
  const std::string db = parse_authority(u, 6379);
  if (db.empty()) return;
  if (db.find_first_not_of("0123456789") != std::string::npos || db.size() > 4)
    throw usage_error("remote " + u.shown + ": the path of a redis:// URL is a database number (redis://host:6379/0)");
  u.db = std::atoi(db.c_str());
}

std::string remote_object_name(const RemoteScheme* scheme, const std::string& key_namespace,
                               const std::string& portable_key) {
  if (key_namespace.empty()) return portable_key;
  return key_namespace + (scheme ? scheme->separator : '/') + portable_key;
}

std::string redact_url(const std::string& url) {
  size_t p = url.find("://");
  if (p == std::string::npos) return url;
  // The last '@' anywhere: a secret pasted with a '/' in it (AWS secret
  // keys have them) must not end the hidden part early. A path with an '@'
  // is shown shorter than it is, which only costs a display.
  size_t at = url.rfind('@');
  if (at == std::string::npos || at < p) return url;
  return url.substr(0, p + 3) + "***" + url.substr(at);
}

void check_s3_settings(const S3Settings& s3) {
  if (!s3.endpoint_url.empty()) {
    const std::string& e = s3.endpoint_url;
    size_t p = e.find("://");
    std::string scheme = p == std::string::npos ? "" : e.substr(0, p);
    std::string host = p == std::string::npos ? "" : e.substr(p + 3, e.find('/', p + 3) - (p + 3));
    if ((scheme != "http" && scheme != "https") || host.empty() || host[0] == ':' ||
        host.find('@') != std::string::npos || e.find_first_of("?# \t\r\n") != std::string::npos)
      throw usage_error("AWS_ENDPOINT_URL " + quote_for_message(redact_url(e)) +
                        ": expected http(s)://host[:port][/path] (the S3 server; unset it for AWS itself)");
  }
  // A CR or LF would end the header it is sent in and start another: refused
  // by name, never echoed (they are credentials).
  const std::pair<const char*, const std::string*> sent[] = {{"AWS_ACCESS_KEY_ID", &s3.access_key_id},
                                                             {"AWS_SECRET_ACCESS_KEY", &s3.secret_access_key},
                                                             {"AWS_SESSION_TOKEN", &s3.session_token}};
  for (const auto& [name, value] : sent)
    for (char c : *value)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        throw usage_error(std::string(name) + " contains a control character (CR, LF or another byte below 0x20); "
                          "it is sent in a request header: remove the stray newline from the variable");
  bool region_ok = !s3.region.empty() && s3.region.size() <= 32;
  for (char c : s3.region) region_ok = region_ok && (is_lower_alnum(c) || c == '-');
  if (!region_ok)
    throw usage_error("AWS_REGION " + quote_for_message(s3.region) +
                      ": expected a region name such as us-east-1 (lowercase letters, digits and '-')");
}

}  // namespace tvmffi_jit::cache
