// Which image of a fatbin the driver would run on a device: the documented
// compatibility rules (docs/formats.md, "Which image runs on a device"), used by the probe (to know which
// entry's kernel names to resolve) and by the verdict (what to compare with).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tvmffi_jit::driver {

struct ParsedArch {
  bool ptx = false;  // compute_XY (PTX) rather than sm_XY (SASS)
  int major = 0, minor = 0;
  char suffix = 0;   // 0, 'a' or 'f'
};

// "sm_90a", "compute_100f", "sm_120" -> parsed; nullopt otherwise.
std::optional<ParsedArch> parse_arch(const std::string& text);

// True if code for `arch` runs on a device of compute capability major.minor:
// plain SASS on the same major with minor <= device minor; `a` only on exactly
// that SM; `f` within the family (same major, minor <= device minor); PTX with
// a target not above the device (a/f: as for SASS).
bool runs_on(const ParsedArch& arch, int major, int minor);

// Index into `archs` of the image the driver prefers: the best compatible SASS
// (an exact SM first, then the highest minor), else the highest compatible
// PTX. nullopt when nothing is compatible.
std::optional<size_t> select_image(const std::vector<std::string>& archs, int major, int minor);

}  // namespace tvmffi_jit::driver
