// Which C++ units a precompiled header can serve and how
// (compile/precompiled_headers.h has the store): a source's first include,
// the flags a PCH stands for, the -I folders after the header's, the
// compile environment that enters its key, and after the compile the
// unit's depfile and the compiler's complaints.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::compile {

// A source's first include, when nothing but comments and blank lines come
// before it (GCC loads a PCH only for an include before the first token):
// the name as written and whether it is the <...> form.
struct FirstInclude {
  std::string name;
  bool angle = false;
};
std::optional<FirstInclude> first_include(std::string_view text);

// What a unit's first include is decided from: the start of its source
// file (its first 64 KiB; an include later than that is not a first one).
// Empty when it cannot be read.
std::string source_start(const std::string& path);

// The flags of a GCC C++ compile that a PCH built with them stands for:
// argv() without the program, the depfile options, -c, the input and -o.
// nullopt when a flag would make the PCH unusable or different from the
// unit's own reading of the header (-include, -imacros, -x, -E, -S,
// -save-temps, -fsyntax-only, preprocessor-only dependency modes, a
// response file), or the object different from one built without a PCH
// (-g, whose DW_AT_producer lists the switches; -frecord-gcc-switches).
std::optional<std::vector<std::string>> precompilable_flags(const CompileStep& step);

// `flags` without the -I folders given after `header_dir`'s own -I (into
// `trailing`, as the compiler opens them; a folder given again is dropped,
// not trailing). Unchanged when the header was not found through an -I.
std::vector<std::string> without_trailing_include_dirs(const std::vector<std::string>& flags,
                                                       const std::string& header_dir,
                                                       std::vector<std::string>& trailing);

// Whether a variable of the object keys' environment can change a GCC C++
// compile (not those that choose the compiler, nor nvcc's, hipcc's or the
// linker's).
bool changes_a_gcc_compile(const std::string& name);

// After a compile that loaded a PCH from `folder`: the paths under it leave
// the unit's depfile (a later include of the header finds its link there),
// so the unit's record is the one it has without a PCH. The depfile is
// rewritten for `target` only when it named one.
void forget_pch_reads(const std::string& depfile_path, const std::string& folder, const std::string& target);

// Whether a failed compile's output says its compiler could not use a PCH
// (a corrupt or truncated .gch, one it would have to relocate).
bool mentions_precompiled_header(const std::string& compiler_output);

}  // namespace tvmffi_jit::compile
