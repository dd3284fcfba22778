// Path-independent ("portable") keys and entries, for the remote tier and
// `cache export`/`import`: a second checkout of a project at another path,
// on another machine, must find what the first one built.
//
// The base directory is the project's root as far as the cache is concerned:
// `--base-dir`, else the manifest's directory, else the current directory.
// Paths under it enter the portable key as "<base>/relative/path"; paths
// outside it (system headers, a tvm-ffi installation) stay absolute, so they
// must be the same on every machine that shares entries. Header records keep
// the same split: relative to the base in a portable entry, re-rooted under
// the reader's base before they are re-hashed. Include resolution only
// depends on where files are relative to each other, and every header a
// compile read is re-hashed where the hit happens, so a portable hit is as
// safe as a local one.
//
// Local entries stay per folder: the local key is hash(portable key, base),
// so two checkouts on one machine never share (or evict) an entry, and only
// the remote/export form drops the base (docs/remote.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tvmffi_jit::cache {

inline constexpr const char* kBaseMarker = "<base>";

// Rewriting of absolute paths under `base` (absolute, lexically normal; empty
// means "rewrite nothing"). Its canonical form (symlinks resolved) is
// recognised too: compilers report headers either way. Paths only: what a
// compiler argument or a generated source holds is the compile layer's to
// rewrite (compile/portable_args.h), over portable_path().
class BaseDir {
 public:
  BaseDir() = default;
  explicit BaseDir(const std::string& base);
  const std::string& path() const { return base_; }
  // The base with its symlinks resolved, when that differs from path();
  // else empty.
  const std::string& canonical() const { return canonical_; }
  bool empty() const { return base_.empty(); }

  // A path field: "/base/x/y" -> "<base>/x/y", "/base" -> "<base>"; others unchanged.
  std::string portable_path(const std::string& path) const;
  // A header path for a portable entry: relative to the base when under it,
  // else absolute.
  std::string relative_header(const std::string& absolute) const;
  // Back: relative header paths are joined onto the base.
  std::string absolute_header(const std::string& recorded) const;

 private:
  std::string base_;
  std::string canonical_;  // empty when equal to base_
};

// The local key of a build: its portable key bound to where it was built.
std::string local_key_hex(const std::string& portable_hex, const std::string& base_dir);

// entry.json (as JSON, every field kept) in local form <-> portable form:
//   portable: "key" = portable key, header paths under the base relative,
//             no "base_dir"
//   local:    "key" = local key for `base`, header paths absolute,
//             "base_dir" = base
// Throws Error(kIo) when the entry lacks "portable_key" (built by an older
// version, or not a module entry) or a header path is not a string.
nlohmann::json entry_to_portable(const nlohmann::json& local_entry);
nlohmann::json entry_from_portable(const nlohmann::json& portable_entry, const BaseDir& base);

}  // namespace tvmffi_jit::cache
