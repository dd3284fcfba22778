#include "compile/manifest_values.h"

#include <climits>

#include <algorithm>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::compile {

namespace {

const std::vector<std::string> kSourceExtensions = {".c", ".cc", ".cpp", ".cxx", ".cu", ".hip", ".o"};

std::string in_quotes(std::string_view s) { return quote_for_message(s); }

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

Expected<void> check_function_name(std::string_view name) {
  if (!is_identifier(name))
    return Unexpected{"function name " + in_quotes(name) + " is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)"};
  return {};
}

}  // namespace

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
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

std::string resolve_manifest_path(const std::string& base_dir, const std::string& path) {
  if (!path.empty() && path[0] == '/') return util::absolute_path(path);
  return util::absolute_path(util::join_path(base_dir, path));
}

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

void add_function(const ManifestReader& r, Manifest& m, const std::string& pointer, const std::string& name,
                  const std::string& doc) {
  if (auto ok = check_function_name(name); !ok) r.fail(pointer, ok.why());
  if (r.function_names.size() != m.functions.size()) {
    r.function_names.clear();
    for (const auto& f : m.functions) r.function_names.insert(f.first);
  }
  if (!r.function_names.insert(name).second) r.fail(pointer, "duplicate function " + in_quotes(name));
  m.functions.emplace_back(name, doc);
}

void add_embed(const ManifestReader& r, Manifest& m, const std::string& pointer, const std::string& name,
               const std::string& given_path) {
  if (!is_identifier(name)) r.fail(pointer, "embed name " + in_quotes(name) + " is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)");
  if (r.embed_names.size() != m.embed_cubin.size()) {
    r.embed_names.clear();
    for (const auto& e : m.embed_cubin) r.embed_names.insert(e.name);
  }
  if (r.embed_names.count(name)) r.fail(pointer, "duplicate embed name " + in_quotes(name));
  if (given_path.empty()) r.fail(pointer, "empty path");
  std::string path = resolve_manifest_path(r.base_dir, given_path);
  if (auto ok = check_readable_file(given_path, path); !ok) r.fail(pointer, ok.why());
  r.embed_names.insert(name);
  m.embed_cubin.push_back({name, path});
}

Expected<GpuBackend> backend_value(const std::string& word) {
  auto b = parse_gpu_backend(word);
  if (!b) return Unexpected{"unknown backend " + in_quotes(word) + " (expected cuda or hip)"};
  return *b;
}

Expected<EmitKind> emit_value(const std::string& word) {
  auto kind = parse_emit_kind(word);
  if (!kind) return Unexpected{"unknown emit kind " + in_quotes(word) + " (expected module, object, cubin, fatbin or ptx)"};
  return *kind;
}

Expected<DeviceCompiler> compiler_value(const std::string& word) {
  auto c = parse_device_compiler(word);
  if (!c) return Unexpected{"unknown compiler " + in_quotes(word) + " (expected nvcc or nvrtc)"};
  return *c;
}

}  // namespace tvmffi_jit::compile
