// The executor's calls into the NVRTC and cubin-embedding backends (their
// implementations live in nvrtc.cpp and embed.cpp, owned by their own
// workstream); kept in one place so the executor stays about scheduling.
#pragma once

#include <string>

#include "tvmffi_jit/compile/executor.h"

namespace tvmffi_jit::compile::detail {

// Compiles plan.nvrtc into <dir>/<output_name>; records lowered names in
// `result`. Throws Error(kBuildFailed) with NVRTC's log on failure.
CommandRecord run_nvrtc_step(const NvrtcStep& step, const std::string& dir, BuildResult* result);

// Writes the embed translation unit for plan.embeds and compiles it to
// <dir>/<plan.embed_object_name> with the C++ compiler.
CommandRecord compile_embed_unit(const BuildPlan& plan, const std::string& dir);

// Runs argv in `dir`, merging stderr into stdout; throws Error(kBuildFailed)
// naming `what`, the command and its whole output when it fails.
CommandRecord run_checked(const std::vector<std::string>& argv, const std::string& dir, const std::string& what);

}  // namespace tvmffi_jit::compile::detail
