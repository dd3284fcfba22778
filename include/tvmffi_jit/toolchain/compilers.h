// Finding the host compilers and the CUDA toolkit.
#pragma once

#include <optional>
#include <string>

#include "tvmffi_jit/toolchain/environment.h"

namespace tvmffi_jit::toolchain {

struct HostCompilers {
  std::string cxx;  // $CXX or "c++", resolved on PATH to an absolute path
  std::string cc;   // $CC or "cc", resolved likewise
};

struct CudaToolkit {
  std::string home;  // the toolkit root, e.g. /usr/local/cuda
  std::string nvcc;  // <home>/bin/nvcc
  std::string found_by;  // "CUDA_HOME", "CUDA_PATH", "PATH", "/usr/local/cuda"
};

// $CXX / $CC (first word only is the program: "ccache g++" style values are
// not supported, the variable must name one program). Throws Error(kMissingTool)
// when the program cannot be found; `need_c` false skips the C compiler lookup
// and leaves `cc` as given.
HostCompilers find_host_compilers(const EnvLookup& env, bool need_c);

// $CUDA_HOME, then $CUDA_PATH, then the parent of the directory of `nvcc` on
// PATH, then /usr/local/cuda (tvm_ffi's order). A home without bin/nvcc is
// skipped only when it came from the fallback; a home named by a variable
// must hold nvcc. nullopt with `why` filled when none is found.
std::optional<CudaToolkit> find_cuda_toolkit(const EnvLookup& env, std::string* why);

}  // namespace tvmffi_jit::toolchain
