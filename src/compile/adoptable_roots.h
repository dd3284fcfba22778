// Where the header and library records of an adopted (remote or imported)
// entry may point (docs/remote.md, "Trust"): the build's base directory and
// the directories its own toolchain and plan search. A record elsewhere
// ("/home/me/.ssh/id_ed25519") is refused before it is looked at, so a server
// writer cannot learn whether a path exists on a reader's machine from the
// reader's answer.
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/compile/key.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/toolchain/toolchain.h"

namespace tvmffi_jit::compile {

// Absolute directories, lexically normal: the base dir; the system's header
// and library directories (/usr/include, /usr/lib*, /lib*, /usr/local/...);
// each compiler's installation (include, lib, lib64, libexec beside its bin,
// the CUDA and ROCm homes); tvm-ffi's include and library directories; every
// absolute include and library directory the plan's steps search.
// The toolchain's own part of those: the system's directories, each
// compiler's installation, the CUDA and ROCm homes, tvm-ffi's directories.
std::vector<std::string> toolchain_roots(const BuildPlan& plan, const toolchain::Toolchain& tc);

std::vector<std::string> adoptable_roots(const BuildPlan& plan, const toolchain::Toolchain& tc,
                                         const std::string& base_dir,
                                         const std::vector<ModuleKeyInputs::EnvVar>& env);

}  // namespace tvmffi_jit::compile
