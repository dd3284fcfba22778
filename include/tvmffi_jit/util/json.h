// The one way JSON holding outside text is turned into bytes.
//
// Compiler output, --version text, file paths and flags are bytes, not
// UTF-8; nlohmann::json::dump() throws on invalid UTF-8, which once turned a
// successful build into exit 5 and discarded its artifact. Everything that
// dumps JSON with text from outside the tool goes through dump_json(), which
// replaces each invalid byte sequence with U+FFFD instead. Where the exact
// bytes matter for a decision (cache header paths) the caller stores them in
// a lossless form itself (cache/entry.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::util {

// j.dump(indent) with invalid UTF-8 replaced by U+FFFD; never throws for text.
inline std::string dump_json(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if (c >= 0xC2 && c <= 0xDF) { n = 1; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 2; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 3; cp = c & 0x07; }
    else return false;
    if (i + n >= s.size()) return false;  // truncated sequence
    for (size_t k = 1; k <= n; ++k) {
      unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

// Bytes that travel between processes of the tool as JSON (the driver probe
// protocol) and must come back exactly: valid UTF-8 stays a string, anything
// else becomes {"hex": "<its bytes in hex>"}. A kernel name with one flipped
// bit is data, not a reason to fail the exchange. User-facing JSON shows such
// text through dump_json() instead.
inline nlohmann::json bytes_to_json(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  return {{"hex", hex_encode(reinterpret_cast<const uint8_t*>(s.data()), s.size())}};
}

// The inverse of bytes_to_json(); throws nlohmann::json::exception (as a
// malformed message would) when `j` is neither form.
inline std::string bytes_from_json(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  auto bytes = hex_decode(j.at("hex").get<std::string>());
  if (!bytes) throw nlohmann::json::other_error::create(501, "malformed hex bytes", &j);
  return *bytes;
}

// `s` as it reads back after a dump_json() round trip: unchanged when it is
// valid UTF-8, else with every invalid sequence replaced by U+FFFD. For text
// that enters a cache key and is also memoised as JSON (compiler --version
// output), so the key is the same whether the text came from the memo or not.
inline std::string json_text(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  return nlohmann::json::parse(dump_json(nlohmann::json(std::string(s)))).get<std::string>();
}

}  // namespace tvmffi_jit::util
