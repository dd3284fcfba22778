// In-process CUDA compilation through NVRTC (libnvrtc reached with dlopen; no
// link-time dependency). Used by `build --compiler nvrtc` for --emit cubin|ptx.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tvmffi_jit/toolchain/cuda_arch.h"
#include "tvmffi_jit/toolchain/environment.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::compile {

enum class NvrtcOutput { kCubin, kPtx };

struct NvrtcRequest {
  std::string source;                         // CUDA source text
  std::string source_name;                    // shown in diagnostics, e.g. "kernels.cu"
  toolchain::CudaArch arch;                   // the target (parsed once, toolchain/cuda_arch.h); +PTX is ignored
  NvrtcOutput output = NvrtcOutput::kCubin;
  std::vector<std::string> include_paths;     // -I
  std::vector<std::string> options;           // extra NVRTC options (-D..., -std=..., --use_fast_math)
  std::vector<std::string> name_expressions;  // --kernel-name: registered, lowered names reported
};

// The --gpu-architecture NVRTC is given for `request`: a real architecture
// ("sm_90a") for a cubin, a virtual one ("compute_90a") for PTX. NVRTC given
// compute_XX makes no cubin, and given sm_XX also keeps PTX, so the prefix is
// what selects the output.
std::string nvrtc_architecture(const NvrtcRequest& request);

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

// "<resolved libnvrtc path> <major>.<minor>" — part of the cache key — or
// why NVRTC cannot be loaded (doctor shows it); nvrtc_identity() throws that
// as Error(kMissingTool).
Expected<std::string> find_nvrtc_identity();
std::string nvrtc_identity();

// What to do about the host C++ headers an NVRTC log says it could not open
// (`cannot open source file "cstdint"`): NVRTC has none. For a header CCCL
// provides, the <cuda/std/...> one (shipped with the toolkit, found by
// tvmffi-jit's NVRTC include path); for the rest (<vector>, <cstdio>), that
// device code cannot use it and nvcc is the compiler for host code. "" when
// the log names no such header. docs/nvrtc.md.
std::string nvrtc_missing_header_hint(const std::string& log);

}  // namespace tvmffi_jit::compile
