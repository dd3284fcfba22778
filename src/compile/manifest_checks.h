// The checks of a whole module description, after every key and flag is
// read (compile/manifest.cpp reads them): the combinations of keys that
// contradict each other, and command lines longer than the system can start.
#pragma once

#include "tvmffi_jit/compile/manifest.h"

namespace tvmffi_jit::compile {

// Where a problem of the command line is reported (ManifestError::where).
inline constexpr const char* kCommandLine = "command line";

// check_manifest(), with the command line that added to `m` when there was
// one. A problem is reported where the value came from: the manifest key
// ("/compiler") when the manifest set it, the flag ("--compiler") when the
// command line did or there is no manifest. Throws ManifestError (exit 2).
void check_combination(const Manifest& m, const CommandLineInputs* cli);

}  // namespace tvmffi_jit::compile
