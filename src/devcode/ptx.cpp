// PTX listing: .version/.target, kernels (.entry definitions) with their
// parameter bytes and performance directives, module-scope variables.
// Rules: docs/formats.md, "PTX". One linear pass; function
// bodies are skipped by brace matching, never parsed.
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "devcode/parsers.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tvmffi_jit::devcode {

namespace {

// Next of { } " / at or after p (end if none): 16 bytes per step with SSE2.
inline const char* find_special(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}'), quote = _mm_set1_epi8('"'),
                slash = _mm_set1_epi8('/');
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, open), _mm_cmpeq_epi8(v, close)),
                               _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)));
    int mask = _mm_movemask_epi8(hit);
    if (mask) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p < end && *p != '{' && *p != '}' && *p != '"' && *p != '/') ++p;
  return p;
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : s_(text) {}

  // Next token: an identifier/directive/number run, a quoted string, or one
  // punctuation character. Empty at end of input.
  std::string_view next() {
    skip_space_and_comments();
    if (p_ >= s_.size()) return {};
    size_t start = p_;
    char c = s_[p_];
    if (c == '"') {
      ++p_;
      while (p_ < s_.size() && s_[p_] != '"') p_ += (s_[p_] == '\\') ? 2 : 1;
      p_ = p_ < s_.size() ? p_ + 1 : s_.size();
      return s_.substr(start, p_ - start);
    }
    if (is_word(c)) {
      while (p_ < s_.size() && is_word(s_[p_])) ++p_;
      return s_.substr(start, p_ - start);
    }
    ++p_;
    return s_.substr(start, 1);
  }
  std::string_view peek() {
    size_t save = p_;
    std::string_view t = next();
    p_ = save;
    return t;
  }
  // Line of the current position, counted only when a message needs it.
  size_t line() const { return 1 + std::count(s_.begin(), s_.begin() + p_, '\n'); }

  // Skips a balanced { ... } whose opening brace was just consumed, scanning
  // raw characters (function bodies are most of a PTX file and hold nothing
  // the listing needs). Comments and strings may contain braces.
  bool skip_block() {
    size_t depth = 1;
    const char* p = s_.data() + p_;
    const char* end = s_.data() + s_.size();
    while ((p = find_special(p, end)) < end) {
      char c = *p++;
      switch (c) {
        case '{': ++depth; break;
        case '}':
          if (--depth == 0) {
            p_ = p - s_.data();
            return true;
          }
          break;
        case '"':
          while (p < end && *p != '"') p += (*p == '\\') ? 2 : 1;
          if (p < end) ++p;
          break;
        case '/':
          if (p < end && *p == '/') {
            while (p < end && *p != '\n') ++p;
          } else if (p < end && *p == '*') {
            ++p;
            while (p + 1 < end && !(p[0] == '*' && p[1] == '/')) ++p;
            p = p + 1 < end ? p + 2 : end;
          }
          break;
        default: break;
      }
    }
    p_ = s_.size();
    return false;
  }

 private:
  static bool is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '$' || c == '%' || c == '.';
  }
  void skip_space_and_comments() {
    while (p_ < s_.size()) {
      char c = s_[p_];
      if (c == '\n' || c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\0') ++p_;
      else if (c == '/' && p_ + 1 < s_.size() && s_[p_ + 1] == '/') {
        while (p_ < s_.size() && s_[p_] != '\n') ++p_;
      } else if (c == '/' && p_ + 1 < s_.size() && s_[p_ + 1] == '*') {
        size_t end = s_.find("*/", p_ + 2);
        p_ = end == std::string_view::npos ? s_.size() : end + 2;
      } else break;
    }
  }
  std::string_view s_;
  size_t p_ = 0;
};


// A decimal number of at most 19 digits (no sign, no overflow), or nothing.
std::optional<uint64_t> parse_uint(std::string_view t) {
  if (t.empty() || t.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + uint64_t(c - '0');
  }
  return v;
}

// Bytes of a PTX fundamental type (.u32, .b8, .f64, ...); 0 if not one.
uint32_t type_size(std::string_view t) {
  if (t.size() < 3 || t[0] != '.') return 0;
  char k = t[1];
  if (k != 'u' && k != 's' && k != 'b' && k != 'f') {
    if (t == ".pred") return 1;
    return 0;
  }
  std::optional<uint64_t> bits = parse_uint(t.substr(2));
  if (!bits) {
    if (t == ".f16x2" || t == ".bf16x2") return 4;
    if (t == ".bf16") return 2;
    return 0;
  }
  if (*bits % 8 != 0 || *bits == 0 || *bits > 128) return 0;
  return static_cast<uint32_t>(*bits / 8);
}

// Reads "[N]" suffixes after a name and multiplies them into `count`.
// Returns false for "[]" (size given by an initializer).
bool read_dims(Lexer& lx, uint64_t& count) {
  bool known = true;
  while (lx.peek() == "[") {
    lx.next();
    std::string_view t = lx.next();
    if (t == "]") { known = false; continue; }
    std::optional<uint64_t> n = parse_uint(t);
    if (!n) fail("PTX line {}: bad array size '{}'", lx.line(), t);
    if (lx.next() != "]") fail("PTX line {}: expected ']'", lx.line());
    if (*n != 0 && count > (uint64_t(1) << 40) / *n) fail("PTX line {}: array size overflows", lx.line());
    count *= *n;
  }
  return known;
}

// Skips a balanced { ... } whose opening brace was just consumed.
void skip_block(Lexer& lx) {
  if (!lx.skip_block()) fail("PTX: unterminated '{{' block at end of input (line {})", lx.line());
}

// Skips to the ';' ending a statement, stepping over any initializer braces.
void skip_statement(Lexer& lx) {
  while (true) {
    std::string_view t = lx.next();
    if (t.empty() || t == ";") return;
    if (t == "{") skip_block(lx);
  }
}

std::optional<Dim3> read_dims_directive(Lexer& lx) {
  Dim3 d{1, 1, 1};
  uint32_t* slots[3] = {&d.x, &d.y, &d.z};
  for (int i = 0; i < 3; ++i) {
    std::optional<uint64_t> v = parse_uint(lx.next());
    if (!v || *v > 0xffffffffu) fail("PTX line {}: bad dimension", lx.line());
    *slots[i] = static_cast<uint32_t>(*v);
    if (lx.peek() != ",") break;
    lx.next();
  }
  return d;
}

uint32_t read_number(Lexer& lx, const char* what) {
  std::string_view t = lx.next();
  std::optional<uint64_t> v = parse_uint(t);
  if (!v || *v > 0xffffffffu) fail("PTX line {}: bad {} '{}'", lx.line(), what, t);
  return static_cast<uint32_t>(*v);
}

// Parameter list after "(" : ".param .u64 .ptr .global .align 8 name", ".param .align 4 .b8 name[160]".
void read_params(Lexer& lx, Kernel& k) {
  uint64_t offset = 0;
  uint32_t count = 0;
  if (lx.peek() == ")") { lx.next(); k.param_bytes = 0; k.param_count = 0; return; }
  while (true) {
    uint32_t elem = 0, align = 0;
    bool ptr = false;
    uint64_t n = 1;
    while (true) {
      std::string_view t = lx.next();
      if (t.empty()) fail("PTX: parameter list of {} not closed", k.name);
      if (t == "," || t == ")") {
        if (elem == 0) fail("PTX line {}: parameter of {} has no type", lx.line(), k.name);
        uint64_t a = align ? align : elem;
        if (a & (a - 1)) fail("PTX line {}: bad alignment {}", lx.line(), a);
        offset = align_up(offset, a) + uint64_t(elem) * n;
        ++count;
        if (t == ")") {
          k.param_bytes = static_cast<uint32_t>(offset);
          k.param_count = count;
          return;
        }
        break;
      }
      if (t == ".ptr") ptr = true;
      else if (t == ".align") {
        uint32_t v = read_number(lx, "alignment");
        if (!ptr) align = v;  // after .ptr, .align is the pointee's alignment
      } else if (uint32_t sz = type_size(t); sz && elem == 0) elem = sz;
      else if (t[0] != '.' && t != "[") read_dims(lx, n);
      if (offset > (uint64_t(1) << 32)) fail("PTX: parameters of {} overflow", k.name);
    }
  }
}

void read_variable(Lexer& lx, std::string_view space, Entry& entry, ListingBudget& listing) {
  // [.align N] [.attribute(.managed)] [.v2|.v4] .type name[dims] [= init] ;
  uint32_t elem = 0, vec = 1;
  bool managed = false;
  std::string name;
  uint64_t n = 1;
  bool known = true;
  while (true) {
    std::string_view t = lx.next();
    if (t.empty()) return;
    if (t == ";") break;
    if (t == "=" || t == "{") {
      if (t == "{") skip_block(lx);
      skip_statement(lx);
      break;
    }
    if (t == ".align") { read_number(lx, "alignment"); continue; }
    if (t == ".attribute") {
      while (true) {  // (.managed) / (.unified(...))
        std::string_view a = lx.next();
        if (a.empty() || a == ";") return;
        if (a == ".managed") managed = true;
        if (a == ")" && lx.peek() != ")") break;
      }
      continue;
    }
    if (t == ".v2") { vec = 2; continue; }
    if (t == ".v4") { vec = 4; continue; }
    if (t == ".v8") { vec = 8; continue; }
    if (uint32_t sz = type_size(t); sz && elem == 0) { elem = sz; continue; }
    if (t[0] != '.' && name.empty() && t != ",") {
      name = std::string(t);
      known = read_dims(lx, n);
    }
  }
  if (name.empty()) return;
  listing.take(ListingBudget::global_cost(name));
  Global g;
  g.name = name;
  g.space = managed ? "managed" : space == ".const" ? "constant" : "global";
  g.size = known ? uint64_t(elem) * vec * n : 0;
  entry.globals.push_back(std::move(g));
}

}  // namespace

void parse_ptx(std::string_view text, const InspectOptions& options, Entry& entry, ListingBudget& listing) {
  Lexer lx(text);
  std::string_view first = lx.peek();
  if (first == ".version") {
    lx.next();
    std::string_view v = lx.next();
    if (v.empty() || v.find('.') == std::string_view::npos)
      fail("PTX line {}: bad .version '{}'", lx.line(), v);
    if (entry.ptx_version.empty()) entry.ptx_version = std::string(v);
  } else if (first != ".target") {
    fail("PTX: first directive is '{}' (expected .version)", first.substr(0, 40));
  }
  while (true) {
    std::string_view t = lx.next();
    if (t.empty()) break;
    if (t == ".target") {
      std::string_view target = lx.next();
      if (target.substr(0, 3) != "sm_") fail("PTX line {}: bad .target '{}'", lx.line(), target);
      if (entry.arch.empty()) entry.arch = "compute_" + std::string(target.substr(3));
      while (lx.peek() == ",") { lx.next(); lx.next(); }
    } else if (t == ".extern") {
      // Declarations define nothing: skip the whole statement.
      skip_statement(lx);
    } else if (t == ".entry") {
      Kernel k;
      k.name = std::string(lx.next());
      if (k.name.empty() || k.name == "(") fail("PTX line {}: .entry without a name", lx.line());
      if (lx.peek() == "(") {
        lx.next();
        read_params(lx, k);
      } else {
        k.param_bytes = 0;
        k.param_count = 0;
      }
      bool defined = false;
      while (true) {
        std::string_view d = lx.next();
        if (d.empty()) fail("PTX: kernel {} has no body", k.name);
        if (d == "{") { skip_block(lx); defined = true; break; }
        if (d == ";") break;
        if (d == ".maxntid") k.max_ntid = read_dims_directive(lx);
        else if (d == ".reqntid") k.req_ntid = read_dims_directive(lx);
        else if (d == ".reqnctapercluster") k.cluster_dims = read_dims_directive(lx);
        else if (d == ".explicitcluster") k.explicit_cluster = true;
        else if (d == ".maxnreg") k.max_registers = read_number(lx, ".maxnreg");
        else if (d == ".minnctapersm") k.min_ctas_per_sm = read_number(lx, ".minnctapersm");
        else if (d == ".pragma") skip_statement(lx);
      }
      if (defined) {
        listing.take(ListingBudget::kernel_cost(k.name));
        k.demangled = k.name;  // demangled after parsing, once per distinct name
        if (k.max_ntid) k.max_threads = k.max_ntid->product();
        else if (k.req_ntid) k.max_threads = k.req_ntid->product();
        entry.kernels.push_back(std::move(k));
      }
    } else if (t == ".global" || t == ".const") {
      read_variable(lx, t, entry, listing);
    } else if (t == "{") {
      skip_block(lx);
    } else if (t == "}") {
      fail("PTX line {}: unbalanced '}}'", lx.line());
    }
  }
  if (entry.arch.empty()) fail("PTX: no .target directive");
}

}  // namespace tvmffi_jit::devcode
