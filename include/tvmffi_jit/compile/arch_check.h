// An arch nvcc cannot compile for is a usage error before anything runs
// (exit 2 with the list nvcc supports), not exit 1 from nvcc halfway through
// a build with its directory left behind.
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/toolchain/toolchain.h"

namespace tvmffi_jit::compile {

// The archs `nvcc --list-gpu-arch` prints ("compute_90" -> 90), memoised
// under <cache root>/toolchain/ with nvcc's identity when `cache_dir` (the
// resolved cache root) is given (empty: not memoised). Empty when nvcc cannot list them (older
// toolkits): then nothing is checked.
std::vector<int> nvcc_supported_archs(const std::string& nvcc, const std::string& cache_dir, bool use_cache);

// Throws Error(kUsage) when a plan that runs nvcc asks for an arch its nvcc
// does not list, naming the arch, where it came from (--arch, manifest, ...)
// and the supported ones. NVRTC and CUDA-free plans pass.
void check_supported_archs(const BuildPlan& plan, const toolchain::Toolchain& tc, const std::string& cache_dir,
                           bool use_cache);

}  // namespace tvmffi_jit::compile
