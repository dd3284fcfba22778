#include "tvmffi_jit/util/strings.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

#include <openssl/evp.h>

namespace tvmffi_jit::util {

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string to_lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::vector<std::string> split_any(std::string_view s, std::string_view delims) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || delims.find(s[i]) != std::string_view::npos) {
      if (i > start) out.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::vector<std::string> split_lines(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t nl = s.find('\n', start);
    if (nl == std::string_view::npos) nl = s.size();
    std::string_view line = s.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.emplace_back(line);
    start = nl + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string r;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) r += sep;
    r += parts[i];
  }
  return r;
}

std::string pad_right(std::string_view s, size_t width) {
  return std::string(s) + std::string(width > s.size() ? width - s.size() : 0, ' ');
}

std::string pad_left(std::string_view s, size_t width) {
  return std::string(width > s.size() ? width - s.size() : 0, ' ') + std::string(s);
}

std::string shell_quote(std::string_view arg) {
  if (arg.empty()) return "''";
  bool safe = std::all_of(arg.begin(), arg.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("@%_+=:,./-").find(c) != std::string_view::npos;
  });
  if (safe) return std::string(arg);
  std::string r = "'";
  for (char c : arg) {
    if (c == '\'') r += "'\\''";
    else r += c;
  }
  return r + "'";
}

std::string format_command(const std::vector<std::string>& argv) {
  std::string r;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i) r += ' ';
    r += shell_quote(argv[i]);
  }
  return r;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string> nearest(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& c : candidates) {
    size_t d = edit_distance(to_lower(word), to_lower(c));
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Plausible typo: at most a third of the longer word, and at least one edit allowed.
  if (best && best_d <= std::max<size_t>(2, std::max(word.size(), best->size()) / 3)) return best;
  return std::nullopt;
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

namespace {

// The decimal digits that start `text` as a number, and what follows them;
// nothing when `text` does not start with a digit or the number exceeds `max`.
struct LeadingNumber {
  uint64_t value;
  std::string_view rest;
};
std::optional<LeadingNumber> leading_number(std::string_view text, uint64_t max) {
  size_t i = 0;
  uint64_t n = 0;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    uint64_t d = static_cast<uint64_t>(text[i] - '0');
    if (n > (max - d) / 10) return std::nullopt;
    n = n * 10 + d;
  }
  return LeadingNumber{n, text.substr(i)};
}

constexpr uint64_t kMaxInt64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

}  // namespace

std::optional<uint64_t> parse_size(std::string_view text) {
  auto number = leading_number(trim(text), std::numeric_limits<uint64_t>::max());
  if (!number) return std::nullopt;
  uint64_t n = number->value;
  std::string unit = to_lower(trim(number->rest));
  uint64_t mult = 1;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mult = 1ull << 10;
  else if (unit == "m" || unit == "mb" || unit == "mib") mult = 1ull << 20;
  else if (unit == "g" || unit == "gb" || unit == "gib") mult = 1ull << 30;
  else if (unit == "t" || unit == "tb" || unit == "tib") mult = 1ull << 40;
  else return std::nullopt;
  if (n > std::numeric_limits<uint64_t>::max() / mult) return std::nullopt;
  return n * mult;
}

std::optional<int64_t> parse_duration_seconds(std::string_view text) {
  auto number = leading_number(trim(text), kMaxInt64);
  if (!number) return std::nullopt;
  int64_t n = static_cast<int64_t>(number->value);
  std::string unit = to_lower(trim(number->rest));
  int64_t mult;
  if (unit.empty() || unit == "s") mult = 1;
  else if (unit == "m" || unit == "min") mult = 60;
  else if (unit == "h") mult = 3600;
  else if (unit == "d") mult = 86400;
  else if (unit == "w") mult = 7 * 86400;
  else return std::nullopt;
  if (n > std::numeric_limits<int64_t>::max() / mult) return std::nullopt;
  return n * mult;
}

std::optional<int64_t> parse_duration_ms(std::string_view text) {
  std::string_view t = trim(text);
  std::string lower = to_lower(t);
  if (ends_with(lower, "ms")) {
    auto number = leading_number(trim(t.substr(0, t.size() - 2)), kMaxInt64);
    if (!number || !number->rest.empty()) return std::nullopt;
    return static_cast<int64_t>(number->value);
  }
  auto s = parse_duration_seconds(t);
  if (!s || *s > std::numeric_limits<int64_t>::max() / 1000) return std::nullopt;
  return *s * 1000;
}

std::optional<bool> parse_bool(std::string_view text) {
  std::string v = to_lower(trim(text));
  if (v == "1" || v == "true" || v == "yes" || v == "on" || v == "y") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off" || v == "n") return false;
  return std::nullopt;
}

std::optional<std::string> hex_decode(std::string_view hex) {
  if (hex.size() % 2) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

std::string hex_encode(const uint8_t* data, size_t size) {
  static const char* digits = "0123456789abcdef";
  std::string r(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    r[2 * i] = digits[data[i] >> 4];
    r[2 * i + 1] = digits[data[i] & 15];
  }
  return r;
}

namespace {
const unsigned char* bytes(const std::string& s) { return reinterpret_cast<const unsigned char*>(s.data()); }
}  // namespace

std::string base64_encode(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes(in), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::string> base64_decode(const std::string& text) {
  // EVP_DecodeBlock skips whitespace and counts padding as zero bytes:
  // check the alphabet and the padding here so that one text has one meaning.
  if (text.empty() || text.size() % 4 != 0 || text.size() > (1u << 20)) return std::nullopt;
  size_t pad = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
    if (c == '=' && i + 2 >= text.size()) {
      ++pad;
      continue;
    }
    if (!alpha || pad) return std::nullopt;
  }
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes(text), static_cast<int>(text.size()));
  if (n < 0 || static_cast<size_t>(n) != out.size()) return std::nullopt;
  out.resize(out.size() - pad);
  return out;
}

}  // namespace tvmffi_jit::util
