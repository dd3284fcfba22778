// Where a compile looks for headers and a link for libraries, in search
// order: a new file in one of them can shadow a recorded input
// (cache::record_shadows, cache::record_library_shadows).
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/cache/key.h"
#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::compile {

// The directories a compile searches for a header, in the order gcc tries
// them (its manual, "Options for Directory Search", and "Environment
// Variables"): the source's own directory (quote includes), -iquote, -I
// (nvcc: --include-path), CPATH, -isystem (nvcc: --system-include),
// C_INCLUDE_PATH or CPLUS_INCLUDE_PATH, -idirafter. The compiler's built-in
// directories are not listed: only a new file in one of these can shadow a
// recorded header (cache::record_shadows). Relative directories are the
// compiler's, i.e. relative to the build dir it runs in.
std::vector<std::string> include_search_dirs(const CompileStep& step, const std::string& build_dir,
                                             const std::vector<cache::ModuleKeyInputs::EnvVar>& env);

// The directories the linker searches for `-l` libraries before its built-in
// ones, in order: -L (as given, relative ones to the build dir it runs in),
// then LIBRARY_PATH (which the gcc driver passes on as -L after the
// command line's).
std::vector<std::string> library_search_dirs(const LinkStep& link, const std::string& build_dir,
                                             const std::vector<cache::ModuleKeyInputs::EnvVar>& env);

}  // namespace tvmffi_jit::compile
