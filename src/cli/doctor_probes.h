// The probes of `doctor` (cli/cmd_doctor.cpp), one file per subject: the
// tools (compilers, NVRTC, tvm-ffi, the driver and GPUs,
// cli/doctor_tools.cpp), the cache root (cli/doctor_cache.cpp) and the
// compiler launchers (cli/doctor_launchers.cpp). A probe never throws for
// what it does not find: its component says "found": false, the problem and
// the fix. Private to the cli layer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "doctor.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/toolchain/environment.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"

namespace tvmffi_jit::cli {

// How long one `--version` (or a launcher's probe compile, which has its own
// limit) may take before doctor gives up on it.
constexpr double kDoctorProbeTimeoutSeconds = 20;

// A component of the report, not found yet: name, found, path, version, problem, fix.
nlohmann::json doctor_component(const std::string& name);
void mark_missing(nlohmann::json& c, const std::string& problem, const std::string& fix);

// The first non-empty line `<program> --version` prints (the first holding
// `must_contain` when one does), or nullopt.
std::optional<std::string> doctor_version_line(const std::string& program, const std::string& must_contain = "");

// The tools (cli/doctor_tools.cpp).
nlohmann::json probe_host_compiler(const toolchain::EnvLookup& env, bool c_compiler);
nlohmann::json probe_nvcc(const toolchain::EnvLookup& env);
nlohmann::json probe_nvrtc();
nlohmann::json probe_tvm_ffi(const Expected<toolchain::TvmFfiLocation>& loc);
struct DriverProbe {
  nlohmann::json driver;
  nlohmann::json gpu;  // the "gpu" component (found when at least one GPU is visible)
  nlohmann::json gpus = nlohmann::json::array();
};
DriverProbe probe_driver(const std::string& libcuda);

// The cache root, checked as a build would open it (cli/doctor_cache.cpp).
nlohmann::json probe_cache(const DoctorOptions& options, const cache::RootEnvironment& root_env);

// A compiler launcher (cli/doctor_launchers.cpp): the one a build would use
// (`given` by the option, else `variable`, else the compiler's launcher
// words), its known limits and, for nvcc (`cuda`), a tiny kernel compiled
// through it in each nvcc mode. Not a component: a build needs none.
nlohmann::json probe_launcher(const std::optional<std::string>& given, const char* option, const char* variable,
                              const std::vector<std::string>& compiler_words, const char* compiler_variable, bool cuda,
                              const toolchain::EnvLookup& env, const Expected<toolchain::TvmFfiLocation>& tvm_ffi);
// The launchers' lines of the text report.
void print_launchers(const nlohmann::json& launchers, std::string& out);

}  // namespace tvmffi_jit::cli
