// Listing, verifying and evicting cache entries (`tvmffi-jit cache ...`).
//
// Everything here works on lstat() results and renames entries out of the
// way before deleting them: symlinks inside the root are never followed,
// and a concurrent reader sees an entry whole or not at all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/cache/trust.h"

namespace tvmffi_jit::cache {

// A module result (cache/results.h), an object entry, or a module entry of
// the layout before results (format 3: entry.json directly in
// <name>_<key16>/), which builds no longer read and maintenance removes.
struct EntryInfo {
  std::string dir;       // absolute
  std::string dir_name;  // "<name>_<key16>/<result16>", for objects the full key; old layout: "<name>_<key16>"
  std::string key_dir;   // module results: their key's directory (absolute); else empty
  bool is_object = false;
  bool is_symlink = false;
  std::optional<EntryRecord> entry;  // nullopt when entry.json is missing or malformed
  // entry.json (of any format version) names this directory as an entry
  // tvmffi-jit wrote: the only entries clean, gc and verify --remove delete.
  bool ours = false;
  std::string problem;               // why `entry` is nullopt
  uint64_t bytes = 0;                // sum of the regular files in the directory
  int64_t last_used = 0;             // unix seconds (directory mtime: set on publish and on every hit)
};

// Module results first (sorted by key directory name, then most recently
// used first), then objects when asked for.
std::vector<EntryInfo> list_entries(const std::string& root, bool include_objects);

// Entries whose directory name ("<name>_<key16>" selects all of the key's
// results, "<result16>" or "<name>_<key16>/<result16>" one), module name or
// key (prefix of >= 4 hex digits) matches.
std::vector<EntryInfo> find_entries(const std::string& root, const std::string& name_or_key);

// The size of a cache, as `cache stats` and `doctor` report it: the entries
// list_entries() finds and their bytes, and every regular file under the root
// (staging dirs, locks, memos and counters included). Walks without following
// symlinks, at most 16 levels deep.
struct CacheSummary {
  uint64_t module_entries = 0;  // results (cache/results.h)
  uint64_t module_keys = 0;     // key directories holding them
  uint64_t object_entries = 0;
  uint64_t module_bytes = 0;
  uint64_t object_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t total_files = 0;
};
CacheSummary summarize_cache(const std::string& root);

struct VerifyProblem {
  std::string dir;
  std::string problem;
  bool removed = false;
  std::string kept_why;  // with --remove: why it was not removed (not recognisably ours)
};

struct VerifyReport {
  size_t checked = 0;
  std::vector<VerifyProblem> problems;
};

// Re-hashes every artifact of every entry (modules and objects) against
// entry.json. A module linked from a bad object is bad too: it records each
// object's key and digest when linked, and if that digest is the object's
// recorded one or its current (corrupt) one, the module may hold the corrupt
// bytes (docs/cache.md, "What the cache promises"). With `remove`, bad
// entries that tvmffi-jit wrote are removed (EntryInfo::ours); anything
// else is reported and left alone.
// With `policy` (`cache verify --trusted-key`), a module entry the trust
// policy refuses (cache/trust.h: adopted without a trusted signature) is bad too.
VerifyReport verify_cache(const Store& store, bool remove, const TrustPolicy* policy = nullptr);

struct CleanReport {
  size_t entries_removed = 0;
  uint64_t bytes_removed = 0;
  size_t temporaries_removed = 0;  // abandoned staging dirs and trash
  uint64_t bytes_kept = 0;
};

// Removes entries (only those EntryInfo::ours) last used more than
// `older_than_seconds` ago (all when nullopt), the file digest memo with them
// when removing everything, and abandoned staging directories of the names
// Store creates (their process is gone, or they are older than a day, or than
// `older_than_seconds`). The caller checks the root is marked
// (require_marked_root). What others keep in the root is theirs to clean:
// `cache clean` removes the compiler identity memos in
// Store::compilers_dir() through toolchain::remove_identity_memos().
CleanReport clean_cache(const Store& store, std::optional<int64_t> older_than_seconds);

// Removes least recently used entries (only those EntryInfo::ours) until they
// total at most `max_bytes`, and abandoned staging directories.
CleanReport gc_cache(const Store& store, uint64_t max_bytes);

}  // namespace tvmffi_jit::cache
