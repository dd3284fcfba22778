// What `doctor` and `--version` find on this machine. Private to the cli layer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/cli/environment.h"

namespace tvmffi_jit::cli {

struct DoctorOptions {
  std::string cache_dir;                    // --cache-dir (empty: the documented resolution)
  std::optional<std::string> tvm_ffi_root;  // --tvm-ffi-root
  std::vector<std::string> require;         // --require: components that must be found besides the defaults
  std::optional<std::string> cxx_launcher;   // --cxx-launcher (else TVMFFI_JIT_CXX_LAUNCHER, else CXX's launcher words)
  std::optional<std::string> cuda_launcher;  // --cuda-launcher (else TVMFFI_JIT_CUDA_LAUNCHER)
};

// The component names --require accepts, in report order.
std::vector<std::string> component_names();

// Everything `doctor --json` prints (the document described in
// docs/tooling.md). Never throws for a missing component: each one has
// "found": false, "problem" and "fix", and "ok" is false when a required one
// is missing.
// `environment` is cli::run()'s: the finders' lookup, the cache root's and
// the driver library's variables.
nlohmann::json collect_doctor_report(const DoctorOptions& options, const CommandEnvironment& environment);

}  // namespace tvmffi_jit::cli
