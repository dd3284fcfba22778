// Compiler output kept in cache entries and replayed on a hit (as ccache
// replays a compile's stderr).
#pragma once

#include <string>

#include "tvmffi_jit/compile/executor.h"

namespace tvmffi_jit::compile {

// `text` whole up to 64 KiB (any run of warnings worth reading); a flood is
// cut at a line end and says how much was dropped.
std::string capped_output(const std::string& text);

// What the module's build showed, in order: replayed units, then the
// commands that ran. Replayed verbatim on a module hit.
std::string compiler_output(const BuildResult& build);

// Shows what a cache entry's compilers printed when it was built, as a
// build would have.
void replay_output(const std::string& stored, const ExecuteOptions& exec);

}  // namespace tvmffi_jit::compile
