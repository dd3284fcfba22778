// Locating an installed Apache TVM FFI: its C++ headers, the dlpack headers
// and the directory holding libtvm_ffi.so.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/toolchain/environment.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::toolchain {

struct TvmFfiLocation {
  std::string include_dir;         // holds tvm/ffi/function.h
  std::string dlpack_include_dir;  // holds dlpack/dlpack.h (same as include_dir in a wheel)
  std::string lib_dir;             // holds libtvm_ffi.so
  std::string found_by;            // "--tvm-ffi-root", "TVM_FFI_ROOT", "tvm-ffi-config", "python3"
};

struct TvmFfiSearch {
  std::optional<std::string> root;  // --tvm-ffi-root DIR
  // The caller's (the CLI's): TVM_FFI_ROOT, and PATH for the memo's state. The default
  // is an empty environment, never the process's: that is read in one place.
  EnvLookup env = fixed_environment({});
  // Programs to ask, in order, after the root directories; tests replace them.
  std::string config_program = "tvm-ffi-config";
  std::string python_program = "python3";
};

// Resolves a root directory (an installed prefix, a wheel's tvm_ffi/ package
// folder or a source checkout with build/lib) into a location, or says why
// the layout is not recognised.
Expected<TvmFfiLocation> tvm_ffi_from_root(const std::string& root);

// Tries, in order: --tvm-ffi-root, $TVM_FFI_ROOT, `tvm-ffi-config` on PATH,
// `python3 -c 'import tvm_ffi.libinfo'`. An explicit root (flag or variable)
// that does not hold tvm-ffi is the answer rather than a reason to keep
// looking, so a typo is not silently replaced by another installation. When
// nothing is found, the reason says what was tried and how to install it.
Expected<TvmFfiLocation> find_tvm_ffi(const TvmFfiSearch& search);

// The version tvm-ffi's C headers declare (TVM_FFI_VERSION_MAJOR/MINOR/PATCH
// in <include_dir>/tvm/ffi/c_api.h): "0.1.16", the ABI a module is compiled
// against. The one parser of these macros (the cache key and doctor use it).
Expected<std::string> tvm_ffi_header_version(const std::string& include_dir);

// The version of the Python package that installed these headers, read from
// the apache_tvm_ffi-<version>.dist-info folder beside the tvm_ffi package
// ("0.1.15.post2"); it can differ from the header version. No Python is run.
Expected<std::string> tvm_ffi_package_version(const TvmFfiLocation& location);

}  // namespace tvmffi_jit::toolchain
