// Where libnvrtc may live. The search is separate from loading it (build/nvrtc.cpp)
// so the order can be tested and printed without touching the dynamic loader.
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/toolchain/environment.h"

namespace tvmffi_jit::toolchain {

// One place to try, in order.
struct NvrtcCandidate {
  // An absolute path of an existing file, or a bare soname ("libnvrtc.so.13")
  // left to the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
  std::string library;
  std::string origin;  // why this place: "TVMFFI_JIT_LIBNVRTC", "CUDA_HOME", "nvcc on PATH", ...
};

struct NvrtcSearch {
  std::vector<NvrtcCandidate> candidates;
  // Every directory or name looked at, for the "not found" message.
  std::vector<std::string> looked_in;
  // True when TVMFFI_JIT_LIBNVRTC named the library: nothing else is tried.
  bool forced = false;
};

// Search order:
//   1. $TVMFFI_JIT_LIBNVRTC, a path to libnvrtc itself (exclusive: a wrong path is an error,
//      not a reason to pick some other NVRTC);
//   2. the toolkits $CUDA_HOME, $CUDA_PATH, the one holding `nvcc` on PATH, /usr/local/cuda:
//      in lib64/ then lib/, libnvrtc.so.<major> (highest major first) then libnvrtc.so;
//   3. the loader's own search for libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so.
// The variables come from `env`, the caller's (the CLI's) lookup.
NvrtcSearch nvrtc_search(const EnvLookup& env);

// The CUDA header directories that belong to a libnvrtc at `library_path`
// (<toolkit>/include and, where the CCCL headers live apart as in CUDA 13,
// <toolkit>/include/cccl). The toolkit is the library directory's parent; the
// real path is tried too, so /usr/local/cuda/lib64 and
// /usr/local/cuda-13.0/targets/x86_64-linux/lib both work. Empty if none exists.
std::vector<std::string> cuda_include_dirs_for_library(const std::string& library_path);

}  // namespace tvmffi_jit::toolchain
