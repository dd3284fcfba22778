// In-process CUDA compilation through NVRTC (libnvrtc reached with dlopen; no
// link-time dependency). Used by `build --compiler nvrtc` for --emit cubin|ptx.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tvmffi_jit/toolchain/environment.h"

namespace tvmffi_jit::compile {

enum class NvrtcOutput { kCubin, kPtx };

struct NvrtcRequest {
  std::string source;                         // CUDA source text
  std::string source_name;                    // shown in diagnostics, e.g. "kernels.cu"
  std::string arch;                           // "sm_90", "sm_90a", "sm_100f"; for PTX "compute_90"
  NvrtcOutput output = NvrtcOutput::kCubin;
  std::vector<std::string> include_paths;     // -I
  std::vector<std::string> options;           // extra NVRTC options (-D..., -std=..., --use_fast_math)
  std::vector<std::string> name_expressions;  // --kernel-name: registered, lowered names reported
};

struct NvrtcResult {
  bool ok = false;
  std::string log;      // the program log (errors and warnings), verbatim
  std::string binary;   // cubin bytes or PTX text
  std::vector<std::pair<std::string, std::string>> lowered_names;  // expression -> mangled name
  std::vector<std::string> effective_options;                      // what was passed to NVRTC
};

// The environment libnvrtc is searched with (toolchain::nvrtc_search:
// TVMFFI_JIT_LIBNVRTC, CUDA_HOME, CUDA_PATH): the CLI's lookup, set once
// before any command runs (cli/environment.h). Unset: an empty environment
// (the toolkit of nvcc on the search path, /usr/local/cuda, the loader).
void set_nvrtc_environment(toolchain::EnvLookup env);

// Compiles one source. Throws Error(kMissingTool) when libnvrtc cannot be
// found or loaded (message says where it looked and how to fix it). A failed
// compilation is not an exception: ok == false and `log` holds NVRTC's log.
NvrtcResult nvrtc_compile(const NvrtcRequest& request);

// "<resolved libnvrtc path> <major>.<minor>" — part of the cache key.
std::string nvrtc_identity();

// What to do about the host C++ headers an NVRTC log says it could not open
// (`cannot open source file "cstdint"`): NVRTC has none. For a header CCCL
// provides, the <cuda/std/...> one (shipped with the toolkit, found by
// tvmffi-jit's NVRTC include path); for the rest (<vector>, <cstdio>), that
// device code cannot use it and nvcc is the compiler for host code. "" when
// the log names no such header. docs/nvrtc.md.
std::string nvrtc_missing_header_hint(const std::string& log);

}  // namespace tvmffi_jit::compile
