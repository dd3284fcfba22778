// The executor's calls into the NVRTC backend (its implementation lives in
// nvrtc.cpp) and the one function that runs a command of the plan; kept in
// one place so the executor stays about scheduling.
#pragma once

#include <string>

#include "tvmffi_jit/compile/executor.h"

namespace tvmffi_jit::compile::detail {

// Compiles plan.nvrtc into <dir>/<output_name>; records lowered names in
// `result`. NVRTC runs in this process (a library, not an argv: outside the
// CommandRunner seam), but a compile it rejects is returned as a command's
// failure is (kFailed, NVRTC's log as the output); what cannot go on (no
// libnvrtc, I/O) throws.
Expected<CommandRecord, CommandFailure> run_nvrtc_step(const NvrtcStep& step, const std::string& dir,
                                                       BuildResult* result);

// Runs argv in `dir` through options.command_runner(), stderr merged into
// stdout. A failed command (non-zero exit, signal, timeout) is returned with
// a message naming `what`, the command and its whole output.
Expected<CommandRecord, CommandFailure> run_command(const std::vector<std::string>& argv, const std::string& dir,
                                                    const std::string& what, const ExecuteOptions& options);

}  // namespace tvmffi_jit::compile::detail
