// What the CUDA driver says about this machine, queried in-process (cuInit,
// device count, names, compute capabilities: calls that do not load code).
// Used for arch auto-detection (`build` without --arch) and `doctor`.
#pragma once

#include <string>
#include <vector>

namespace tvmffi_jit::driver {

// The driver library dlopen'ed unless the caller names another one (the CLI
// passes $TVMFFI_JIT_LIBCUDA: tests point it at a fake driver, users at a
// driver outside the loader path).
inline constexpr const char* kDefaultLibcuda = "libcuda.so.1";

struct GpuInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
};

struct DriverStatus {
  bool available = false;    // a real driver answered (the toolkit stub counts as absent)
  std::string library;       // the libcuda that was loaded (dlopen name or TVMFFI_JIT_LIBCUDA)
  std::string reason;        // why not available ("libcuda.so.1 not found", "CUDA_ERROR_STUB_LIBRARY", ...)
  int driver_version = 0;    // cuDriverGetVersion, e.g. 13000
  std::vector<GpuInfo> gpus;
};

// cuDriverGetVersion's number as people write it: 13000 -> "13.0", 12040 ->
// "12.4". The one formatter for it (doctor, validation text and JSON, probe).
std::string format_driver_version(int version);

// Never throws; never prints. `libcuda`: the library to dlopen (the CLI
// passes $TVMFFI_JIT_LIBCUDA, else libcuda.so.1); the first call's library
// serves the whole process.
DriverStatus query_driver(const std::string& libcuda);

}  // namespace tvmffi_jit::driver
