// doctor's cache root: where it is, what it holds, and whether a build
// could use it (cli/doctor_probes.h).
#include <unistd.h>

#include <string>

#include "doctor_probes.h"
#include "tvmffi_jit/cache/maintenance.h"
#include "tvmffi_jit/cli/environment.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {
using nlohmann::json;
}  // namespace

json probe_cache(const DoctorOptions& options, const cache::RootEnvironment& root_env) {
  json c = doctor_component("cache");
  std::string root;
  try {
    root = cache::resolve_root_path(options.cache_dir, root_env);
  } catch (const Error& e) {
    mark_missing(c, e.what(), "set TVMFFI_JIT_CACHE_DIR or HOME, or pass --cache-dir DIR");
    return c;
  }
  c["path"] = root;
  c["root"] = root;
  c["exists"] = util::is_directory(root);
  c["size_bytes"] = 0;
  c["files"] = 0;
  c["entries"] = 0;
  c["module_entries"] = 0;
  c["object_entries"] = 0;
  c["writable"] = false;
  if (!util::is_directory(root)) {
    // Not an error: the first build creates it. Writable if the nearest existing parent is.
    std::string parent = root;
    while (!parent.empty() && parent != "/" && !util::is_directory(parent)) parent = util::parent_path(parent);
    const bool can_create = ::access(parent.empty() ? "/" : parent.c_str(), W_OK | X_OK) == 0;
    c["writable"] = can_create;
    if (can_create) {
      c["found"] = true;
      c["version"] = "not created yet";
    } else {
      mark_missing(c, root + " does not exist and " + parent + " is not writable",
                   "set TVMFFI_JIT_CACHE_DIR (or pass --cache-dir) to a writable directory");
    }
    return c;
  }
  const cache::CacheSummary s = cache::summarize_cache(root);
  c["size_bytes"] = s.total_bytes;
  c["size"] = util::format_bytes(s.total_bytes);
  c["files"] = s.total_files;
  c["entries"] = s.module_entries + s.object_entries;
  c["module_entries"] = s.module_entries;
  c["object_entries"] = s.object_entries;
  // The same checks a build makes before using the root (ownership, mode,
  // a write probe), so doctor says what the build would refuse.
  cache::CacheRoot opened;
  try {
    opened = cache::open_root(cache_root_to_open(root, root_env), false);
  } catch (const Error& e) {
    mark_missing(c, e.what(), "pick a directory of your own with TVMFFI_JIT_CACHE_DIR or --cache-dir");
    return c;
  }
  c["writable"] = opened.writable;
  if (opened.writable) {
    c["found"] = true;
    c["version"] = std::to_string(s.module_entries + s.object_entries) + " entries, " + util::format_bytes(s.total_bytes);
  } else {
    mark_missing(c, opened.unwritable_why + ": builds work but nothing is cached",
                 "fix the permissions of " + root + " or set TVMFFI_JIT_CACHE_DIR to a writable directory");
  }
  return c;
}

}  // namespace tvmffi_jit::cli
