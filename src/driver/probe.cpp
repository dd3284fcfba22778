// The child side of crash-isolated validation (`tvmffi-jit __driver-probe`).
// The protocol (its messages and how they travel) is probe_protocol.h; the
// parent is validate_run.cpp.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arch_select.h"
#include "cuda_api.h"
#include "probe_protocol.h"
#include "tvmffi_jit/driver/devices.h"
#include "tvmffi_jit/driver/validate.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::driver {

namespace {

using nlohmann::json;

void mark(int item, const std::string& step) {
  std::string line = std::string(kProbeMarker) + " item=" + std::to_string(item) + " step=" + step + "\n";
  // write(2) directly: stdio buffering would lose the marker when the next
  // call crashes the process. A failed write loses only this marker (the
  // parent then names the step before it), so it is not reported.
  (void)util::write_all(STDERR_FILENO, line);
}

void emit(const json& j) {
  std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

const char* loading_mode_name(CUmoduleLoadingMode m) {
  switch (m) {
    case CU_MODULE_EAGER_LOADING: return "eager";
    case CU_MODULE_LAZY_LOADING: return "lazy";
  }
  return "unknown";
}

struct Session {
  const DriverHandle& drv;
  const CudaApi& api;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  int cc_major = 0, cc_minor = 0;
  bool ready = false;  // a device and its primary context are current
  std::string why_not;
};

// Initialises the device; the returned DriverInfo is the driver line.
DriverInfo open_session(Session& s, int ordinal) {
  DriverInfo d;
  d.library = s.drv.library;
  d.available = s.drv.available;
  d.driver_version = s.drv.driver_version;
  d.device = ordinal;
  d.library_api = s.drv.api.has_library_api();
  d.kernel_enumeration = s.drv.api.cuLibraryGetKernelCount && s.drv.api.cuLibraryEnumerateKernels;
  auto unusable = [&](std::string why) {
    s.why_not = std::move(why);
    d.reason = s.why_not;
    return d;
  };
  if (!s.drv.available) return unusable(s.drv.reason);
  const CudaApi& a = s.api;
  if (s.drv.init_result != CUDA_SUCCESS) return unusable(s.drv.reason);
  int count = 0;
  CUresult rc = a.cuDeviceGetCount(&count);
  if (rc != CUDA_SUCCESS || count == 0)
    return unusable(rc != CUDA_SUCCESS ? "cuDeviceGetCount: " + error_name(a, rc) : "the driver reports no CUDA device");
  rc = a.cuDeviceGet(&s.dev, ordinal);
  if (rc != CUDA_SUCCESS)
    return unusable("device " + std::to_string(ordinal) + " not found (" + std::to_string(count) +
                    " device(s)): cuDeviceGet returned " + error_name(a, rc));
  char name[256] = {};
  if (a.cuDeviceGetName(name, sizeof name - 1, s.dev) == CUDA_SUCCESS) d.device_name = name;
  int major = 0, minor = 0;
  a.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s.dev);
  a.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s.dev);
  s.cc_major = d.cc_major = major;
  s.cc_minor = d.cc_minor = minor;
  CUmoduleLoadingMode mode{};
  d.load_mode = a.cuModuleGetLoadingMode && a.cuModuleGetLoadingMode(&mode) == CUDA_SUCCESS ? loading_mode_name(mode)
                                                                                             : "unknown";
  if (!a.has_library_api())
    return unusable("driver " + format_driver_version(s.drv.driver_version) +
                    " has no library API (cuLibraryLoadFromFile needs CUDA 12.0 or newer)");
  // The real load error of an unusable image only comes back from
  // cuLibraryGetKernel/cuLibraryGetModule with a context current.
  rc = a.cuDevicePrimaryCtxRetain(&s.ctx, s.dev);
  if (rc == CUDA_SUCCESS) rc = a.cuCtxSetCurrent(s.ctx);
  if (rc != CUDA_SUCCESS)
    return unusable("cannot make the primary context of device " + std::to_string(ordinal) +
                    " current: " + error_name(a, rc));
  s.ready = true;
  return d;
}

// Attribute numbers read for every kernel; the first seven are required.
struct AttrSpec {
  CUfunction_attribute attr;
  const char* name;  // in failed_step
  int KernelAttributes::*field;
  bool required;
};
const AttrSpec kAttributes[] = {
    {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max_threads_per_block", &KernelAttributes::max_threads_per_block, true},
    {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "shared_size_bytes", &KernelAttributes::shared_size_bytes, true},
    {CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, "const_size_bytes", &KernelAttributes::const_size_bytes, true},
    {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local_size_bytes", &KernelAttributes::local_size_bytes, true},
    {CU_FUNC_ATTRIBUTE_NUM_REGS, "num_regs", &KernelAttributes::num_regs, true},
    {CU_FUNC_ATTRIBUTE_PTX_VERSION, "ptx_version", &KernelAttributes::ptx_version, true},
    {CU_FUNC_ATTRIBUTE_BINARY_VERSION, "binary_version", &KernelAttributes::binary_version, true},
    {CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, "max_dynamic_shared_bytes",
     &KernelAttributes::max_dynamic_shared_bytes, false},
    {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, "cluster_width", &KernelAttributes::cluster_width, false},
    {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, "cluster_height", &KernelAttributes::cluster_height, false},
    {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, "cluster_depth", &KernelAttributes::cluster_depth, false},
};

constexpr unsigned kLogBytes = 64 * 1024;

std::string log_text(const std::vector<char>& buf, void* written) {
  // The driver writes the bytes used (including the NUL) back into the size
  // slot; trust it only when it is in range.
  size_t used = static_cast<size_t>(reinterpret_cast<uintptr_t>(written));
  size_t n = strnlen(buf.data(), used > 0 && used <= buf.size() ? used : buf.size());
  std::string s(buf.data(), n);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

// The first failed step of an image's probe is the one reported.
void note_failure(const CudaApi& a, ProbeResult& r, const std::string& step, CUresult rc) {
  if (r.failed_step.empty()) {
    r.failed_step = step;
    r.result = error_name(a, rc);
  }
}

// Loads the image with error and info logs (kept in r either way); nullopt
// when the driver refused it.
std::optional<CUlibrary> load_library(const CudaApi& a, int id, const std::string& path, ProbeResult& r) {
  std::vector<char> error_log(kLogBytes, 0), info_log(kLogBytes, 0);
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                         CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  // Integer options travel by value in the void* slot, and come back there.
  void* values[] = {error_log.data(), reinterpret_cast<void*>(uintptr_t{kLogBytes}), info_log.data(),
                    reinterpret_cast<void*>(uintptr_t{kLogBytes})};
  CUlibrary lib = nullptr;
  mark(id, "cuLibraryLoadFromFile");
  CUresult rc = a.cuLibraryLoadFromFile(&lib, path.c_str(), opts, values, 4, nullptr, nullptr, 0);
  r.error_log = log_text(error_log, values[1]);
  r.info_log = log_text(info_log, values[3]);
  if (rc != CUDA_SUCCESS) {
    note_failure(a, r, "cuLibraryLoadFromFile", rc);
    return std::nullopt;
  }
  return lib;
}

// The names of the kernels the driver lists (12.4 and later), in its order;
// sets r.kernel_count. A failure ends the list where it happened.
std::vector<std::string> enumerate_kernels(const CudaApi& a, int id, CUlibrary lib, ProbeResult& r) {
  std::vector<std::string> names;
  if (!a.cuLibraryGetKernelCount || !a.cuLibraryEnumerateKernels) return names;
  unsigned count = 0;
  mark(id, "cuLibraryGetKernelCount");
  CUresult rc = a.cuLibraryGetKernelCount(&count, lib);
  if (rc != CUDA_SUCCESS) {
    note_failure(a, r, "cuLibraryGetKernelCount", rc);
    return names;
  }
  r.kernel_count = count;
  std::vector<CUkernel> kernels(count);
  mark(id, "cuLibraryEnumerateKernels");
  rc = count ? a.cuLibraryEnumerateKernels(kernels.data(), count, lib) : CUDA_SUCCESS;
  if (rc != CUDA_SUCCESS) {
    note_failure(a, r, "cuLibraryEnumerateKernels", rc);
    return names;
  }
  for (unsigned i = 0; i < count; ++i) {
    const char* name = nullptr;
    if (!a.cuKernelGetName) break;
    mark(id, "cuKernelGetName");
    rc = a.cuKernelGetName(&name, kernels[i]);
    if (rc != CUDA_SUCCESS || !name) {
      note_failure(a, r, "cuKernelGetName", rc);
      break;
    }
    names.push_back(name);
  }
  return names;
}

// One kernel resolved by name and, when it resolves, its attributes read.
DriverKernel probe_kernel(Session& s, int id, CUlibrary lib, const std::string& name, bool enumerated,
                          ProbeResult& r) {
  const CudaApi& a = s.api;
  DriverKernel k;
  k.name = name;
  k.enumerated = enumerated;
  CUkernel kernel = nullptr;
  mark(id, "cuLibraryGetKernel(" + name + ")");
  CUresult rc = a.cuLibraryGetKernel(&kernel, lib, name.c_str());
  k.resolved = rc == CUDA_SUCCESS;
  if (rc != CUDA_SUCCESS) {
    k.resolve_error = error_name(a, rc);
    note_failure(a, r, "cuLibraryGetKernel(" + name + ")", rc);
    return k;
  }
  k.attributes_read = true;
  mark(id, "cuKernelGetAttribute(" + name + ")");
  for (const auto& spec : kAttributes) {
    int v = 0;
    rc = a.cuKernelGetAttribute(&v, spec.attr, kernel, s.dev);
    if (rc == CUDA_SUCCESS) {
      k.attributes.*spec.field = v;
    } else if (spec.required) {
      note_failure(a, r, std::string("cuKernelGetAttribute(") + name + ", " + spec.name + ")", rc);
    }
  }
  return k;
}

ProbeResult probe_image(Session& s, int id, const std::string& path, const std::vector<std::string>& offline_names) {
  const CudaApi& a = s.api;
  ProbeResult r;
  r.item = id;
  std::optional<CUlibrary> lib = load_library(a, id, path, r);
  if (!lib) return r;

  std::vector<std::string> names = enumerate_kernels(a, id, *lib, r);
  const std::set<std::string> enumerated(names.begin(), names.end());
  // Resolve the offline names too: a kernel the driver does not list, or a
  // driver that cannot list (12.0-12.3), still gets cuLibraryGetKernel.
  for (const auto& n : offline_names)
    if (!enumerated.count(n)) names.push_back(n);

  CUmodule mod = nullptr;
  mark(id, "cuLibraryGetModule");
  CUresult rc = a.cuLibraryGetModule(&mod, *lib);
  if (rc != CUDA_SUCCESS) note_failure(a, r, "cuLibraryGetModule", rc);

  for (const auto& name : names) r.kernels.push_back(probe_kernel(s, id, *lib, name, enumerated.count(name) > 0, r));
  mark(id, "cuLibraryUnload");
  rc = a.cuLibraryUnload(*lib);
  if (rc != CUDA_SUCCESS) note_failure(a, r, "cuLibraryUnload", rc);
  return r;
}

ProbeResult probe_module(int id, const std::string& path, const std::string& tvm_ffi_library,
                         const std::vector<std::string>& symbols) {
  ProbeResult r;
  r.item = id;
  if (!tvm_ffi_library.empty()) {
    mark(id, "dlopen(libtvm_ffi)");
    // RTLD_GLOBAL: the module has NEEDED libtvm_ffi.so and no RUNPATH; an
    // already loaded library with that soname satisfies it.
    if (!dlopen(tvm_ffi_library.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      const char* e = dlerror();
      r.error = "cannot load " + tvm_ffi_library + ": " + (e ? e : "unknown error");
      return r;
    }
  }
  mark(id, "dlopen");
  // RTLD_NOW makes every undefined symbol an error here rather than at the
  // first call.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    r.error = e ? e : "dlopen failed";
    return r;
  }
  r.loaded = true;
  mark(id, "dlsym");
  for (const auto& sym : symbols) r.symbols.emplace_back(sym, dlsym(h, sym.c_str()) != nullptr);
  // Deliberately not dlclose'd: module destructors may need libtvm_ffi's
  // global state, and the process ends right after.
  return r;
}

}  // namespace

int run_driver_probe(const std::string& libcuda) {
  ProbeRequest request;
  try {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    request = request_from_json(json::parse(text));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "__driver-probe: bad request: %s\n", e.what());
    return 2;
  }
  const DriverHandle& drv = open_driver(libcuda);
  Session s{drv, drv.api, 0, nullptr, 0, 0, false, ""};
  bool has_images = false;
  for (const ProbeItem& item : request.items) has_images = has_images || item.kind == ProbeItem::Kind::kImage;
  // Only initialise a device when there is something to load on it; a
  // module-only request must not need a GPU.
  DriverInfo d;
  if (has_images) {
    d = open_session(s, request.device);
  } else {
    d.available = drv.available;
    d.library = drv.library;
  }
  emit(json{{"driver", probe_driver_json(d)}});

  for (const ProbeItem& item : request.items) {
    if (item.kind == ProbeItem::Kind::kModule) {
      emit(to_json(probe_module(item.id, item.path, item.tvm_ffi_library, item.symbols)));
      continue;
    }
    if (!s.ready) {
      ProbeResult skipped;
      skipped.item = item.id;
      skipped.skipped = s.why_not;
      emit(to_json(skipped));
      continue;
    }
    // The names the driver should find: those of the image it will pick
    // for this device (a fatbin holds several).
    std::vector<std::string> archs;
    for (const ProbeCandidate& c : item.candidates) archs.push_back(c.arch);
    auto chosen = select_image(archs, s.cc_major, s.cc_minor);
    emit(to_json(probe_image(s, item.id, item.path, chosen ? item.candidates[*chosen].names : std::vector<std::string>{})));
  }
  if (s.ctx) s.api.cuDevicePrimaryCtxRelease(s.dev);
  return 0;
}

}  // namespace tvmffi_jit::driver
