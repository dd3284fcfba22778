// Everything a build needs from the machine, found once per invocation.
#pragma once

#include <string>

#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"

namespace tvmffi_jit::toolchain {

struct Toolchain {
  HostCompilers host;
  // Found, or why not; make_plan() throws Error(kMissingTool) with the reason
  // when a build needs one that is absent, so only builds that need CUDA or
  // tvm-ffi fail for their absence.
  Expected<CudaToolkit> cuda = Unexpected{"the CUDA toolkit was not looked for"};
  Expected<TvmFfiLocation> tvm_ffi = Unexpected{"tvm-ffi was not looked for"};
  Expected<RocmToolkit> rocm = Unexpected{"ROCm was not looked for"};  // backend hip
  std::string ld = "ld";  // for `emit object` with several inputs (ld -r)
};

}  // namespace tvmffi_jit::toolchain
