// Everything a build needs from the machine, found once per invocation.
#pragma once

#include <optional>
#include <string>

#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"

namespace tvmffi_jit::toolchain {

struct Toolchain {
  HostCompilers host;
  // Present when found; make_plan() throws Error(kMissingTool) (with the
  // recorded reason) when a build needs one that is absent, so only builds
  // that need CUDA or tvm-ffi fail for their absence.
  std::optional<CudaToolkit> cuda;
  std::string cuda_missing_reason;
  std::optional<TvmFfiLocation> tvm_ffi;
  std::string tvm_ffi_missing_reason;
  std::string ld = "ld";  // for `emit object` with several inputs (ld -r)
};

}  // namespace tvmffi_jit::toolchain
