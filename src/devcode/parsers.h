// Internal entry points shared by the devcode sources (not public API).
#pragma once

#include <string>
#include <string_view>

#include "devcode/bytes.h"
#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/devcode/report.h"

namespace tvmffi_jit::devcode {

// Fills the ELF fields, kernels and globals of `entry` from a cubin. When
// entry.arch is already set (from a fatbin header) it is kept. Throws FormatError.
void parse_cubin(Bytes cubin, const InspectOptions& options, Entry& entry);

// Fills ptx_version (unless set), arch (unless set), kernels and globals of
// `entry` from PTX text (trailing NULs allowed). Throws FormatError.
void parse_ptx(std::string_view text, const InspectOptions& options, Entry& entry);

// Itanium C++ demangling; returns the input when it is not a mangled name.
std::string demangle(std::string_view name);

}  // namespace tvmffi_jit::devcode
