#include "tvmffi_jit/compile/manifest.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "compile/manifest_values.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

using json = ManifestJson;

namespace {

// The include directories of one key or flag, resolved and checked.
void add_include_dirs(const ManifestReader& r, std::vector<std::string>& to, const std::vector<std::string>& given,
                      const std::string& pointer) {
  for (size_t i = 0; i < given.size(); ++i) {
    std::string resolved = given[i].empty() ? "" : resolve_manifest_path(r.base_dir, given[i]);
    if (auto ok = check_include_dir(given[i], resolved); !ok) r.fail(pointer + "/" + std::to_string(i), ok.why());
    to.push_back(resolved);
  }
}

bool boolean_value(const ManifestReader& r, const json& v, const std::string& pointer) {
  if (!v.is_boolean()) r.wrong_type(pointer, "true or false", v);
  return v.get<bool>();
}

void read_sources(const ManifestReader& r, Manifest& m, const json& v, const std::string& ptr) {
  std::vector<std::string> given = r.string_or_list(v, ptr);
  for (size_t i = 0; i < given.size(); ++i) {
    std::string resolved = given[i].empty() ? "" : resolve_manifest_path(r.base_dir, given[i]);
    if (auto ok = check_source(m, given[i], resolved); !ok)
      r.fail(v.is_array() ? ptr + "/" + std::to_string(i) : ptr, ok.why());
    m.sources.push_back(resolved);
  }
}

// "functions": a name, a list of names, or an object of name: docstring.
void read_functions(const ManifestReader& r, Manifest& m, const json& v, const std::string& ptr) {
  if (v.is_string()) {
    add_function(r, m, ptr, v.get<std::string>(), "");
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      std::string p = ptr + "/" + std::to_string(i);
      add_function(r, m, p, r.string_value(v[i], p), "");
    }
  } else if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string p = ptr + "/" + pointer_token(it.key());
      add_function(r, m, p, it.key(), r.string_value(it.value(), p, "a string (the docstring)"));
    }
  } else {
    r.wrong_type(ptr, "a string, an array of strings or an object of name: docstring", v);
  }
}

// "cuda_arch" / "rocm_arch": entries parsed by `parse` and merged into `to`.
template <typename List, typename Parse, typename Merge>
void read_arch_list(const ManifestReader& r, const json& v, const std::string& ptr, const char* if_empty, Parse parse,
                    Merge merge, List& to) {
  std::vector<std::string> entries = r.string_or_list(v, ptr);
  if (entries.empty()) r.fail(ptr, if_empty);
  for (size_t i = 0; i < entries.size(); ++i) {
    auto archs = parse(entries[i]);
    if (!archs) r.fail(v.is_array() ? ptr + "/" + std::to_string(i) : ptr, archs.why());
    merge(to, *archs);
  }
}

// An enum word ("backend", "emit", "compiler") through its value function.
template <typename T>
T read_word(const ManifestReader& r, const json& v, const std::string& ptr, Expected<T> (*value)(const std::string&)) {
  auto parsed = value(r.string_value(v, ptr));
  if (!parsed) r.fail(ptr, parsed.why());
  return *parsed;
}

void read_kernel_names(const ManifestReader& r, Manifest& m, const json& v, const std::string& ptr) {
  m.kernel_names = r.string_list(v, ptr);
  for (size_t i = 0; i < m.kernel_names.size(); ++i)
    if (util::trim(m.kernel_names[i]).empty()) r.fail(ptr + "/" + std::to_string(i), "empty kernel name expression");
}

// "cxx_launcher" / "cuda_launcher": a string is split into words (no
// quoting); an array is the argv as is.
std::vector<std::string> read_launcher(const ManifestReader& r, const json& v, const std::string& ptr) {
  std::vector<std::string> words;
  if (v.is_string()) words = util::split_any(v.get<std::string>(), " \t\n");
  else if (v.is_array()) words = r.string_list(v, ptr);
  else r.wrong_type(ptr, "a string (\"sccache\") or an array of strings (the launcher's argv)", v);
  for (size_t i = 0; i < words.size(); ++i)
    if (words[i].empty()) r.fail(ptr + "/" + std::to_string(i), "empty launcher word");
  return words;
}

void read_embed_cubin(const ManifestReader& r, Manifest& m, const json& v, const std::string& ptr) {
  if (!v.is_object()) r.wrong_type(ptr, "an object of name: path", v);
  for (auto it = v.begin(); it != v.end(); ++it) {
    std::string p = ptr + "/" + pointer_token(it.key());
    add_embed(r, m, p, it.key(), r.string_value(it.value(), p, "a string (a .cubin, .fatbin or .cu path)"));
  }
}

void parse_key(const ManifestReader& r, Manifest& m, const std::string& key, const json& v) {
  const std::string ptr = "/" + pointer_token(key);
  if (key == "$schema") {
    r.string_value(v, ptr);
  } else if (key == "name") {
    m.name = r.string_value(v, ptr);
    if (auto ok = check_module_name(m.name); !ok) r.fail(ptr, ok.why());
  } else if (key == "sources") {
    read_sources(r, m, v, ptr);
  } else if (key == "cpp_sources") {
    m.cpp_sources = r.string_or_list(v, ptr);
  } else if (key == "cuda_sources") {
    m.cuda_sources = r.string_or_list(v, ptr);
  } else if (key == "functions") {
    read_functions(r, m, v, ptr);
  } else if (key == "extra_cflags") {
    m.extra_cflags = r.string_list(v, ptr);
  } else if (key == "extra_cuda_cflags") {
    m.extra_cuda_cflags = r.string_list(v, ptr);
  } else if (key == "extra_ldflags") {
    m.extra_ldflags = r.string_list(v, ptr);
  } else if (key == "extra_include_paths") {
    add_include_dirs(r, m.extra_include_paths, r.string_list(v, ptr), ptr);
  } else if (key == "system_include_paths") {
    add_include_dirs(r, m.system_include_paths, r.string_list(v, ptr), ptr);
  } else if (key == "cuda_runtime") {
    m.cuda_runtime = boolean_value(r, v, ptr);
  } else if (key == "cuda_driver") {
    m.cuda_driver = boolean_value(r, v, ptr);
  } else if (key == "cuda_arch") {
    read_arch_list(r, v, ptr, "empty CUDA architecture list (leave the key out to use TVM_FFI_CUDA_ARCH_LIST or the GPUs)",
                   toolchain::try_parse_arch_list, toolchain::merge_arch_lists, m.cuda_arch);
  } else if (key == "rocm_arch") {
    read_arch_list(r, v, ptr, "empty ROCm architecture list (leave the key out to use TVM_FFI_ROCM_ARCH_LIST)",
                   toolchain::try_parse_rocm_arch_list, toolchain::merge_rocm_arch_lists, m.rocm_arch);
  } else if (key == "backend") {
    m.backend = read_word(r, v, ptr, backend_value);
  } else if (key == "emit") {
    m.emit = read_word(r, v, ptr, emit_value);
  } else if (key == "compiler") {
    m.compiler = read_word(r, v, ptr, compiler_value);
  } else if (key == "kernel_names") {
    read_kernel_names(r, m, v, ptr);
  } else if (key == "cxx_launcher" || key == "cuda_launcher") {
    (key == "cxx_launcher" ? m.cxx_launcher : m.cuda_launcher) = read_launcher(r, v, ptr);
    (key == "cxx_launcher" ? m.cxx_launcher_source : m.cuda_launcher_source) = "manifest";
  } else if (key == "embed_cubin") {
    read_embed_cubin(r, m, v, ptr);
  }
}

// 1-based line and column of a byte offset, for JSON syntax errors.
std::string line_column(std::string_view text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < text.size() && i + 1 < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

}  // namespace

const std::vector<std::string>& manifest_keys() {
  static const std::vector<std::string> keys = {
      "$schema",      "name",        "sources",         "cpp_sources",       "cuda_sources",
      "functions",    "extra_cflags", "extra_cuda_cflags", "extra_ldflags",     "extra_include_paths",
      "system_include_paths", "cuda_runtime", "cuda_driver",
      "cuda_arch",    "emit",        "embed_cubin",     "compiler",          "kernel_names",
      "cxx_launcher", "cuda_launcher", "backend",       "rocm_arch"};
  return keys;
}

Manifest parse_manifest_text(std::string_view text, const std::string& display_path, const std::string& base_dir) {
  ManifestReader r{display_path, util::absolute_path(base_dir)};
  // nlohmann keeps the last of duplicate keys silently; a manifest with two
  // "sources" is almost certainly a merge mistake, so duplicates at the top
  // level are reported.
  std::set<std::string> seen;
  std::optional<std::string> duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      std::string k = parsed.get<std::string>();
      if (!seen.insert(k).second && !duplicate) duplicate = k;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..." -> the tail.
    size_t colon = what.find(": ");
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    r.fail("", "invalid JSON at " + line_column(text, e.byte) + ": " + detail);
  } catch (const json::exception& e) {
    // A number beyond a double's range ("1e999"): out_of_range.406 "number
    // overflow parsing '1e999'", which carries no position; find the token.
    std::string what = e.what();
    size_t open = what.find('\'');
    size_t close = open == std::string::npos ? std::string::npos : what.find('\'', open + 1);
    std::string token = close == std::string::npos ? "" : what.substr(open + 1, close - open - 1);
    size_t at = token.empty() ? std::string::npos : text.find(token);
    std::string where = at == std::string::npos ? "" : " at " + line_column(text, at + 1);
    if (e.id == 406)
      r.fail("", "invalid JSON" + where + ": number " + token + " is out of range (larger than a double can hold)");
    size_t bracket = what.find("] ");
    r.fail("", "invalid JSON" + where + ": " + (bracket == std::string::npos ? what : what.substr(bracket + 2)));
  }
  if (!root.is_object()) r.wrong_type("", "a JSON object", root);
  if (duplicate) r.fail("/" + pointer_token(*duplicate), "duplicate key");

  const std::vector<std::string>& keys = manifest_keys();
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) {
      std::string problem = "unknown key";
      if (auto near = util::nearest(it.key(), keys)) problem += " (did you mean " + quote_for_message(*near) + "?)";
      r.fail("/" + pointer_token(it.key()), problem);
    }
  }
  Manifest m;
  m.manifest_path = display_path.empty() ? "" : util::absolute_path(display_path);
  // Keys are checked in documentation order so the reported problem does not
  // depend on the object's key order.
  for (const auto& key : keys) {
    auto it = root.find(key);
    if (it != root.end()) parse_key(r, m, key, *it);
  }
  if (m.name.empty() && !root.contains("name")) r.fail("/name", "missing required key");
  return m;
}

Manifest load_manifest(const std::string& path) {
  std::string resolved = util::absolute_path(path);
  if (auto ok = check_readable_file(path, resolved); !ok) throw usage_error("manifest: " + ok.why());
  std::string text;
  try {
    text = util::read_file(resolved);
  } catch (const Error& e) {
    throw usage_error(std::string("manifest: ") + e.what());
  }
  return parse_manifest_text(text, path, util::parent_path(resolved));
}

}  // namespace tvmffi_jit::compile
