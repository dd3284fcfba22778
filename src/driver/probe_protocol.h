// Constants shared by the two ends of the probe protocol (probe.cpp, validate.cpp).
#pragma once

namespace tvmffi_jit::driver {

// Prefix of the progress lines the child writes to stderr before each step.
inline constexpr const char* kProbeMarker = "@@probe";
// The hidden subcommand that runs the child side.
inline constexpr const char* kProbeCommand = "__driver-probe";

// Test hook: when "1", offline-invalid cubin/fatbin/PTX files are loaded
// anyway (verdict still invalid), to show crash isolation on a real driver.
inline constexpr const char* kUngatedEnv = "TVMFFI_JIT_VALIDATE_UNGATED";

}  // namespace tvmffi_jit::driver
