// The executor's call into the NVRTC backend (nvrtc_step.cpp, over
// compile/nvrtc.h): the plan's NVRTC step run as a command of the plan is.
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

}  // namespace tvmffi_jit::compile::detail
