#include "cli/driver_load.h"

#include <cstdio>

#include "output.h"
#include "tvmffi_jit/devcode/parse.h"
#include "tvmffi_jit/devcode/print.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::cli {

void add_driver_load_options(CLI::App* sub, DriverLoadOptions& o) {
  sub->add_option("--device", o.device, "CUDA device ordinal to load on (default 0)")->check(CLI::NonNegativeNumber);
  sub->add_option("--timeout", o.timeout,
                  "Seconds the driver may take before the load counts as hung (default 60)")
      ->check(CLI::PositiveNumber);
}

driver::ValidateOptions to_validate_options(const DriverLoadOptions& o, const toolchain::EnvLookup& env) {
  driver::ValidateOptions v;
  v.device = o.device;
  v.timeout_seconds = o.timeout;
  // An explicit library, for machines that run modules without a tvm-ffi
  // installation (only the shared library copied beside them).
  v.tvm_ffi_library = toolchain::non_empty(env, "TVMFFI_JIT_TVM_FFI_LIB").value_or("");
  v.tvm_ffi_search.env = env;
  v.ungated = toolchain::env_flag(env, driver::kUngatedEnv);
  return v;
}

int finish_inspect_load(const std::vector<devcode::FileReport>& reports, const driver::ValidateOptions& o, bool json) {
  std::vector<driver::FileVerdict> verdicts = driver::validate_files(reports, o);
  std::string out;
  if (json) {
    nlohmann::json doc = devcode::to_json(reports);
    for (size_t i = 0; i < verdicts.size() && i < doc["files"].size(); ++i)
      doc["files"][i]["driver"] = driver::to_json(verdicts[i]);
    out = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else {
    for (const auto& v : verdicts) out += v.path + ": driver\n" + driver::format_text(v);
  }
  print_result(out);
  for (const auto& v : verdicts)
    if (v.verdict != driver::Verdict::kValid && v.offline_valid)  // offline errors are already printed
      print_diagnostic(v.path, v.message);
  return driver::exit_code_for(verdicts);
}

}  // namespace tvmffi_jit::cli

namespace tvmffi_jit::cli {

int validate_build_output(const std::string& path, const driver::ValidateOptions& o, bool require_driver,
                          nlohmann::json* json) {
  devcode::FileReport report = devcode::inspect_file(path);
  // A relocatable object is linked, not dlopen'ed: check its device code only.
  if (util::extension(path) == ".o") report.tvm_ffi_module = false;
  driver::FileVerdict v = driver::validate_file(path, report, o);
  if (json) *json = {{"offline", devcode::to_json(report)}, {"driver", driver::to_json(v)}};
  if (!util::log_quiet() || v.verdict == driver::Verdict::kInvalid) {
    std::string text = path + ": validation\n" + driver::format_text(v);
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  switch (v.verdict) {
    case driver::Verdict::kValid:
      return 0;
    case driver::Verdict::kInvalid:
      print_diagnostic(path, v.message);
      return static_cast<int>(ExitCode::kInvalid);
    case driver::Verdict::kNoDriver:
      if (require_driver) {
        print_diagnostic(path, v.message + " (--require-driver)");
        return static_cast<int>(ExitCode::kMissingTool);
      }
      spdlog::warn("{}: {}; only the offline checks{} ran", path, v.message,
                   v.module.checked ? " and the module load" : "");
      return 0;
  }
  return static_cast<int>(ExitCode::kInvalid);
}

}  // namespace tvmffi_jit::cli
