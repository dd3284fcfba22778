// The CLI end of driver validation, shared by `inspect --load` and
// `build --validate`: options, output and exit codes (docs/driver.md).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tvmffi_jit/devcode/report.h"
#include "tvmffi_jit/driver/validate.h"
#include "tvmffi_jit/toolchain/environment.h"

namespace tvmffi_jit::cli {

struct DriverLoadOptions {
  int device = 0;        // --device N
  double timeout = 60;   // --timeout S (per child process)
};

// Adds --device and --timeout to `sub`.
void add_driver_load_options(CLI::App* sub, DriverLoadOptions& o);

// --device and --timeout, with what the environment `env` says: the
// tvm-ffi library (TVMFFI_JIT_TVM_FFI_LIB, else found through `env`) and the
// ungated-probe switch (driver::kUngatedEnv; exit 2 when it is not a boolean).
driver::ValidateOptions to_validate_options(const DriverLoadOptions& o, const toolchain::EnvLookup& env);

// `inspect --load`: validates every report, prints (text: one driver block
// per file after the offline listing; JSON: the offline document with a
// `driver` object added to each file) and returns the exit code: 3 if any
// file is invalid offline or in the driver, else 4 if there was no driver or
// no device, else 0. Text output of the offline part is the caller's.
int finish_inspect_load(const std::vector<devcode::FileReport>& reports, const driver::ValidateOptions& o, bool json);

}  // namespace tvmffi_jit::cli

namespace tvmffi_jit::cli {

// `build --validate`: inspects the artifact offline and validates it through
// the driver. Prints the verdict on stderr (stdout is the artifact path) and,
// when `json` is given, stores the report there ({"offline": ..., "driver": ...}).
// Returns 3 if the artifact is invalid; with no driver or device, 4 if
// `require_driver`, else 0 after a warning (the offline checks still ran).
int validate_build_output(const std::string& path, const driver::ValidateOptions& o, bool require_driver,
                          nlohmann::json* json);

}  // namespace tvmffi_jit::cli
