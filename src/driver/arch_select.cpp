#include "arch_select.h"

#include <cctype>

namespace tvmffi_jit::driver {

std::optional<ParsedArch> parse_arch(const std::string& text) {
  ParsedArch a;
  std::string digits;
  size_t pos;
  if (text.rfind("sm_", 0) == 0) {
    pos = 3;
  } else if (text.rfind("compute_", 0) == 0) {
    a.ptx = true;
    pos = 8;
  } else {
    return std::nullopt;
  }
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) digits += text[pos++];
  if (digits.size() < 2 || digits.size() > 3) return std::nullopt;
  if (pos < text.size()) {
    if (pos + 1 != text.size() || (text[pos] != 'a' && text[pos] != 'f')) return std::nullopt;
    a.suffix = text[pos];
  }
  int n = std::stoi(digits);
  a.major = n / 10;
  a.minor = n % 10;
  return a;
}

bool runs_on(const ParsedArch& a, int major, int minor) {
  if (a.suffix == 'a') return a.major == major && a.minor == minor;
  if (a.suffix == 'f' || !a.ptx) return a.major == major && a.minor <= minor;
  return a.major < major || (a.major == major && a.minor <= minor);
}

std::optional<size_t> select_image(const std::vector<std::string>& archs, int major, int minor) {
  std::optional<size_t> best_sass, best_ptx;
  auto rank = [&](const ParsedArch& a) {
    // Exact SM first; then the newest code that still runs.
    return (a.major == major && a.minor == minor ? 1000 : 0) + a.major * 10 + a.minor;
  };
  std::optional<ParsedArch> sass_arch, ptx_arch;
  for (size_t i = 0; i < archs.size(); ++i) {
    auto a = parse_arch(archs[i]);
    if (!a || !runs_on(*a, major, minor)) continue;
    auto& best = a->ptx ? best_ptx : best_sass;
    auto& best_arch = a->ptx ? ptx_arch : sass_arch;
    if (!best || rank(*a) > rank(*best_arch)) {
      best = i;
      best_arch = a;
    }
  }
  return best_sass ? best_sass : best_ptx;
}

}  // namespace tvmffi_jit::driver
