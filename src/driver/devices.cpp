#include "tvmffi_jit/driver/devices.h"

#include "cuda_api.h"
#include "devices_internal.h"

namespace tvmffi_jit::driver {

namespace {

DriverStatus status_of(const DriverHandle& h) {
  DriverStatus status;
  status.library = h.library;
  status.reason = h.reason;
  if (!h.available) return status;
  status.driver_version = h.driver_version;
  if (h.init_result != CUDA_SUCCESS) {
    // A real driver that found no usable GPU (CUDA_ERROR_NO_DEVICE, ...):
    // available, with an empty device list and the reason.
    status.available = true;
    return status;
  }
  const CudaApi& api = h.api;
  int count = 0;
  CUresult rc = api.cuDeviceGetCount(&count);
  if (rc != CUDA_SUCCESS) {
    status.available = true;
    status.reason = "cuDeviceGetCount failed: " + error_name(api, rc);
    return status;
  }
  status.available = true;
  for (int i = 0; i < count; ++i) {
    CUdevice dev = 0;
    if (api.cuDeviceGet(&dev, i) != CUDA_SUCCESS) continue;
    GpuInfo gpu;
    gpu.ordinal = i;
    char name[256] = {};
    if (api.cuDeviceGetName(name, sizeof name - 1, dev) == CUDA_SUCCESS) gpu.name = name;
    api.cuDeviceGetAttribute(&gpu.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    api.cuDeviceGetAttribute(&gpu.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    status.gpus.push_back(std::move(gpu));
  }
  if (status.gpus.empty() && status.reason.empty()) status.reason = "the driver reports no CUDA device";
  return status;
}

}  // namespace

std::string format_driver_version(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

DriverStatus query_driver(const std::string& libcuda) { return status_of(open_driver(libcuda)); }

DriverStatus query_driver_at(const std::string& library) { return status_of(load_driver(library)); }

}  // namespace tvmffi_jit::driver
