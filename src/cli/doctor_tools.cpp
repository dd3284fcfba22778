// doctor's tools: the C++ and C compilers, nvcc, NVRTC, tvm-ffi, the CUDA
// driver and the GPUs it sees (cli/doctor_probes.h).
#include <string>
#include <vector>

#include "doctor_probes.h"
#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/driver/devices.h"
#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/toolchain.h"
#include "tvmffi_jit/toolchain/version.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {
using nlohmann::json;
}  // namespace

namespace {

// "Cuda compilation tools, release 13.0, V13.0.48" -> "13.0.48".
std::string nvcc_version_number(const std::string& line) {
  size_t v = line.rfind(", V");
  if (v != std::string::npos) return line.substr(v + 3);
  size_t r = line.find("release ");
  if (r != std::string::npos) return util::split_any(line.substr(r + 8), ", ").at(0);
  return line;
}

}  // namespace

json doctor_component(const std::string& name) {
  json c = json::object();
  c["name"] = name;
  c["found"] = false;
  c["path"] = nullptr;
  c["version"] = nullptr;
  c["problem"] = nullptr;
  c["fix"] = nullptr;
  return c;
}

void mark_missing(json& c, const std::string& problem, const std::string& fix) {
  c["found"] = false;
  c["problem"] = problem;
  c["fix"] = fix;
}

std::optional<std::string> doctor_version_line(const std::string& program, const std::string& must_contain) {
  toolchain::QueryOptions query;
  query.timeout_seconds = kDoctorProbeTimeoutSeconds;
  auto text = toolchain::version_of(program, query);
  if (!text) return std::nullopt;
  std::optional<std::string> first;
  for (const auto& line : util::split_lines(*text)) {
    std::string_view t = util::trim(line);
    if (t.empty()) continue;
    if (!first) first = std::string(t);
    if (!must_contain.empty() && t.find(must_contain) != std::string_view::npos) return std::string(t);
  }
  return first;
}

// The C++ and C compilers are found exactly as builds find them, each on its
// own (find_host_compilers resolves CXX first and would blame a broken CXX on cc).
json probe_host_compiler(const toolchain::EnvLookup& env, bool c_compiler) {
  json c = doctor_component(c_compiler ? "cc" : "c++");
  const char* var = c_compiler ? "CC" : "CXX";
  const std::string fix = c_compiler
                              ? "install a C compiler (apt-get install gcc) or set CC; needed only for .c sources"
                              : "install a C++ compiler (apt-get install g++) or set CXX=/path/to/c++";
  auto path = toolchain::find_compiler(env, var, c_compiler ? "cc" : "c++");
  if (!path) {
    mark_missing(c, path.error(), fix);
    return c;
  }
  c["path"] = *path;
  c["found_by"] = toolchain::non_empty(env, var) ? var : "PATH";
  if (auto v = doctor_version_line(*path)) {
    c["found"] = true;
    c["version"] = *v;
  } else {
    mark_missing(c, *path + " --version failed", std::string("point ") + var + " at a working compiler");
  }
  return c;
}

json probe_nvcc(const toolchain::EnvLookup& env) {
  json c = doctor_component("nvcc");
  auto toolkit = toolchain::find_cuda_toolkit(env);
  const std::string fix =
      "install the CUDA toolkit and set CUDA_HOME (e.g. CUDA_HOME=/usr/local/cuda) or put nvcc on PATH; "
      "needed for .cu sources and --emit cubin|fatbin|ptx with nvcc";
  if (!toolkit) {
    mark_missing(c, toolkit.error(), fix);
    return c;
  }
  c["path"] = toolkit->nvcc;
  c["cuda_home"] = toolkit->home;
  c["found_by"] = toolkit->found_by;
  if (auto line = doctor_version_line(toolkit->nvcc, "release")) {
    c["found"] = true;
    c["version"] = nvcc_version_number(*line);
    c["version_line"] = *line;
  } else {
    mark_missing(c, toolkit->nvcc + " --version failed", fix);
  }
  return c;
}

json probe_nvrtc() {
  json c = doctor_component("nvrtc");
  // "<resolved path> <major>.<minor>"
  auto identity = compile::find_nvrtc_identity();
  if (!identity) {
    mark_missing(c, identity.error(),
                 "install the CUDA toolkit's NVRTC (libnvrtc.so) or set TVMFFI_JIT_LIBNVRTC=/path/to/libnvrtc.so; "
                 "needed only for --compiler nvrtc");
    return c;
  }
  const size_t space = identity->rfind(' ');
  c["found"] = true;
  c["path"] = identity->substr(0, space);
  c["version"] = space == std::string::npos ? "" : identity->substr(space + 1);
  return c;
}

// "version" is the headers' (the ABI modules are compiled against, as the
// cache key records it); "package_version" the installed wheel's, which can
// differ ("0.1.16" headers in the 0.1.15.post2 wheel). Both are shown, named.
json probe_tvm_ffi(const Expected<toolchain::TvmFfiLocation>& loc) {
  json c = doctor_component("tvm-ffi");
  if (!loc) {
    mark_missing(c, loc.error(), "pip install apache-tvm-ffi, or set TVM_FFI_ROOT / pass --tvm-ffi-root DIR");
    return c;
  }
  c["path"] = loc->lib_dir;
  c["include_dir"] = loc->include_dir;
  c["dlpack_include_dir"] = loc->dlpack_include_dir;
  c["lib_dir"] = loc->lib_dir;
  c["found_by"] = loc->found_by;
  auto package = toolchain::tvm_ffi_package_version(*loc);
  c["package_version"] = package ? json(*package) : json(nullptr);
  auto header = toolchain::tvm_ffi_header_version(loc->include_dir);
  c["header_version"] = header ? json(*header) : json(nullptr);
  if (header) {
    c["found"] = true;
    c["version"] = *header;
  } else {
    mark_missing(c, header.error(), "reinstall tvm-ffi (pip install --force-reinstall apache-tvm-ffi)");
  }
  return c;
}

DriverProbe probe_driver(const std::string& libcuda) {
  DriverProbe p;
  p.driver = doctor_component("driver");
  p.gpu = doctor_component("gpu");
  const driver::DriverStatus status = driver::query_driver(libcuda);
  p.driver["library"] = status.library.empty() ? json(nullptr) : json(status.library);
  p.driver["path"] = p.driver["library"];
  if (status.available) {
    p.driver["found"] = true;
    p.driver["version"] = driver::format_driver_version(status.driver_version);
    p.driver["version_code"] = status.driver_version;
  } else {
    mark_missing(p.driver, status.reason.empty() ? "no CUDA driver" : status.reason,
                 "install the NVIDIA driver (libcuda.so.1) or set TVMFFI_JIT_LIBCUDA=/path/to/libcuda.so.1; "
                 "needed for `inspect --load` and for builds without --arch");
  }
  for (const auto& gpu : status.gpus) {
    json g = json::object();
    g["ordinal"] = gpu.ordinal;
    g["name"] = gpu.name;
    g["compute_capability"] = std::to_string(gpu.cc_major) + "." + std::to_string(gpu.cc_minor);
    g["arch"] = "sm_" + std::to_string(gpu.cc_major) + std::to_string(gpu.cc_minor);
    p.gpus.push_back(g);
  }
  p.gpu["count"] = p.gpus.size();
  if (!p.gpus.empty()) {
    p.gpu["found"] = true;
    std::vector<std::string> caps;
    for (const auto& g : p.gpus) caps.push_back(g["compute_capability"].get<std::string>());
    p.gpu["version"] = util::join(caps, " ");
  } else {
    mark_missing(p.gpu, status.available ? "the driver sees no GPU" : "no driver, so no GPU can be seen",
                 "check nvidia-smi and CUDA_VISIBLE_DEVICES; without a GPU, builds need --arch or "
                 "TVM_FFI_CUDA_ARCH_LIST and `inspect --load` cannot run");
  }
  return p;
}

}  // namespace tvmffi_jit::cli
