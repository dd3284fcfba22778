// Where a compile looks for headers and a link for libraries, in search
// order: a new file in one of them can shadow a recorded input
// (record_shadows, record_library_shadows below).
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/compile/key.h"
#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::compile {

// The directories a compile searches for a header, in the order gcc tries
// them (its manual, "Options for Directory Search", and "Environment
// Variables"): the source's own directory (quote includes), -iquote, -I
// (nvcc: --include-path), CPATH, -isystem (nvcc: --system-include),
// C_INCLUDE_PATH or CPLUS_INCLUDE_PATH, -idirafter. The compiler's built-in
// directories are not listed: only a new file in one of these can shadow a
// recorded header (record_shadows). Relative directories are the
// compiler's, i.e. relative to the build dir it runs in (left relative when
// `build_dir` is empty). Each is the folder the compiler really searches:
// "-I/p/link/.." is beside link's target (util::opened_path), as the headers
// it reports are recorded.
std::vector<std::string> include_search_dirs(const CompileStep& step, const std::string& build_dir,
                                             const std::vector<ModuleKeyInputs::EnvVar>& env);

// The directories the linker searches for `-l` libraries before its built-in
// ones, in order: -L (as given, relative ones to the build dir it runs in),
// then LIBRARY_PATH (which the gcc driver passes on as -L after the
// command line's), resolved as include_search_dirs resolves its own.
std::vector<std::string> library_search_dirs(const LinkStep& link, const std::string& build_dir,
                                             const std::vector<ModuleKeyInputs::EnvVar>& env);

// Include-path shadowing: with `-Iinc1 -Iinc2` a header read as inc2/h.h
// would be inc1/h.h had that existed, and a checkout (or a later edit) that
// adds inc1/h.h must not hit. For each header under one of `search_dirs`
// (absolute, in the order the compiler searches them), every earlier
// directory joined with the header's name there is added to the record's
// `shadows` when no such file exists now (one that exists now cannot have
// been skipped by this compile, so it is not a shadow: it was not on this
// header's search, and a later lookup must not miss for it). A header under
// several of the directories gets the candidates of each reading.
void record_shadows(std::vector<cache::HeaderRecord>& headers, const std::vector<std::string>& search_dirs);

// The same for libraries the linker found through `-l`: for a recorded
// `D/libX.a` or `D/libX.so` with D one of `library_dirs` (absolute, in the
// linker's search order: -L in order, then LIBRARY_PATH), candidates are
// libX.so and libX.a in every earlier directory, and libX.so in D itself for
// a libX.a (ld takes the shared one first), each when absent now.
void record_library_shadows(std::vector<cache::HeaderRecord>& libraries, const std::vector<std::string>& library_dirs);

}  // namespace tvmffi_jit::compile
