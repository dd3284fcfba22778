// The cache root: where it is, and whether it is safe and writable.
//
// Layout under the root:
//   <name>_<key16>/            module entries (artifact files + entry.json)
//   objects/<kk>/<key>/        per-translation-unit objects (object file + entry.json)
//   compilers/<hash>.json      compiler identity memo (cache/compiler_identity.h)
//   locks/<entry>.lock         per-key flock files (duplicate-work avoidance only)
//   tmp/                       private staging dirs, published by one rename
//   stats.json, stats.log      counters: folded totals and journal (cache/stats.h)
//   stats.lock                 taken while folding the journal
#pragma once

#include <string>
#include <string_view>

namespace tvmffi_jit::cache {

// --cache-dir, else $TVMFFI_JIT_CACHE_DIR, else $XDG_CACHE_HOME/tvmffi-jit,
// else ~/.cache/tvmffi-jit. Returned absolute (lexically), not resolved.
std::string resolve_root_path(const std::string& cli_value);

struct CacheRoot {
  std::string path;            // absolute
  bool writable = false;       // false: lookups still work, stores are skipped
  bool write_probed = false;   // false: `writable` is assumed, not yet tried
  std::string unwritable_why;  // for the warning
};

// Opens the root. With `create`, a missing root is created (mode 0700,
// parents included). Throws Error(kIo, exit 5) when the root is not a
// directory, is not owned by the current user, or is writable by group or
// others: a shared-writable cache would let another user plant artifacts.
// A root that cannot be created or written is not an error: `writable` is
// false and the caller warns and builds elsewhere. Without `probe_write`
// writability is assumed until probe_root_writable() tries it: a cache hit
// writes nothing that matters, and creating and removing a probe file costs
// the hit a tenth of its time budget.
CacheRoot open_root(const std::string& path, bool create, bool probe_write = true);
// Creates and removes a file in the root; sets writable/unwritable_why.
void probe_root_writable(CacheRoot& root);

// The longest name is_valid_entry_name() accepts.
constexpr size_t kMaxEntryNameLength = 128;

// Names that may appear in a path under the root: [A-Za-z0-9_.-]{1,128},
// not starting with '.', so no name escapes the root or hides as a dotfile.
bool is_valid_entry_name(std::string_view name);
// Throws usage_error naming the problem.
void check_entry_name(std::string_view name);

}  // namespace tvmffi_jit::cache
