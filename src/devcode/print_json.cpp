// The JSON printer for FileReport (schema: docs/inspect.md): one writer,
// JsonWriter, is the one definition of the JSON form; to_json parses what
// it writes, write_json streams it.
#include "tvmffi_jit/devcode/print.h"

#include "devcode/entry_streamer.h"

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

}  // namespace tvmffi_jit::devcode
