// What a manifest value must be, whether a key of a JSON manifest
// (compile/manifest.cpp) or a flag of the command line
// (compile/manifest_command_line.cpp) gives it: paths resolved and checked,
// names checked, duplicates refused, enum words parsed. Every failure is a
// ManifestError that points at the key or flag. Private to the compile layer.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::compile {

// ordered_json: "functions" and "embed_cubin" objects keep the order they were written in
// (the export lines follow it, as they follow a Python dict's insertion order).
using ManifestJson = nlohmann::ordered_json;

// RFC 6901 escaping of one reference token.
std::string pointer_token(std::string_view key);

// One manifest being read: where messages point, and where relative paths start.
struct ManifestReader {
  std::string where;
  std::string base_dir;
  // Names already in m.functions / m.embed_cubin, for duplicate checks that
  // stay linear (80,000 functions took 8.8 s with a scan per name). Seeded
  // from the manifest when a reader adds to one it did not start.
  mutable std::unordered_set<std::string> function_names = {}, embed_names = {};

  [[noreturn]] void fail(const std::string& pointer, const std::string& problem) const {
    throw ManifestError(where, pointer, problem);
  }

  [[noreturn]] void wrong_type(const std::string& pointer, const char* expected, const ManifestJson& got) const {
    fail(pointer, std::string("expected ") + expected + ", got " + got.type_name());
  }

  std::string string_value(const ManifestJson& j, const std::string& pointer, const char* expected = "a string") const {
    if (!j.is_string()) wrong_type(pointer, expected, j);
    return j.get<std::string>();
  }

  // An array of strings.
  std::vector<std::string> string_list(const ManifestJson& j, const std::string& pointer) const {
    if (!j.is_array()) wrong_type(pointer, "an array of strings", j);
    std::vector<std::string> out;
    for (size_t i = 0; i < j.size(); ++i) out.push_back(string_value(j[i], pointer + "/" + std::to_string(i)));
    return out;
  }

  // A string or an array of strings.
  std::vector<std::string> string_or_list(const ManifestJson& j, const std::string& pointer) const {
    if (j.is_string()) return {j.get<std::string>()};
    if (!j.is_array()) wrong_type(pointer, "a string or an array of strings", j);
    return string_list(j, pointer);
  }
};

// `path` made absolute, relative paths starting at `base_dir`.
std::string resolve_manifest_path(const std::string& base_dir, const std::string& path);

// Checks `resolved` names a file whose content can be read (util::can_read_content:
// missing, unreadable, a directory, a FIFO, a /proc pseudo-file); the problem
// names the path as given.
Expected<void> check_readable_file(const std::string& given, const std::string& resolved);

// A source of the manifest or the command line: a known type, readable, and
// not listed before (the same file twice would be compiled twice and fail to
// link with duplicate symbols; say so where the mistake is).
Expected<void> check_source(const Manifest& m, const std::string& given, const std::string& resolved);

// An include directory: present, a directory, a path the file system can hold.
Expected<void> check_include_dir(const std::string& given, const std::string& resolved);

// The module name becomes file and directory names (the cache entry
// <name>_<key>, <name>.so, the --no-cache temp dir), so it must fit the
// cache's entry-name rule; checked here, before anything is written.
Expected<void> check_module_name(std::string_view name);

// A function to export, its name checked and not exported twice.
void add_function(const ManifestReader& r, Manifest& m, const std::string& pointer, const std::string& name,
                  const std::string& doc);

// A cubin to embed as NAME: the name checked and not used twice, the file readable.
void add_embed(const ManifestReader& r, Manifest& m, const std::string& pointer, const std::string& name,
               const std::string& given_path);

// The words of --backend / "backend", --emit / "emit", --compiler / "compiler",
// or the problem that names what was expected.
Expected<GpuBackend> backend_value(const std::string& word);
Expected<EmitKind> emit_value(const std::string& word);
Expected<DeviceCompiler> compiler_value(const std::string& word);

}  // namespace tvmffi_jit::compile
