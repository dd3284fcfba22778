// Locating an installed Apache TVM FFI: its C++ headers, the dlpack headers
// and the directory holding libtvm_ffi.so.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/toolchain/environment.h"

namespace tvmffi_jit::toolchain {

struct TvmFfiLocation {
  std::string include_dir;         // holds tvm/ffi/function.h
  std::string dlpack_include_dir;  // holds dlpack/dlpack.h (same as include_dir in a wheel)
  std::string lib_dir;             // holds libtvm_ffi.so
  std::string found_by;            // "--tvm-ffi-root", "TVM_FFI_ROOT", "tvm-ffi-config", "python3"
};

struct TvmFfiSearch {
  std::optional<std::string> root;  // --tvm-ffi-root DIR
  EnvLookup env = process_environment();
  // Programs to ask, in order, after the root directories; tests replace them.
  std::string config_program = "tvm-ffi-config";
  std::string python_program = "python3";
};

// Resolves a root directory (an installed prefix, a wheel's tvm_ffi/ package
// folder or a source checkout with build/lib) into a location; nullopt with
// `why` filled when the layout is not recognised.
std::optional<TvmFfiLocation> tvm_ffi_from_root(const std::string& root, std::string* why);

// Tries, in order: --tvm-ffi-root, $TVM_FFI_ROOT, `tvm-ffi-config` on PATH,
// `python3 -c 'import tvm_ffi.libinfo'`. An explicit root (flag or variable)
// that does not hold tvm-ffi is an error rather than a reason to keep looking,
// so a typo is not silently replaced by another installation. Throws
// Error(kMissingTool) saying what was tried and how to install it.
TvmFfiLocation find_tvm_ffi(const TvmFfiSearch& search);

}  // namespace tvmffi_jit::toolchain
