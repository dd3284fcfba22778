// Constants shared by the two ends of the probe protocol (probe.cpp, validate.cpp).
#pragma once

namespace tvmffi_jit::driver {

// Prefix of the progress lines the child writes to stderr before each step.
inline constexpr const char* kProbeMarker = "@@probe";
// The hidden subcommand that runs the child side.
inline constexpr const char* kProbeCommand = "__driver-probe";

}  // namespace tvmffi_jit::driver
