// One command of a plan, run and checked: what the executor (links, units)
// and launch.cpp (a unit through its launcher, and again without it) share,
// so that neither calls back into the other.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::compile {

// The one rule for "did the compiler write its outputs": nullopt when every
// output of `step` (its object, cubin, fatbin or PTX, and its depfile) exists
// in `build_dir` and is non-empty; else what is wrong ("cuda_0.o is missing",
// "cuda_0.o.d is empty"). After a launcher it decides the fallback
// (compile/launch.h); after the compiler itself, the step's failure.
std::optional<std::string> missing_compile_output(const CompileStep& step, const std::string& build_dir);

namespace detail {

// Runs argv in `dir` through options.command_runner(), stderr merged into
// stdout. A failed command (non-zero exit, signal, timeout) is returned with
// a message naming `what`, the command and its whole output. `env`: set in
// the child's environment only (a jobserver's MAKEFLAGS).
Expected<CommandRecord, CommandFailure> run_command(const std::vector<std::string>& argv, const std::string& dir,
                                                    const std::string& what, const ExecuteOptions& options,
                                                    const std::vector<std::pair<std::string, std::string>>& env = {});

}  // namespace detail

}  // namespace tvmffi_jit::compile
