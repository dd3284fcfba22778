#include "tvmffi_jit/compile/manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <climits>
#include <cstring>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "compile/manifest_checks.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

// ordered_json: "functions" and "embed_cubin" objects keep the order they were written in
// (the export lines follow it, as they follow a Python dict's insertion order).
using json = nlohmann::ordered_json;

namespace {

const std::vector<std::string> kSourceExtensions = {".c", ".cc", ".cpp", ".cxx", ".cu", ".hip", ".o"};

// RFC 6901 escaping of one reference token.
std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string in_quotes(std::string_view s) { return quote_for_message(s); }

// One manifest being read: where messages point, and where relative paths start.
struct Reader {
  std::string where;
  std::string base_dir;
  // Names already in m.functions / m.embed_cubin, for duplicate checks that
  // stay linear (80,000 functions took 8.8 s with a scan per name). Seeded
  // from the manifest when a reader adds to one it did not start.
  mutable std::unordered_set<std::string> function_names = {}, embed_names = {};

  [[noreturn]] void fail(const std::string& pointer, const std::string& problem) const {
    throw ManifestError(where, pointer, problem);
  }

  [[noreturn]] void wrong_type(const std::string& pointer, const char* expected, const json& got) const {
    fail(pointer, std::string("expected ") + expected + ", got " + got.type_name());
  }

  std::string string_value(const json& j, const std::string& pointer, const char* expected = "a string") const {
    if (!j.is_string()) wrong_type(pointer, expected, j);
    return j.get<std::string>();
  }

  // An array of strings.
  std::vector<std::string> string_list(const json& j, const std::string& pointer) const {
    if (!j.is_array()) wrong_type(pointer, "an array of strings", j);
    std::vector<std::string> out;
    for (size_t i = 0; i < j.size(); ++i) out.push_back(string_value(j[i], pointer + "/" + std::to_string(i)));
    return out;
  }

  // A string or an array of strings.
  std::vector<std::string> string_or_list(const json& j, const std::string& pointer) const {
    if (j.is_string()) return {j.get<std::string>()};
    if (!j.is_array()) wrong_type(pointer, "a string or an array of strings", j);
    return string_list(j, pointer);
  }
};

// Checks `resolved` names a file whose content can be read (util::can_read_content:
// missing, unreadable, a directory, a FIFO, a /proc pseudo-file); the problem
// names the path as given.
// A path the file system cannot hold: one name longer than NAME_MAX (255 on
// Linux) or the whole longer than PATH_MAX. Said as such, not as "no such
// file" (ENAMETOOLONG reads like a missing file to most callers).
Expected<void> check_path_length(const std::string& given, const std::string& resolved) {
  constexpr size_t kNameMax = NAME_MAX, kPathMax = PATH_MAX - 1;
  size_t longest = 0;
  for (size_t start = 0; start <= resolved.size();) {
    size_t slash = resolved.find('/', start);
    if (slash == std::string::npos) slash = resolved.size();
    longest = std::max(longest, slash - start);
    start = slash + 1;
  }
  std::string shown = given.size() > 80 ? in_quotes(given.substr(0, 60) + "...") : in_quotes(given);
  if (longest > kNameMax)
    return Unexpected{"path " + shown + " is too long for the file system: one of its names is " +
                      std::to_string(longest) + " bytes, at most " + std::to_string(kNameMax) + " are allowed"};
  if (resolved.size() > kPathMax)
    return Unexpected{"path " + shown + " is too long for the file system: " + std::to_string(resolved.size()) +
                      " bytes, at most " + std::to_string(kPathMax) + " are allowed"};
  return {};
}

Expected<void> check_readable_file(const std::string& given, const std::string& resolved) {
  if (auto fits = check_path_length(given, resolved); !fits) return fits;
  auto readable = util::can_read_content(resolved);
  if (readable) return {};
  const std::string& problem = readable.why();
  std::string shown = given == resolved ? in_quotes(given) : in_quotes(given) + " (" + resolved + ")";
  if (problem == "no such file") return Unexpected{"no such file " + shown};
  if (util::starts_with(problem, "is ")) return Unexpected{shown + " " + problem};
  return Unexpected{"cannot read " + shown + ": " + problem};
}

std::string resolve(const std::string& base_dir, const std::string& path) {
  if (!path.empty() && path[0] == '/') return util::absolute_path(path);
  return util::absolute_path(util::join_path(base_dir, path));
}

// A source of the manifest or the command line: a known type, readable, and
// not listed before (the same file twice would be compiled twice and fail to
// link with duplicate symbols; say so where the mistake is).
Expected<void> check_source(const Manifest& m, const std::string& given, const std::string& resolved) {
  if (given.empty()) return Unexpected{"empty path"};
  std::string ext = util::extension(given);
  if (std::find(kSourceExtensions.begin(), kSourceExtensions.end(), ext) == kSourceExtensions.end())
    return Unexpected{"unsupported source type " + in_quotes(ext.empty() ? given : ext) +
                      " (expected .c .cc .cpp .cxx .cu .hip or .o)"};
  if (auto readable = check_readable_file(given, resolved); !readable) return readable;
  for (const auto& s : m.sources)
    if (s == resolved) return Unexpected{"source " + in_quotes(given) + " is listed twice"};
  return {};
}

Expected<void> check_include_dir(const std::string& given, const std::string& resolved) {
  if (given.empty()) return Unexpected{"empty path"};
  if (auto fits = check_path_length(given, resolved); !fits) return fits;
  const std::string shown = in_quotes(given) + (given == resolved ? "" : " (" + resolved + ")");
  if (util::is_directory(resolved)) return {};
  if (util::path_exists(resolved)) return Unexpected{shown + " is not a directory"};
  return Unexpected{"no such directory " + shown};
}

// The include directories of one key or flag, resolved and checked.
void add_include_dirs(const Reader& r, std::vector<std::string>& to, const std::vector<std::string>& given,
                      const std::string& pointer) {
  for (size_t i = 0; i < given.size(); ++i) {
    std::string resolved = given[i].empty() ? "" : resolve(r.base_dir, given[i]);
    if (auto ok = check_include_dir(given[i], resolved); !ok) r.fail(pointer + "/" + std::to_string(i), ok.why());
    to.push_back(resolved);
  }
}

bool boolean_value(const Reader& r, const json& v, const std::string& pointer) {
  if (!v.is_boolean()) r.wrong_type(pointer, "true or false", v);
  return v.get<bool>();
}

// The module name becomes file and directory names (the cache entry
// <name>_<key>, <name>.so, the --no-cache temp dir), so it must fit the
// cache's entry-name rule; checked here, before anything is written.
Expected<void> check_module_name(std::string_view name) {
  if (!is_identifier(name))
    return Unexpected{"module name " + in_quotes(name) + " is not an identifier ([A-Za-z_][A-Za-z0-9_]*)"};
  if (name.size() > kMaxModuleNameLength)
    return Unexpected{"module name " + in_quotes(std::string(name.substr(0, 24)) + "...") + " is " +
                      std::to_string(name.size()) + " characters long; the file names made from it (" +
                      "<name>.fatbin.d, .<name>.so.tmp.<pid>) must fit the file system's " + std::to_string(NAME_MAX) +
                      " bytes, which allows at most " + std::to_string(kMaxModuleNameLength)};
  return {};
}

Expected<void> check_function_name(std::string_view name) {
  if (!is_identifier(name))
    return Unexpected{"function name " + in_quotes(name) + " is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)"};
  return {};
}

void add_function(const Reader& r, Manifest& m, const std::string& pointer, const std::string& name,
                  const std::string& doc) {
  if (auto ok = check_function_name(name); !ok) r.fail(pointer, ok.why());
  if (r.function_names.size() != m.functions.size()) {
    r.function_names.clear();
    for (const auto& f : m.functions) r.function_names.insert(f.first);
  }
  if (!r.function_names.insert(name).second) r.fail(pointer, "duplicate function " + in_quotes(name));
  m.functions.emplace_back(name, doc);
}

void add_embed(const Reader& r, Manifest& m, const std::string& pointer, const std::string& name,
               const std::string& given_path) {
  if (!is_identifier(name)) r.fail(pointer, "embed name " + in_quotes(name) + " is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)");
  if (r.embed_names.size() != m.embed_cubin.size()) {
    r.embed_names.clear();
    for (const auto& e : m.embed_cubin) r.embed_names.insert(e.name);
  }
  if (r.embed_names.count(name)) r.fail(pointer, "duplicate embed name " + in_quotes(name));
  if (given_path.empty()) r.fail(pointer, "empty path");
  std::string path = resolve(r.base_dir, given_path);
  if (auto ok = check_readable_file(given_path, path); !ok) r.fail(pointer, ok.why());
  r.embed_names.insert(name);
  m.embed_cubin.push_back({name, path});
}

void parse_key(const Reader& r, Manifest& m, const std::string& key, const json& v) {
  const std::string ptr = "/" + pointer_token(key);
  if (key == "$schema") {
    r.string_value(v, ptr);
  } else if (key == "name") {
    m.name = r.string_value(v, ptr);
    if (auto ok = check_module_name(m.name); !ok) r.fail(ptr, ok.why());
  } else if (key == "sources") {
    std::vector<std::string> given = r.string_or_list(v, ptr);
    for (size_t i = 0; i < given.size(); ++i) {
      std::string resolved = given[i].empty() ? "" : resolve(r.base_dir, given[i]);
      if (auto ok = check_source(m, given[i], resolved); !ok)
        r.fail(v.is_array() ? ptr + "/" + std::to_string(i) : ptr, ok.why());
      m.sources.push_back(resolved);
    }
  } else if (key == "cpp_sources") {
    m.cpp_sources = r.string_or_list(v, ptr);
  } else if (key == "cuda_sources") {
    m.cuda_sources = r.string_or_list(v, ptr);
  } else if (key == "functions") {
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
    std::vector<std::string> entries = r.string_or_list(v, ptr);
    if (entries.empty()) r.fail(ptr, "empty CUDA architecture list (leave the key out to use TVM_FFI_CUDA_ARCH_LIST or the GPUs)");
    for (size_t i = 0; i < entries.size(); ++i) {
      auto archs = toolchain::try_parse_arch_list(entries[i]);
      if (!archs) r.fail(v.is_array() ? ptr + "/" + std::to_string(i) : ptr, archs.why());
      toolchain::merge_arch_lists(m.cuda_arch, *archs);
    }
  } else if (key == "rocm_arch") {
    std::vector<std::string> entries = r.string_or_list(v, ptr);
    if (entries.empty()) r.fail(ptr, "empty ROCm architecture list (leave the key out to use TVM_FFI_ROCM_ARCH_LIST)");
    for (size_t i = 0; i < entries.size(); ++i) {
      auto archs = toolchain::try_parse_rocm_arch_list(entries[i]);
      if (!archs) r.fail(v.is_array() ? ptr + "/" + std::to_string(i) : ptr, archs.why());
      toolchain::merge_rocm_arch_lists(m.rocm_arch, *archs);
    }
  } else if (key == "backend") {
    std::string s = r.string_value(v, ptr);
    auto b = parse_gpu_backend(s);
    if (!b) r.fail(ptr, "unknown backend " + in_quotes(s) + " (expected cuda or hip)");
    m.backend = *b;
  } else if (key == "emit") {
    std::string s = r.string_value(v, ptr);
    auto kind = parse_emit_kind(s);
    if (!kind) r.fail(ptr, "unknown emit kind " + in_quotes(s) + " (expected module, object, cubin, fatbin or ptx)");
    m.emit = *kind;
  } else if (key == "compiler") {
    std::string s = r.string_value(v, ptr);
    auto c = parse_device_compiler(s);
    if (!c) r.fail(ptr, "unknown compiler " + in_quotes(s) + " (expected nvcc or nvrtc)");
    m.compiler = *c;
  } else if (key == "kernel_names") {
    m.kernel_names = r.string_list(v, ptr);
    for (size_t i = 0; i < m.kernel_names.size(); ++i)
      if (util::trim(m.kernel_names[i]).empty()) r.fail(ptr + "/" + std::to_string(i), "empty kernel name expression");
  } else if (key == "cxx_launcher" || key == "cuda_launcher") {
    // A string is split into words (no quoting); an array is the argv as is.
    std::vector<std::string> words;
    if (v.is_string()) words = util::split_any(v.get<std::string>(), " \t\n");
    else if (v.is_array()) words = r.string_list(v, ptr);
    else r.wrong_type(ptr, "a string (\"sccache\") or an array of strings (the launcher's argv)", v);
    for (size_t i = 0; i < words.size(); ++i)
      if (words[i].empty()) r.fail(ptr + "/" + std::to_string(i), "empty launcher word");
    (key == "cxx_launcher" ? m.cxx_launcher : m.cuda_launcher) = words;
    (key == "cxx_launcher" ? m.cxx_launcher_source : m.cuda_launcher_source) = "manifest";
  } else if (key == "embed_cubin") {
    if (!v.is_object()) r.wrong_type(ptr, "an object of name: path", v);
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string p = ptr + "/" + pointer_token(it.key());
      add_embed(r, m, p, it.key(), r.string_value(it.value(), p, "a string (a .cubin, .fatbin or .cu path)"));
    }
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

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

Manifest parse_manifest_text(std::string_view text, const std::string& display_path, const std::string& base_dir) {
  Reader r{display_path, util::absolute_path(base_dir)};
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
      if (auto near = util::nearest(it.key(), keys)) problem += " (did you mean " + in_quotes(*near) + "?)";
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

// The directory relative command-line paths start from; "" when the current
// directory is gone (deleted under a running shell): absolute paths still work,
// and a relative one fails in util::absolute_path() saying why.
static std::string command_line_base_dir() { return util::find_current_directory().value_or(""); }

void apply_command_line(Manifest& m, const CommandLineInputs& cli) {
  Reader r{kCommandLine, command_line_base_dir()};
  for (const auto& given : cli.sources) {
    std::string resolved = given.empty() ? "" : resolve(r.base_dir, given);
    if (auto ok = check_source(m, given, resolved); !ok) r.fail("source " + in_quotes(given), ok.why());
    m.sources.push_back(resolved);
  }
  if (cli.name) {
    if (auto ok = check_module_name(*cli.name); !ok) r.fail("--name", ok.why());
    m.name = *cli.name;
  }
  for (const auto& spec : cli.functions) {
    size_t eq = spec.find('=');
    std::string name = spec.substr(0, eq);
    std::string doc = eq == std::string::npos ? "" : spec.substr(eq + 1);
    add_function(r, m, "--function " + spec, name, doc);
  }
  m.extra_cflags.insert(m.extra_cflags.end(), cli.cflags.begin(), cli.cflags.end());
  m.extra_cuda_cflags.insert(m.extra_cuda_cflags.end(), cli.cuda_cflags.begin(), cli.cuda_cflags.end());
  m.extra_ldflags.insert(m.extra_ldflags.end(), cli.ldflags.begin(), cli.ldflags.end());
  for (const auto& given : cli.include_paths) {
    std::string resolved = given.empty() ? "" : resolve(r.base_dir, given);
    if (auto ok = check_include_dir(given, resolved); !ok) r.fail("-I " + given, ok.why());
    m.extra_include_paths.push_back(resolved);
  }
  for (const auto& given : cli.system_include_paths) {
    std::string resolved = given.empty() ? "" : resolve(r.base_dir, given);
    if (auto ok = check_include_dir(given, resolved); !ok) r.fail("--isystem " + given, ok.why());
    m.system_include_paths.push_back(resolved);
  }
  m.cuda_runtime = m.cuda_runtime || cli.cuda_runtime;
  m.cuda_driver = m.cuda_driver || cli.cuda_driver;
  if (cli.backend) {
    auto b = parse_gpu_backend(*cli.backend);
    if (!b) r.fail("--backend", "unknown backend " + in_quotes(*cli.backend) + " (expected cuda or hip)");
    m.backend = *b;
  }
  for (const auto& text : cli.arch) {
    // gfx... names a ROCm target (backend hip), anything else a CUDA arch.
    if (util::starts_with(util::trim(text), "gfx")) {
      auto archs = toolchain::try_parse_rocm_arch_list(text);
      if (!archs) r.fail("--arch " + text, archs.why());
      toolchain::merge_rocm_arch_lists(m.command_line_rocm_arch, *archs);
    } else {
      auto archs = toolchain::try_parse_arch_list(text);
      if (!archs) r.fail("--arch " + text, archs.why());
      toolchain::merge_arch_lists(m.command_line_arch, *archs);
    }
  }
  if (cli.emit) {
    auto kind = parse_emit_kind(*cli.emit);
    if (!kind) r.fail("--emit", "unknown emit kind " + in_quotes(*cli.emit) + " (expected module, object, cubin, fatbin or ptx)");
    m.emit = *kind;
  }
  if (cli.compiler) {
    auto c = parse_device_compiler(*cli.compiler);
    if (!c) r.fail("--compiler", "unknown compiler " + in_quotes(*cli.compiler) + " (expected nvcc or nvrtc)");
    m.compiler = *c;
  }
  for (const auto& k : cli.kernel_names) {
    if (util::trim(k).empty()) r.fail("--kernel-name", "empty kernel name expression");
    m.kernel_names.push_back(k);
  }
  for (const auto& spec : cli.embed_cubin) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos) r.fail("--embed-cubin " + spec, "expected NAME=FILE");
    add_embed(r, m, "--embed-cubin " + spec, spec.substr(0, eq), spec.substr(eq + 1));
  }
  if (cli.cxx_launcher) {
    m.cxx_launcher = util::split_any(*cli.cxx_launcher, " \t\n");
    m.cxx_launcher_source = "--cxx-launcher";
  }
  if (cli.cuda_launcher) {
    m.cuda_launcher = util::split_any(*cli.cuda_launcher, " \t\n");
    m.cuda_launcher_source = "--cuda-launcher";
  }
  if (m.name.empty() && !m.sources.empty()) {
    std::string stem = util::file_name(m.sources.front());
    stem = stem.substr(0, stem.rfind('.'));
    if (auto ok = check_module_name(stem); !ok)
      r.fail("--name", "the module is named after the first source, but its " + ok.why() + ": pass --name NAME");
    m.name = stem;
  }
  check_combination(m, &cli);
  if (m.name.empty()) r.fail("--name", "required: pass --name NAME (or give a manifest with \"name\")");
}

}  // namespace tvmffi_jit::compile
