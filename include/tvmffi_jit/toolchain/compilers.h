// Finding the host compilers and the CUDA toolkit.
#pragma once

#include <string>

#include "tvmffi_jit/toolchain/environment.h"
#include "tvmffi_jit/util/expected.h"

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

// One compiler: $<var> when set and non-empty, else `fallback` ("c++",
// "cc"); a value with a '/' must name an existing file, a bare name is looked
// up on PATH (the variable must name one program: "ccache g++" style values
// are not supported). The absolute path, or why there is none.
Expected<std::string> find_compiler(const EnvLookup& env, const std::string& var, const std::string& fallback);

// $CXX (find_compiler(env, "CXX", "c++")) and, when `need_c`, $CC likewise;
// without `need_c`, `cc` is $CC or "cc" as given. The first one missing is the
// reason when there is no value.
Expected<HostCompilers> find_host_compilers(const EnvLookup& env, bool need_c);

// $CUDA_HOME, then $CUDA_PATH, then the parent of the directory of `nvcc` on
// PATH, then /usr/local/cuda (tvm_ffi's order). A home without bin/nvcc is
// skipped only when it came from the fallback; a home named by a variable
// must hold nvcc.
Expected<CudaToolkit> find_cuda_toolkit(const EnvLookup& env);

}  // namespace tvmffi_jit::toolchain
