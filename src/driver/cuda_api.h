// The CUDA driver API, reached at run time: dlopen("libcuda.so.1") (or the
// library the CLI names, from $TVMFFI_JIT_LIBCUDA) and cuGetProcAddress with
// each function's introduction version, so the tool has no link-time
// dependency on libcuda and runs where no driver exists. <cuda.h> is used for
// types only.
//
// Private to the driver layer: nothing outside src/driver/ may see CUDA types.
#pragma once

#include <cuda.h>

#include <string>

namespace tvmffi_jit::driver {

// Function pointers into one loaded driver. A pointer is null when the driver
// is too old to have that entry point (its introduction version is above the
// driver's); callers degrade instead of failing. The "required" group is
// guaranteed non-null once open() succeeded.
struct CudaApi {
  // required (CUDA 2.0 .. 12.0)
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuInit)(unsigned int) = nullptr;
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, CUdevice_attribute, CUdevice) = nullptr;

  // the library API and a context for it (CUDA 12.0); null on older drivers
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;  // the _v2 entry
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuLibraryLoadFromFile)(CUlibrary*, const char*, CUjit_option*, void**, unsigned int,
                                    CUlibraryOption*, void**, unsigned int) = nullptr;
  CUresult (*cuLibraryUnload)(CUlibrary) = nullptr;
  CUresult (*cuLibraryGetKernel)(CUkernel*, CUlibrary, const char*) = nullptr;
  CUresult (*cuLibraryGetModule)(CUmodule*, CUlibrary) = nullptr;
  CUresult (*cuKernelGetAttribute)(int*, CUfunction_attribute, CUkernel, CUdevice) = nullptr;

  // optional: newer drivers only
  CUresult (*cuModuleGetLoadingMode)(CUmoduleLoadingMode*) = nullptr;      // 11.7
  CUresult (*cuKernelGetName)(const char**, CUkernel) = nullptr;           // 12.3
  CUresult (*cuLibraryGetKernelCount)(unsigned int*, CUlibrary) = nullptr;  // 12.4
  CUresult (*cuLibraryEnumerateKernels)(CUkernel*, unsigned int, CUlibrary) = nullptr;  // 12.4

  bool has_library_api() const {
    return cuDevicePrimaryCtxRetain && cuDevicePrimaryCtxRelease && cuCtxSetCurrent &&
           cuLibraryLoadFromFile && cuLibraryUnload && cuLibraryGetKernel && cuLibraryGetModule &&
           cuKernelGetAttribute;
  }
};

// Outcome of opening the driver. `available` is false for: no library, no
// cuGetProcAddress, a required entry point missing, or the toolkit's stub
// library (every call answers CUDA_ERROR_STUB_LIBRARY); `reason` says which.
struct DriverHandle {
  bool available = false;
  std::string library;  // what was passed to dlopen
  std::string reason;
  CUresult init_result = CUDA_ERROR_NOT_INITIALIZED;  // cuInit(0); NO_DEVICE etc. leave `available` true
  int driver_version = 0;                             // cuDriverGetVersion, e.g. 13000
  CudaApi api;
};

// Opens `library` once per process (later calls return the same object,
// whatever they pass: a process talks to one driver) and calls cuInit(0).
// Never throws.
const DriverHandle& open_driver(const std::string& library);

// The same for a given library, uncached (tests; open_driver uses it once).
DriverHandle load_driver(const std::string& library);

// "CUDA_ERROR_INVALID_IMAGE" (or "CUresult 1234" when the driver has no name for it).
std::string error_name(const CudaApi& api, CUresult rc);

}  // namespace tvmffi_jit::driver
