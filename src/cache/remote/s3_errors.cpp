// S3's XML error bodies (`<Code>AccessDenied</Code><Message>...</Message>`),
// read by the HTTP transfer (http.cpp) for its warnings: what the server said
// when it refused, and what to do for the usual codes.
#include <cctype>
#include <optional>
#include <string>
#include <string_view>

#include "cache/remote/s3_errors.h"
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

}  // namespace tvmffi_jit::cache
