// Running one compile step's command: through the job gate (one slot and its
// memory reservation, more slots as nvcc --threads when cores are idle), and
// through its compiler launcher (sccache, ccache) when it has one.
//
// A launcher that exits 0 must have produced what the compiler would have:
// released sccache versions exit 0 without writing an output for some nvcc
// versions. So after a launcher succeeds every expected output (the object,
// cubin, fatbin or PTX, and the depfile) must exist and be non-empty; if one
// is not, the step runs once more without the launcher and the record says so
// (CommandRecord::launcher_fallback), which the cache counts and --json shows.
#pragma once

#include <optional>
#include <string>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::compile {

// Runs `step`'s command in `build_dir` (its generated source already written)
// through options.command_runner(): with the launcher, checked, and without
// it once more if its outputs are missing. A compiler that fails (or exits 0
// without its outputs after a fallback) is returned as a CommandFailure.
Expected<CommandRecord, CommandFailure> run_step_command(const CompileStep& step, const std::string& build_dir,
                                                         const ExecuteOptions& options);

}  // namespace tvmffi_jit::compile
