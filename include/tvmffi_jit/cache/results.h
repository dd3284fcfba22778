// Several results per module key (ccache's "manifest" model; docs/cache.md,
// "Layout").
//
// A module key covers what is known before compiling (sources, flags,
// environment, compilers, tvm-ffi, archs). What the build then read (headers,
// the libraries the linker took) is only known afterwards, so one key can
// have several valid results: one per revision of the headers it was built
// against. Each result is an entry (cache/entry.h) in a directory of its own,
// named by its result id, a digest of its content:
//
//   <root>/<name>_<key16>/            the key's directory
//       <result16>/entry.json         one result: what it was built against
//       <result16>/<name>.so          its artifact, never rewritten in place
//
// so the artifact path a build returns names one artifact for good: another
// build of other content gets another directory, and a process that loaded
// the old path keeps its mapping, while a loader asked for the new path maps
// the new code. The key's directory is the list of its results: a result
// appears by one rename() of a complete staging directory, so concurrent
// publishers never lose or corrupt one; the least recently used beyond
// kMaxResultsPerKey are unlinked (never truncated) after a publish.
//
// A remote has no directory listing: there each result is an object of its
// own, "<key>.<result id>" (immutable, verified against its id when read),
// and "<key>" holds a result list (ResultList below): only a hint, read with
// a size cap, whose every entry is verified, and merged on write, so two
// writers at once lose at most a hint, never a result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::cache {

// Results kept per key, locally and in a remote's result list.
inline constexpr size_t kMaxResultsPerKey = 8;
// Result directories read from one key directory: a directory holding more
// (planted, or left by a crash loop) is read in name order up to this many.
inline constexpr size_t kMaxResultDirsRead = 64;
// A remote result list is read with this cap (8 ids are ~600 bytes).
inline constexpr uint64_t kMaxResultListBytes = 16u << 10;

// The result id (64 hex): SHA-256 over the artifacts (file names and
// digests) and the recorded inputs (each header or linked file: its path,
// relative to the entry's base dir where it lies under it, and its digest).
// Independent of the checkout's path and of machine-local stats, so a
// result keeps its id on every machine and through a remote.
std::string result_id(const EntryRecord& entry);
// The directory name of a result inside its key's directory: 16 hex digits.
std::string result_dir_name(const std::string& result_id);
bool is_result_dir_name(std::string_view name);

// The result directories in `key_dir` (names of result_dir_name()'s shape,
// real directories, never symlinks), most recently used first (directory
// mtime, set on publish and on every hit). At most kMaxResultDirsRead.
struct ResultDir {
  std::string path;
  int64_t last_used_ns = 0;
};
std::vector<ResultDir> list_result_dirs(const std::string& key_dir);

// What tells the results of one key apart: usually the one header that
// changed between them. Beside each result's entry.json, ".distinct-inputs"
// (a dot name no artifact can have) holds its recorded inputs that another
// result of the key recorded otherwise, as publishing found them (each
// publish adds the new result's differences to itself and to every other
// result). A lookup checks those few files first and passes over a result
// built against other headers without parsing its entry.json or walking the
// hundreds of headers all results share. Only a shortcut to a miss: a
// result whose distinct inputs match still passes the full lookup, and a
// missing, stale or malformed file only costs that full lookup.
inline constexpr const char* kDistinctInputsName = ".distinct-inputs";
inline constexpr uint64_t kMaxDistinctInputsBytes = 64u << 10;
// Records `published` (just published in `key_dir` as `published_dir`)
// against the key's other results, both ways. Failures are ignored.
void note_distinct_inputs(const std::string& key_dir, const std::string& published_dir, const EntryRecord& published);
// The distinct inputs of the result in `result_dir`; empty when there are
// none, or the file is missing, too big or malformed.
std::vector<HeaderRecord> read_distinct_inputs(const std::string& result_dir);

// The remote's per-key list of result ids, most recently stored first.
struct ResultList {
  std::string key;                  // the portable key it indexes
  std::vector<std::string> result_ids;  // 64 hex each, at most kMaxResultsPerKey
};
// Why not for anything but a well-formed list of `key`: too big, not JSON,
// another key, a malformed id. Ids beyond kMaxResultsPerKey are dropped,
// duplicates merged.
Expected<ResultList> parse_result_list(std::string_view text, const std::string& key);
std::string result_list_text(const ResultList& list);
// `id` first, then the ids of `old` (when it is a list of the same key)
// without it, at most kMaxResultsPerKey.
ResultList merge_result_list(const std::optional<ResultList>& old, const std::string& key, const std::string& id);

}  // namespace tvmffi_jit::cache
