// The text printer for FileReport (docs/inspect.md): the head and entry
// table, each entry's kernels and globals, the functions, embedded cubins
// and error.
#include "tvmffi_jit/devcode/print.h"

#include <algorithm>

#include <fmt/format.h>

#include "devcode/entry_streamer.h"

namespace tvmffi_jit::devcode {

namespace {

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

// The table with one row per entry.
void format_entry_table(const std::vector<Entry>& entries, const std::string& indent, std::string& out) {
  if (entries.empty()) return;
  std::vector<std::vector<std::string>> rows = {
      {"entry", "kind", "arch", "ptx", "compression", "size", "decompressed", "kernels", "offset"}};
  for (const Entry& e : entries)
    rows.push_back({std::to_string(e.index), to_string(e.kind), e.arch, e.ptx_version.empty() ? "-" : e.ptx_version,
                    to_string(e.compression), std::to_string(e.size), std::to_string(e.decompressed_size),
                    std::to_string(e.kernels.size()), fmt::format("0x{:x}", e.payload_offset)});
  out += table(rows, indent);
}

// Errors, kernel tables and globals of entries [begin, end): nearly all of
// the text of a big library, and independent from entry to entry.
void format_entry_details(const std::vector<Entry>& entries, size_t begin, size_t end, const std::string& indent,
                          std::string& out) {
  for (size_t i = begin; i < end; ++i) {
    const Entry& e = entries[i];
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

void format_entries(const std::vector<Entry>& entries, const std::string& indent, std::string& out) {
  format_entry_table(entries, indent, out);
  format_entry_details(entries, 0, entries.size(), indent, out);
}

// The text report in order: `put` receives the head and entry table, then
// `details` the file's entry list (format_text formats it in place,
// write_text in parallel), then `put` the functions, embedded cubins and
// error.
template <typename Put, typename Details>
void emit_text(const FileReport& r, Put&& put, Details&& details) {
  std::string out = fmt::format("{}: {}, {} bytes, {} entries, {} kernels{}\n", r.path, to_string(r.format),
                                r.file_size, r.entries.size(), r.kernel_count(),
                                r.tvm_ffi_module ? ", TVM FFI module" : "");
  format_entry_table(r.entries, "  ", out);
  put(out);
  details(r.entries);
  out.clear();
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
  put(out);
}

void format_file_entry_details(const std::vector<Entry>& entries, size_t begin, size_t end, std::string& out) {
  format_entry_details(entries, begin, end, "  ", out);
}

}  // namespace

std::string format_text(const FileReport& r) {
  std::string text;
  emit_text(
      r, [&](const std::string& part) { text += part; },
      [&](const std::vector<Entry>& entries) { format_file_entry_details(entries, 0, entries.size(), text); });
  return text;
}

bool write_text(std::FILE* out, const FileReport& r, unsigned threads) {
  EntryStreamer streamer(out, threads);
  emit_text(
      r, [&](const std::string& part) { streamer.put(part); },
      [&](const std::vector<Entry>& entries) { streamer.write(entries, format_file_entry_details); });
  return streamer.ok();
}

}  // namespace tvmffi_jit::devcode
