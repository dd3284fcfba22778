// Text and JSON printers for FileReport (schema: docs/inspect.md).
#include "tvmffi_jit/devcode/print.h"

#include <fmt/format.h>

namespace tvmffi_jit::devcode {

namespace {

using nlohmann::json;

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
json opt_dim(const std::optional<Dim3>& d) {
  return d ? json::array({d->x, d->y, d->z}) : json(nullptr);
}
json str_or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

json kernel_json(const Kernel& k) {
  return json{{"name", k.name},
              {"demangled", k.demangled},
              {"registers", opt(k.registers)},
              {"stack_bytes", opt(k.stack_bytes)},
              {"shared_bytes", opt(k.shared_bytes)},
              {"param_bytes", opt(k.param_bytes)},
              {"max_threads", opt(k.max_threads)},
              {"min_stack_bytes", opt(k.min_stack_bytes)},
              {"local_bytes", opt(k.local_bytes)},
              {"const0_bytes", opt(k.const0_bytes)},
              {"param_count", opt(k.param_count)},
              {"max_ntid", opt_dim(k.max_ntid)},
              {"req_ntid", opt_dim(k.req_ntid)},
              {"cluster_dims", opt_dim(k.cluster_dims)},
              {"explicit_cluster", k.explicit_cluster},
              {"max_registers", opt(k.max_registers)},
              {"min_ctas_per_sm", opt(k.min_ctas_per_sm)},
              {"code_bytes", opt(k.code_bytes)}};
}

json entry_json(const Entry& e) {
  json kernels = json::array();
  for (const Kernel& k : e.kernels) kernels.push_back(kernel_json(k));
  json globals = json::array();
  for (const Global& g : e.globals) globals.push_back(json{{"name", g.name}, {"space", g.space}, {"size", g.size}});
  json banks = json::array();
  for (auto& [bank, bytes] : e.constant_banks) banks.push_back(json{{"bank", bank}, {"bytes", bytes}});
  json j{{"index", e.index},
         {"container", e.container},
         {"kind", to_string(e.kind)},
         {"arch", e.arch},
         {"ptx_version", str_or_null(e.ptx_version)},
         {"compression", to_string(e.compression)},
         {"size", e.size},
         {"decompressed_size", e.decompressed_size},
         {"header_offset", e.header_offset},
         {"payload_offset", e.payload_offset},
         {"flags", e.flags},
         {"code_version", str_or_null(e.code_version)},
         {"identifier", str_or_null(e.identifier)},
         {"options", str_or_null(e.options)},
         {"kernels", std::move(kernels)},
         {"globals", std::move(globals)},
         {"error", str_or_null(e.error)}};
  if (e.kind == EntryKind::kElf) {
    j["elf"] = json{{"type", str_or_null(e.elf_type)},
                    {"abi_version", e.elf_abi_version},
                    {"flags", e.elf_flags},
                    {"virtual_arch", str_or_null(e.virtual_arch)},
                    {"toolkit", str_or_null(e.toolkit)},
                    {"ptxas_options", str_or_null(e.ptxas_options)},
                    {"global_bytes", e.global_bytes},
                    {"constant_banks", std::move(banks)}};
  }
  return j;
}

json entries_json(const std::vector<Entry>& entries) {
  json a = json::array();
  for (const Entry& e : entries) a.push_back(entry_json(e));
  return a;
}

std::string dim(const std::optional<Dim3>& d) {
  return d ? fmt::format("{}x{}x{}", d->x, d->y, d->z) : "-";
}
template <typename T>
std::string num(const std::optional<T>& v) {
  return v ? std::to_string(*v) : "-";
}

// Left-aligned columns sized to their widest cell.
std::string table(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line = indent;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line.append(width[i] - r[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

void format_entries(const std::vector<Entry>& entries, const std::string& indent, std::string& out) {
  if (entries.empty()) return;
  std::vector<std::vector<std::string>> rows = {
      {"entry", "kind", "arch", "ptx", "compression", "size", "decompressed", "kernels", "offset"}};
  for (const Entry& e : entries)
    rows.push_back({std::to_string(e.index), to_string(e.kind), e.arch, e.ptx_version.empty() ? "-" : e.ptx_version,
                    to_string(e.compression), std::to_string(e.size), std::to_string(e.decompressed_size),
                    std::to_string(e.kernels.size()), fmt::format("0x{:x}", e.payload_offset)});
  out += table(rows, indent);
  for (const Entry& e : entries) {
    if (!e.error.empty()) out += fmt::format("{}entry {} error: {}\n", indent, e.index, e.error);
    if (e.kernels.empty()) continue;
    out += fmt::format("{}entry {} ({} {}):\n", indent, e.index, to_string(e.kind), e.arch);
    std::vector<std::vector<std::string>> k = {
        {"regs", "stack", "shared", "params", "max_threads", "cluster", "kernel"}};
    for (const Kernel& kn : e.kernels)
      k.push_back({num(kn.registers), num(kn.stack_bytes), num(kn.shared_bytes), num(kn.param_bytes),
                   num(kn.max_threads), dim(kn.cluster_dims), kn.demangled});
    out += table(k, indent + "  ");
    if (!e.globals.empty()) {
      out += fmt::format("{}  globals:", indent);
      for (const Global& g : e.globals) out += fmt::format(" {} ({}, {} bytes)", g.name, g.space, g.size);
      out += "\n";
    }
  }
}

}  // namespace

nlohmann::json to_json(const FileReport& r) {
  json images = json::array();
  for (const DeviceImage& i : r.images)
    images.push_back(json{{"source", i.source}, {"format", to_string(i.format)}, {"offset", i.offset}, {"size", i.size}});
  json functions = json::array();
  for (const TvmFunction& f : r.functions)
    functions.push_back(
        json{{"name", f.name}, {"symbol", f.symbol}, {"has_doc", f.has_doc}, {"has_metadata", f.has_metadata}});
  json cubins = json::array();
  for (const EmbeddedCubin& c : r.embedded_cubins)
    cubins.push_back(json{{"name", c.name},
                          {"symbol", c.symbol},
                          {"offset", c.offset},
                          {"size", c.size},
                          {"format", to_string(c.format)},
                          {"entries", entries_json(c.entries)},
                          {"error", str_or_null(c.error)}});
  return json{{"path", r.path},
              {"format", to_string(r.format)},
              {"file_size", r.file_size},
              {"kernel_count", r.kernel_count()},
              {"tvm_ffi_module", r.tvm_ffi_module},
              {"entries", entries_json(r.entries)},
              {"images", std::move(images)},
              {"functions", std::move(functions)},
              {"embedded_cubins", std::move(cubins)},
              {"error", str_or_null(r.error)}};
}

nlohmann::json to_json(const std::vector<FileReport>& reports) {
  json files = json::array();
  for (const FileReport& r : reports) files.push_back(to_json(r));
  return json{{"schema_version", 1}, {"files", std::move(files)}};
}

std::string format_text(const FileReport& r) {
  std::string out = fmt::format("{}: {}, {} bytes, {} entries, {} kernels{}\n", r.path, to_string(r.format),
                                r.file_size, r.entries.size(), r.kernel_count(),
                                r.tvm_ffi_module ? ", TVM FFI module" : "");
  format_entries(r.entries, "  ", out);
  if (!r.functions.empty()) {
    out += "  TVM FFI functions:\n";
    for (const TvmFunction& f : r.functions)
      out += fmt::format("    {}{}{}\n", f.name, f.has_doc ? " (doc)" : "", f.has_metadata ? " (metadata)" : "");
  }
  for (const EmbeddedCubin& c : r.embedded_cubins) {
    out += fmt::format("  embedded {}: {}, {} bytes at 0x{:x}\n", c.symbol, to_string(c.format), c.size,
                       c.offset);
    format_entries(c.entries, "    ", out);
    if (!c.error.empty()) out += fmt::format("    error: {}\n", c.error);
  }
  if (!r.error.empty()) out += fmt::format("  error: {}\n", r.error);
  return out;
}

}  // namespace tvmffi_jit::devcode
