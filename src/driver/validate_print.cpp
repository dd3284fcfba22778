// Driver validation, step 4: verdicts as JSON (docs/driver.md) and text.
#include <cstdio>

#include "tvmffi_jit/driver/devices.h"
#include "tvmffi_jit/driver/validate.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::driver {

using nlohmann::json;

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kValid: return "valid";
    case Verdict::kInvalid: return "invalid";
    case Verdict::kNoDriver: return "no-driver";
  }
  return "invalid";
}

json to_json(const FileVerdict& v) {
  json j;
  j["verdict"] = to_string(v.verdict);
  j["valid"] = v.verdict == Verdict::kValid;
  j["message"] = v.message;
  j["offline_valid"] = v.offline_valid;
  const DriverInfo& d = v.driver;
  j["library"] = d.library;
  j["available"] = d.available;
  if (!d.reason.empty()) j["reason"] = d.reason;
  j["driver_version"] = d.driver_version ? json(format_driver_version(d.driver_version)) : json(nullptr);
  j["device"] = {{"ordinal", d.device},
                 {"name", d.device_name},
                 {"compute_capability", d.cc_major ? json(std::to_string(d.cc_major) + "." +
                                                          std::to_string(d.cc_minor))
                                                   : json(nullptr)}};
  j["load_mode"] = d.load_mode.empty() ? "unknown" : d.load_mode;
  j["kernel_enumeration"] = d.kernel_enumeration;
  json entries = json::array();
  for (const auto& img : v.images) {
    json e;
    e["entry"] = img.entry;
    e["source"] = img.source;
    e["offline_entry"] = img.offline_entry ? json(*img.offline_entry) : json(nullptr);
    e["offline_arch"] = img.offline_arch;
    e["offline_kernel_count"] = img.offline_kernel_count;
    e["kernel_count"] = img.driver_kernel_count ? json(*img.driver_kernel_count) : json(nullptr);
    e["valid"] = img.valid;
    e["crashed"] = img.crashed;
    e["failed_step"] = img.failed_step.empty() ? json(nullptr) : json(img.failed_step);
    e["result"] = img.result.empty() ? json(nullptr) : json(img.result);
    e["error_log"] = img.error_log;
    e["info_log"] = img.info_log;
    if (!img.problem.empty()) e["problem"] = img.problem;
    json kernels = json::array();
    for (const auto& k : img.kernels) {
      json kj = {{"name", k.name}, {"resolved", k.resolved}, {"enumerated", k.enumerated}};
      if (!k.resolve_error.empty()) kj["resolve_error"] = k.resolve_error;
      if (k.attributes_read) {
        const KernelAttributes& a = k.attributes;
        kj["attributes"] = {{"max_threads_per_block", a.max_threads_per_block},
                            {"shared_size_bytes", a.shared_size_bytes},
                            {"const_size_bytes", a.const_size_bytes},
                            {"local_size_bytes", a.local_size_bytes},
                            {"num_regs", a.num_regs},
                            {"ptx_version", a.ptx_version},
                            {"binary_version", a.binary_version},
                            {"max_dynamic_shared_size_bytes", a.max_dynamic_shared_bytes},
                            {"cluster_dims", {a.cluster_width, a.cluster_height, a.cluster_depth}}};
      }
      kernels.push_back(std::move(kj));
    }
    e["kernels"] = std::move(kernels);
    json mm = json::array();
    for (const auto& m : img.mismatches)
      mm.push_back({{"kernel", m.kernel}, {"attribute", m.attribute}, {"driver", m.driver}, {"offline", m.offline}});
    e["mismatches"] = std::move(mm);
    entries.push_back(std::move(e));
  }
  j["entries"] = std::move(entries);
  if (v.module.checked) {
    json syms = json::array();
    for (const auto& [sym, ok] : v.module.symbols) syms.push_back({{"symbol", sym}, {"resolved", ok}});
    j["module"] = {{"loaded", v.module.loaded},
                   {"error", v.module.error.empty() ? json(nullptr) : json(v.module.error)},
                   {"tvm_ffi_library", v.module.tvm_ffi_library},
                   {"functions", syms}};
  }
  j["notes"] = v.notes;
  return j;
}

std::string format_text(const FileVerdict& v) {
  std::string out;
  const DriverInfo& d = v.driver;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  if (!d.device_name.empty()) {
    line("  driver: " + d.device_name + " (device " + std::to_string(d.device) + ", sm_" +
         std::to_string(d.cc_major) + std::to_string(d.cc_minor) + "), CUDA " +
         format_driver_version(d.driver_version) + ", " +
         d.load_mode + " loading");
  }
  for (const auto& img : v.images) {
    std::string head = "  entry " + std::to_string(img.entry) + " (" + img.source + ")";
    if (!img.offline_arch.empty()) head += " as " + img.offline_arch;
    bool skipped = img.failed_step == "skipped";
    head += ": " + std::string(img.valid ? "loads" : img.crashed ? "CRASH" : skipped ? "not loaded" : "FAILS");
    if (skipped) head += " (no driver or device, see the verdict)";
    if (img.driver_kernel_count) head += ", " + std::to_string(*img.driver_kernel_count) + " kernel(s) in the driver";
    head += ", " + std::to_string(img.offline_kernel_count) + " kernel(s) listed offline";
    line(head);
    if (!img.valid && !img.problem.empty() && img.failed_step != "skipped") line("    " + img.problem);
    for (const auto& k : img.kernels) {
      if (!k.resolved) {
        line("    " + k.name + ": cuLibraryGetKernel " + k.resolve_error);
        continue;
      }
      const KernelAttributes& a = k.attributes;
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "    %-32s regs %3d  shared %6d  const %5d  local %5d  max threads %4d  sm %d  ptx %d",
                    k.name.c_str(), a.num_regs, a.shared_size_bytes, a.const_size_bytes, a.local_size_bytes,
                    a.max_threads_per_block, a.binary_version, a.ptx_version);
      line(buf);
    }
    for (const auto& m : img.mismatches)
      line("    mismatch: " + m.kernel + " " + m.attribute + ": driver " + std::to_string(m.driver) +
           ", offline " + std::to_string(m.offline));
    if (!img.error_log.empty())
      for (const auto& l : util::split_lines(img.error_log)) line("    log: " + l);
  }
  if (v.module.checked) {
    size_t ok = 0;
    for (const auto& s : v.module.symbols) ok += s.second;
    line("  module: " + std::string(v.module.loaded ? "dlopen ok" : "dlopen FAILED: " + v.module.error) + ", " +
         std::to_string(ok) + "/" + std::to_string(v.module.symbols.size()) + " function(s) resolved");
  }
  for (const auto& n : v.notes) line("  note: " + n);
  line("  verdict: " + v.message);
  return out;
}

}  // namespace tvmffi_jit::driver
