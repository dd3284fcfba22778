// What goes into a module's and a unit's cache key (compile/key.h), read from
// the plan, the manifest and the toolchain, and the summary of it a module
// entry records.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compile/compiler_identities.h"
#include "tvmffi_jit/compile/key.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/toolchain/toolchain.h"

namespace tvmffi_jit::compile {

// A module's key inputs, and whether they key its build exactly.
struct KeyedPlan {
  ModuleKeyInputs inputs;
  // Why the plan cannot be keyed exactly (its build must not be stored), when
  // it cannot: part of the answer, not a failure (the inputs still key it).
  std::optional<std::string> unkeyable;
};

// Everything the plan says, with compiler and tvm-ffi identities and the
// keyed environment (reads every source file; identifies every compiler
// through `ids`), and what the flags make the compilers read
// (compile/flag_inputs.h).
KeyedPlan key_inputs_with(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                          CompilerIdentities& ids, const std::vector<ModuleKeyInputs::EnvVar>& environment);

// One unit's key inputs (the per-TU object cache).
ObjectKeyInputs object_key_inputs(const CompileStep& step, const Manifest& m, const toolchain::Toolchain& tc,
                                         CompilerIdentities& ids,
                                         const std::vector<ModuleKeyInputs::EnvVar>& environment);

// The first of the project's own paths in the key (a file source's folder,
// an extra include path) outside `in.base_dir`: the portable key keeps it
// absolute, so a checkout at another path cannot share the entry. nullopt
// when there is none (or no base dir).
std::optional<std::string> project_path_outside_base(const ModuleKeyInputs& in, const Manifest& manifest);

// The readable summary of `in` a module entry keeps (entry.json "inputs").
nlohmann::json inputs_summary(const ModuleKeyInputs& in);

}  // namespace tvmffi_jit::compile
