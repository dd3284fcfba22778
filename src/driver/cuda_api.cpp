#include "cuda_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

namespace tvmffi_jit::driver {

namespace {

// The two shapes of the entry-point query. _v2 (CUDA 12.0+) reports why a
// symbol is missing; the original (11.3) does not.
using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

class Resolver {
 public:
  explicit Resolver(void* lib) {
    v2_ = reinterpret_cast<GetProcAddressV2>(dlsym(lib, "cuGetProcAddress_v2"));
    if (!v2_) v1_ = reinterpret_cast<GetProcAddressV1>(dlsym(lib, "cuGetProcAddress"));
  }
  bool usable() const { return v2_ || v1_; }

  // `version` is the function's introduction version (cudaTypedefs.h PFN_
  // suffix): asking for CUDA_VERSION would fail on any older driver.
  // Returns the last CUresult so a stub library can be recognised.
  template <typename Fn>
  CUresult get(Fn& out, const char* name, int version) {
    void* p = nullptr;
    CUresult rc;
    if (v2_) {
      CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
      rc = v2_(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
      if (status != CU_GET_PROC_ADDRESS_SUCCESS) p = nullptr;
    } else {
      rc = v1_(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT);
    }
    if (rc != CUDA_SUCCESS) p = nullptr;
    out = reinterpret_cast<Fn>(p);
    return rc;
  }

 private:
  GetProcAddressV2 v2_ = nullptr;
  GetProcAddressV1 v1_ = nullptr;
};

}  // namespace

DriverHandle load_driver(const std::string& library) {
  DriverHandle h;
  h.library = library;
  // RTLD_LOCAL: the driver's symbols must not satisfy anything else we load
  // later (a TVM FFI module linked against the toolkit's libcuda stub, say).
  void* lib = dlopen(h.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    h.reason = h.library + " could not be loaded" + (err ? std::string(" (") + err + ")" : "");
    return h;
  }
  // The handle is never closed: the driver starts threads that outlive any
  // caller, and unloading it under them crashes at exit.
  Resolver r(lib);
  if (!r.usable()) {
    h.reason = h.library + " has no cuGetProcAddress (driver older than CUDA 11.3)";
    return h;
  }
  CudaApi& a = h.api;
  CUresult first = r.get(a.cuInit, "cuInit", 2000);
  if (first == CUDA_ERROR_STUB_LIBRARY) {
    h.reason = h.library + " is the CUDA toolkit's stub library (CUDA_ERROR_STUB_LIBRARY), not a driver";
    return h;
  }
  r.get(a.cuGetErrorName, "cuGetErrorName", 6000);
  r.get(a.cuGetErrorString, "cuGetErrorString", 6000);
  r.get(a.cuDriverGetVersion, "cuDriverGetVersion", 2020);
  r.get(a.cuDeviceGetCount, "cuDeviceGetCount", 2000);
  r.get(a.cuDeviceGet, "cuDeviceGet", 2000);
  r.get(a.cuDeviceGetName, "cuDeviceGetName", 2000);
  r.get(a.cuDeviceGetAttribute, "cuDeviceGetAttribute", 2000);
  r.get(a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 7000);
  r.get(a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 11000);
  r.get(a.cuCtxSetCurrent, "cuCtxSetCurrent", 4000);
  r.get(a.cuLibraryLoadFromFile, "cuLibraryLoadFromFile", 12000);
  r.get(a.cuLibraryUnload, "cuLibraryUnload", 12000);
  r.get(a.cuLibraryGetKernel, "cuLibraryGetKernel", 12000);
  r.get(a.cuLibraryGetModule, "cuLibraryGetModule", 12000);
  r.get(a.cuKernelGetAttribute, "cuKernelGetAttribute", 12000);
  r.get(a.cuModuleGetLoadingMode, "cuModuleGetLoadingMode", 11070);
  r.get(a.cuKernelGetName, "cuKernelGetName", 12030);
  r.get(a.cuLibraryGetKernelCount, "cuLibraryGetKernelCount", 12040);
  r.get(a.cuLibraryEnumerateKernels, "cuLibraryEnumerateKernels", 12040);

  const char* missing = nullptr;
  if (!a.cuInit) missing = "cuInit";
  else if (!a.cuGetErrorName) missing = "cuGetErrorName";
  else if (!a.cuGetErrorString) missing = "cuGetErrorString";
  else if (!a.cuDriverGetVersion) missing = "cuDriverGetVersion";
  else if (!a.cuDeviceGetCount) missing = "cuDeviceGetCount";
  else if (!a.cuDeviceGet) missing = "cuDeviceGet";
  else if (!a.cuDeviceGetName) missing = "cuDeviceGetName";
  else if (!a.cuDeviceGetAttribute) missing = "cuDeviceGetAttribute";
  if (missing) {
    h.reason = h.library + " does not provide " + missing;
    return h;
  }
  h.init_result = a.cuInit(0);
  if (h.init_result == CUDA_ERROR_STUB_LIBRARY) {
    h.reason = h.library + " is the CUDA toolkit's stub library (CUDA_ERROR_STUB_LIBRARY), not a driver";
    return h;
  }
  h.available = true;
  if (a.cuDriverGetVersion(&h.driver_version) != CUDA_SUCCESS) h.driver_version = 0;
  if (h.init_result != CUDA_SUCCESS) h.reason = "cuInit failed: " + error_name(a, h.init_result);
  return h;
}

const DriverHandle& open_driver(const std::string& library) {
  static const DriverHandle handle = load_driver(library);
  return handle;
}

std::string error_name(const CudaApi& api, CUresult rc) {
  const char* name = nullptr;
  if (api.cuGetErrorName && api.cuGetErrorName(rc, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(static_cast<int>(rc));
}

}  // namespace tvmffi_jit::driver
