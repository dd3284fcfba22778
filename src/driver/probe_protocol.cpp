#include "probe_protocol.h"

#include "tvmffi_jit/util/json.h"

namespace tvmffi_jit::driver {

using nlohmann::json;

namespace {

// Every text field travels through util::bytes_to_json(): kernel names,
// paths, logs and symbols are bytes from files and the driver, and one that
// is not UTF-8 must reach the other side exactly (not fail the dump, and not
// come back as U+FFFD, which would name another kernel).
json text(std::string_view s) { return util::bytes_to_json(s); }

std::string text_at(const json& j, const char* key, const std::string& fallback = "") {
  auto it = j.find(key);
  return it == j.end() ? fallback : util::bytes_from_json(*it);
}

json texts(const std::vector<std::string>& v) {
  json a = json::array();
  for (const auto& s : v) a.push_back(text(s));
  return a;
}

std::vector<std::string> texts_at(const json& j, const char* key) {
  std::vector<std::string> out;
  auto it = j.find(key);
  if (it == j.end()) return out;
  for (const json& s : *it) out.push_back(util::bytes_from_json(s));
  return out;
}

// The per-kernel attributes, by key: one table for both directions.
struct AttributeKey {
  const char* key;
  int KernelAttributes::*field;
};
constexpr AttributeKey kAttributeKeys[] = {
    {"max_threads_per_block", &KernelAttributes::max_threads_per_block},
    {"shared_size_bytes", &KernelAttributes::shared_size_bytes},
    {"const_size_bytes", &KernelAttributes::const_size_bytes},
    {"local_size_bytes", &KernelAttributes::local_size_bytes},
    {"num_regs", &KernelAttributes::num_regs},
    {"ptx_version", &KernelAttributes::ptx_version},
    {"binary_version", &KernelAttributes::binary_version},
    {"max_dynamic_shared_bytes", &KernelAttributes::max_dynamic_shared_bytes},
    {"cluster_width", &KernelAttributes::cluster_width},
    {"cluster_height", &KernelAttributes::cluster_height},
    {"cluster_depth", &KernelAttributes::cluster_depth},
};

}  // namespace

json to_json(const ProbeRequest& r) {
  json items = json::array();
  for (const ProbeItem& i : r.items) {
    json j = {{"id", i.id}, {"kind", i.kind == ProbeItem::Kind::kModule ? "module" : "image"}, {"path", text(i.path)}};
    if (i.kind == ProbeItem::Kind::kImage) {
      json candidates = json::array();
      for (const ProbeCandidate& c : i.candidates) candidates.push_back({{"arch", text(c.arch)}, {"names", texts(c.names)}});
      j["candidates"] = std::move(candidates);
    } else {
      j["tvm_ffi_library"] = text(i.tvm_ffi_library);
      j["symbols"] = texts(i.symbols);
    }
    items.push_back(std::move(j));
  }
  return {{"device", r.device}, {"items", std::move(items)}};
}

ProbeRequest request_from_json(const json& j) {
  ProbeRequest r;
  r.device = j.value("device", 0);
  for (const json& i : j.value("items", json::array())) {
    ProbeItem item;
    item.id = i.value("id", 0);
    item.kind = i.value("kind", "") == "module" ? ProbeItem::Kind::kModule : ProbeItem::Kind::kImage;
    item.path = text_at(i, "path");
    for (const json& c : i.value("candidates", json::array()))
      item.candidates.push_back({text_at(c, "arch"), texts_at(c, "names")});
    item.tvm_ffi_library = text_at(i, "tvm_ffi_library");
    item.symbols = texts_at(i, "symbols");
    r.items.push_back(std::move(item));
  }
  return r;
}

json to_json(const ProbeResult& r) {
  json j = {{"item", r.item}};
  if (r.skipped) {
    j["skipped"] = text(*r.skipped);
    return j;
  }
  j["error_log"] = text(r.error_log);
  j["info_log"] = text(r.info_log);
  if (!r.failed_step.empty()) {
    j["failed_step"] = text(r.failed_step);
    j["result"] = text(r.result);
  }
  if (r.kernel_count) j["kernel_count"] = *r.kernel_count;
  json kernels = json::array();
  for (const DriverKernel& k : r.kernels) {
    json kj = {{"name", text(k.name)}, {"enumerated", k.enumerated}, {"resolved", k.resolved}};
    if (!k.resolve_error.empty()) kj["resolve_error"] = text(k.resolve_error);
    if (k.attributes_read) {
      json a = json::object();
      for (const AttributeKey& key : kAttributeKeys)
        if (k.attributes.*key.field >= 0) a[key.key] = k.attributes.*key.field;
      kj["attributes"] = std::move(a);
    }
    kernels.push_back(std::move(kj));
  }
  j["kernels"] = std::move(kernels);
  j["loaded"] = r.loaded;
  if (!r.error.empty()) j["error"] = text(r.error);
  // [name, resolved] pairs, not an object: an object key cannot carry hex.
  json symbols = json::array();
  for (const auto& [sym, ok] : r.symbols) symbols.push_back({text(sym), ok});
  j["symbols"] = std::move(symbols);
  return j;
}

ProbeResult result_from_json(const json& j) {
  ProbeResult r;
  r.item = j.value("item", 0);
  if (j.contains("skipped")) {
    r.skipped = text_at(j, "skipped");
    return r;
  }
  r.error_log = text_at(j, "error_log");
  r.info_log = text_at(j, "info_log");
  r.failed_step = text_at(j, "failed_step");
  r.result = text_at(j, "result", "CUDA_SUCCESS");
  if (j.contains("kernel_count")) r.kernel_count = j["kernel_count"].get<unsigned>();
  for (const json& k : j.value("kernels", json::array())) {
    DriverKernel dk;
    dk.name = text_at(k, "name");
    dk.enumerated = k.value("enumerated", false);
    dk.resolved = k.value("resolved", false);
    dk.resolve_error = text_at(k, "resolve_error");
    if (k.contains("attributes")) {
      dk.attributes_read = true;
      for (const AttributeKey& key : kAttributeKeys) dk.attributes.*key.field = k["attributes"].value(key.key, -1);
    }
    r.kernels.push_back(std::move(dk));
  }
  r.loaded = j.value("loaded", false);
  r.error = text_at(j, "error");
  if (auto it = j.find("symbols"); it != j.end() && it->is_array())
    for (const json& pair : *it) r.symbols.emplace_back(util::bytes_from_json(pair.at(0)), pair.at(1).get<bool>());
  return r;
}

json probe_driver_json(const DriverInfo& d) {
  return {{"available", d.available},       {"library", text(d.library)}, {"reason", text(d.reason)},
          {"driver_version", d.driver_version}, {"device", d.device},     {"device_name", text(d.device_name)},
          {"cc_major", d.cc_major},         {"cc_minor", d.cc_minor},     {"load_mode", text(d.load_mode)},
          {"library_api", d.library_api},   {"kernel_enumeration", d.kernel_enumeration}};
}

DriverInfo driver_from_json(const json& j) {
  DriverInfo d;
  d.available = j.value("available", false);
  d.library = text_at(j, "library");
  d.reason = text_at(j, "reason");
  d.driver_version = j.value("driver_version", 0);
  d.device = j.value("device", 0);
  d.device_name = text_at(j, "device_name");
  d.cc_major = j.value("cc_major", 0);
  d.cc_minor = j.value("cc_minor", 0);
  d.load_mode = text_at(j, "load_mode", "unknown");
  d.library_api = j.value("library_api", false);
  d.kernel_enumeration = j.value("kernel_enumeration", false);
  return d;
}

}  // namespace tvmffi_jit::driver
