// The protocol between driver validation (validate*.cpp, the parent) and its
// crash-isolated child (`tvmffi-jit __driver-probe`, probe.cpp): one struct
// per message with to_json/from_json, so that the JSON keys are written in
// one place (probe_protocol.cpp) and both ends agree by construction.
//
//   stdin:  ProbeRequest, one JSON document.
//   stdout: one JSON object per line, flushed as soon as it is known, so the
//           parent keeps every finished result when a later item kills the
//           child: first {"driver": DriverInfo}, then one ProbeResult per item.
//   stderr: "@@probe item=K step=S" before each step, written unbuffered, so
//           the parent can say which call the driver died in.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tvmffi_jit/driver/validate.h"

namespace tvmffi_jit::driver {

// Prefix of the progress lines the child writes to stderr before each step.
inline constexpr const char* kProbeMarker = "@@probe";
// The hidden subcommand that runs the child side.
inline constexpr const char* kProbeCommand = "__driver-probe";

// An image the driver may pick from a fatbin: its arch and kernel names.
struct ProbeCandidate {
  std::string arch;  // "sm_90", "compute_90"; "" when not loadable
  std::vector<std::string> names;
};

// One unit of work for the child: load an image, or dlopen a module.
struct ProbeItem {
  enum class Kind { kImage, kModule };
  int id = 0;
  Kind kind = Kind::kImage;
  std::string path;
  std::vector<ProbeCandidate> candidates;  // images
  std::string tvm_ffi_library;             // modules: loaded first when not empty
  std::vector<std::string> symbols;        // modules: looked up with dlsym
};

struct ProbeRequest {
  int device = 0;
  std::vector<ProbeItem> items;
};

// What the child found for one item.
struct ProbeResult {
  int item = 0;
  std::optional<std::string> skipped;  // no usable device: why (no other field is set)
  // Images.
  std::string error_log, info_log;
  std::string failed_step;               // "" when every step succeeded
  std::string result = "CUDA_SUCCESS";   // CUresult name of failed_step
  std::optional<unsigned> kernel_count;  // cuLibraryGetKernelCount (12.4+)
  std::vector<DriverKernel> kernels;
  // Modules.
  bool loaded = false;
  std::string error;
  std::vector<std::pair<std::string, bool>> symbols;  // (symbol, resolved)
};

nlohmann::json to_json(const ProbeRequest& r);
ProbeRequest request_from_json(const nlohmann::json& j);  // throws nlohmann::json::exception
nlohmann::json to_json(const ProbeResult& r);
ProbeResult result_from_json(const nlohmann::json& j);
// The driver line: DriverInfo as the child saw it.
nlohmann::json probe_driver_json(const DriverInfo& d);
DriverInfo driver_from_json(const nlohmann::json& j);

}  // namespace tvmffi_jit::driver
