// Text and JSON printers for FileReport (schema: docs/inspect.md).
#include "tvmffi_jit/devcode/print.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace tvmffi_jit::devcode {

namespace {

using nlohmann::json;

// Appends compact JSON to a string. Keys are written in schema order
// (docs/inspect.md); this writer is the one definition of the JSON form.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}
  // A writer that continues an array of which `first_element` says whether
  // the next value is the first (no comma before it).
  JsonWriter(std::string& out, bool first_element) : out_(out), first_(first_element) {}
  void begin_object() { comma(); out_ += '{'; first_ = true; }
  void end_object() { out_ += '}'; first_ = false; }
  void begin_array() { comma(); out_ += '['; first_ = true; }
  void end_array() { out_ += ']'; first_ = false; }
  void key(const char* k) {
    comma();
    out_ += '"';
    out_ += k;
    out_ += "\":";
    first_ = true;  // the value follows without a comma
  }
  void value(const std::string& s) {
    comma();
    string(s);
  }
  void value(const char* s) { value(std::string(s)); }
  void value(uint64_t v) { comma(); out_ += std::to_string(v); }
  void value(bool v) { comma(); out_ += v ? "true" : "false"; }
  void null() { comma(); out_ += "null"; }
  template <typename T>
  void value(const std::optional<T>& v) {
    if (v) value(static_cast<uint64_t>(*v));
    else null();
  }
  void value(const std::optional<Dim3>& d) {
    if (!d) return null();
    begin_array();
    value(uint64_t(d->x));
    value(uint64_t(d->y));
    value(uint64_t(d->z));
    end_array();
  }
  void string_or_null(const std::string& s) {
    if (s.empty()) null();
    else value(s);
  }
  template <typename T>
  void field(const char* k, const T& v) {
    key(k);
    value(v);
  }
  void field_or_null(const char* k, const std::string& s) {
    key(k);
    string_or_null(s);
  }

 private:
  void comma() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  void string(const std::string& s) {
    bool plain = true;
    for (unsigned char c : s)
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') { plain = false; break; }
    if (plain) {
      out_ += '"';
      out_ += s;
      out_ += '"';
    } else {
      // Escapes and UTF-8 repair: names come from untrusted files, invalid
      // UTF-8 is replaced by U+FFFD rather than rejected.
      out_ += json(s).dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  std::string& out_;
  bool first_ = true;
};

void write_kernel(JsonWriter& w, const Kernel& k) {
  w.begin_object();
  w.field("name", k.name);
  w.field("demangled", k.demangled);
  w.field("registers", k.registers);
  w.field("stack_bytes", k.stack_bytes);
  w.field("shared_bytes", k.shared_bytes);
  w.field("param_bytes", k.param_bytes);
  w.field("max_threads", k.max_threads);
  w.field("min_stack_bytes", k.min_stack_bytes);
  w.field("local_bytes", k.local_bytes);
  w.field("const0_bytes", k.const0_bytes);
  w.field("param_count", k.param_count);
  w.field("max_ntid", k.max_ntid);
  w.field("req_ntid", k.req_ntid);
  w.field("cluster_dims", k.cluster_dims);
  w.field("explicit_cluster", k.explicit_cluster);
  w.field("max_registers", k.max_registers);
  w.field("min_ctas_per_sm", k.min_ctas_per_sm);
  w.field("code_bytes", k.code_bytes);
  w.end_object();
}

void write_entry(JsonWriter& w, const Entry& e) {
  w.begin_object();
  w.field("index", uint64_t(e.index));
  w.field("container", uint64_t(e.container));
  w.field_or_null("member", e.member);
  w.field("kind", to_string(e.kind));
  w.field("arch", e.arch);
  w.field_or_null("ptx_version", e.ptx_version);
  w.field("compression", to_string(e.compression));
  w.field("size", e.size);
  w.field("decompressed_size", e.decompressed_size);
  w.field("header_offset", e.header_offset);
  w.field("payload_offset", e.payload_offset);
  w.field("flags", e.flags);
  w.field_or_null("code_version", e.code_version);
  w.field_or_null("identifier", e.identifier);
  w.field_or_null("options", e.options);
  if (e.kind == EntryKind::kElf) {
    w.key("elf");
    w.begin_object();
    w.field_or_null("type", e.elf_type);
    w.field("abi_version", uint64_t(e.elf_abi_version));
    w.field("flags", uint64_t(e.elf_flags));
    w.field_or_null("virtual_arch", e.virtual_arch);
    w.field_or_null("toolkit", e.toolkit);
    w.field_or_null("ptxas_options", e.ptxas_options);
    w.field("global_bytes", e.global_bytes);
    w.key("constant_banks");
    w.begin_array();
    for (auto& [bank, bytes] : e.constant_banks) {
      w.begin_object();
      w.field("bank", uint64_t(bank));
      w.field("bytes", bytes);
      w.end_object();
    }
    w.end_array();
    w.end_object();
  }
  w.key("kernels");
  w.begin_array();
  for (const Kernel& k : e.kernels) write_kernel(w, k);
  w.end_array();
  w.key("globals");
  w.begin_array();
  for (const Global& g : e.globals) {
    w.begin_object();
    w.field("name", g.name);
    w.field("space", g.space);
    w.field("size", g.size);
    w.end_object();
  }
  w.end_array();
  w.field_or_null("error", e.error);
  w.end_object();
}

// A file object is written as its head (up to the '[' of "entries"), the
// entries, then its tail, so that the entries (nearly all of the text) can be
// formatted in parallel and streamed.
void write_file_head(JsonWriter& w, const FileReport& r) {
  w.begin_object();
  w.field("path", r.path);
  w.field("format", to_string(r.format));
  w.field("file_size", r.file_size);
  w.field("kernel_count", uint64_t(r.kernel_count()));
  w.field("tvm_ffi_module", r.tvm_ffi_module);
  w.key("entries");
  w.begin_array();
}

void write_file_tail(JsonWriter& w, const FileReport& r) {
  w.end_array();
  w.key("images");
  w.begin_array();
  for (const DeviceImage& i : r.images) {
    w.begin_object();
    w.field("source", i.source);
    w.field_or_null("member", i.member);
    w.field("format", to_string(i.format));
    w.field("offset", i.offset);
    w.field("size", i.size);
    w.end_object();
  }
  w.end_array();
  w.key("functions");
  w.begin_array();
  for (const TvmFunction& f : r.functions) {
    w.begin_object();
    w.field("name", f.name);
    w.field("symbol", f.symbol);
    w.field("has_doc", f.has_doc);
    w.field("has_metadata", f.has_metadata);
    w.end_object();
  }
  w.end_array();
  w.key("embedded_cubins");
  w.begin_array();
  for (const EmbeddedCubin& c : r.embedded_cubins) {
    w.begin_object();
    w.field("name", c.name);
    w.field("symbol", c.symbol);
    w.field("offset", c.offset);
    w.field("size", c.size);
    w.field("format", to_string(c.format));
    w.key("entries");
    w.begin_array();
    for (const Entry& e : c.entries) write_entry(w, e);
    w.end_array();
    w.field_or_null("error", c.error);
    w.end_object();
  }
  w.end_array();
  w.field_or_null("error", r.error);
  w.end_object();
}

void write_file(JsonWriter& w, const FileReport& r) {
  write_file_head(w, r);
  for (const Entry& e : r.entries) write_entry(w, e);
  write_file_tail(w, r);
}

// Entries [begin, end) as elements of the "entries" array.
void format_entries_json(const std::vector<Entry>& entries, size_t begin, size_t end, std::string& out) {
  JsonWriter w(out, begin == 0);
  for (size_t i = begin; i < end; ++i) write_entry(w, entries[i]);
}

// Formats entries [begin, end) of a list, appending to `out`.
using EntryFormatter = std::function<void(const std::vector<Entry>&, size_t, size_t, std::string&)>;

// Streams the text of a list of entries (the elements of a JSON "entries"
// array, or the kernel tables of the text output) to `out`. The list is cut
// into chunks of about kChunkKernels kernels; with threads > 1, workers
// format chunks while this thread writes them in order (at most `window`
// chunks ahead of the writer, so memory stays flat), giving the same bytes
// as one thread.
class EntryStreamer {
 public:
  EntryStreamer(std::FILE* out, unsigned threads) : out_(out), threads_(std::max(1u, threads)) {}
  bool ok() const { return ok_; }

  void put(const std::string& text) {
    ok_ = ok_ && std::fwrite(text.data(), 1, text.size(), out_) == text.size();
  }

  void write(const std::vector<Entry>& entries, const EntryFormatter& format) {
    std::vector<std::pair<size_t, size_t>> chunks;
    size_t begin = 0, kernels = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      kernels += 1 + entries[i].kernels.size();
      if (kernels >= kChunkKernels || i + 1 == entries.size()) {
        chunks.emplace_back(begin, i + 1);
        begin = i + 1;
        kernels = 0;
      }
    }
    if (threads_ == 1 || chunks.size() < 2) {
      std::string text;
      for (auto [b, e] : chunks) {
        text.clear();
        format(entries, b, e, text);
        put(text);
      }
      return;
    }
    size_t workers = std::min<size_t>(threads_, chunks.size());
    size_t window = 4 * workers;
    struct Slot {
      std::string text;
      std::exception_ptr error;
      bool ready = false;
    };
    std::vector<Slot> slots(window);
    std::mutex mutex;
    std::condition_variable formatted, written_cv;
    size_t written = 0;  // chunks handed to fwrite (guarded by mutex)
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1)) < chunks.size();) {
        {
          std::unique_lock<std::mutex> lock(mutex);
          written_cv.wait(lock, [&] { return i < written + window; });
        }
        std::string text;
        std::exception_ptr error;
        try {
          format(entries, chunks[i].first, chunks[i].second, text);
        } catch (...) {
          error = std::current_exception();
        }
        {
          std::lock_guard<std::mutex> lock(mutex);
          Slot& slot = slots[i % window];
          slot.text = std::move(text);
          slot.error = error;
          slot.ready = true;
        }
        formatted.notify_all();
      }
    };
    std::vector<std::thread> pool;
    for (size_t t = 0; t < workers; ++t) pool.emplace_back(worker);
    std::exception_ptr first_error;
    for (size_t i = 0; i < chunks.size(); ++i) {
      std::string text;
      {
        std::unique_lock<std::mutex> lock(mutex);
        Slot& slot = slots[i % window];
        formatted.wait(lock, [&] { return slot.ready; });
        text = std::move(slot.text);
        if (slot.error && !first_error) first_error = slot.error;
        slot = Slot{};
      }
      // Every chunk is taken even after a failure, so no worker waits forever.
      if (!first_error) put(text);
      {
        std::lock_guard<std::mutex> lock(mutex);
        written = i + 1;
      }
      written_cv.notify_all();
    }
    for (std::thread& t : pool) t.join();
    if (first_error) std::rethrow_exception(first_error);
  }

 private:
  static constexpr size_t kChunkKernels = 256;
  std::FILE* out_;
  unsigned threads_;
  bool ok_ = true;
};

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

nlohmann::json to_json(const FileReport& r) {
  std::string text;
  JsonWriter w(text);
  write_file(w, r);
  return json::parse(text);
}

nlohmann::json to_json(const std::vector<FileReport>& reports) {
  std::string text;
  JsonWriter w(text);
  w.begin_object();
  w.field("schema_version", uint64_t(1));
  w.key("files");
  w.begin_array();
  for (const FileReport& r : reports) write_file(w, r);
  w.end_array();
  w.end_object();
  return json::parse(text);
}

bool write_json(std::FILE* out, const std::vector<FileReport>& reports, unsigned threads) {
  EntryStreamer entries(out, threads);
  std::string buf;
  JsonWriter w(buf);
  w.begin_object();
  w.field("schema_version", uint64_t(1));
  w.key("files");
  w.begin_array();
  for (const FileReport& r : reports) {
    write_file_head(w, r);
    entries.put(buf);
    buf.clear();
    entries.write(r.entries, format_entries_json);
    write_file_tail(w, r);
  }
  w.end_array();
  w.end_object();
  buf += '\n';
  entries.put(buf);
  return entries.ok();
}

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
