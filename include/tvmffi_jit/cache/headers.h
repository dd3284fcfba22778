// The headers a compile read, recorded after a build and re-checked on every
// lookup (ccache's "direct mode"): a missing or changed one makes the entry a
// miss. A header is re-hashed unless its stat -- device, inode, mtime and
// ctime in nanoseconds -- equals the one recorded with its hash; the stat is
// recorded only for a file whose mtime and ctime were at least
// kTrustedStatAgeSeconds old when it was hashed, so a later write (which
// moves ctime, and which no one can set back) cannot hide inside the
// timestamp granularity. Skipping the re-hash of the ~360 toolkit headers a
// CUDA unit reads is what keeps a CUDA hit within a few milliseconds.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tvmffi_jit/cache/entry.h"

namespace tvmffi_jit::cache {

// The prerequisites of a Make-style depfile as gcc/clang (-MD -MF) and nvcc
// (-MD -MF / --generate-dependencies-with-compile --dependency-output) write
// it: every target's dependency list, with backslash-newline continuations,
// `\ ` escaped spaces and `$$` unescaped, in order, without duplicates.
std::vector<std::string> parse_depfile(std::string_view text);

// Hashes the given files (absolute paths, relative ones resolved against
// `base_dir`), skipping any under one of `exclude_dirs` (the build's own
// generated files, whose content is already in the key) and any equal to one
// of `exclude_files` (the translation unit itself). Throws Error(kIo) if a
// header cannot be read: a depfile naming a file that is gone means the
// build raced with an edit, and recording it would be wrong.
std::vector<HeaderRecord> hash_headers(const std::vector<std::string>& paths, const std::string& base_dir,
                                       const std::vector<std::string>& exclude_dirs,
                                       const std::vector<std::string>& exclude_files);

// Re-hashes recorded headers; nullopt when all match, else the first
// mismatch ("/abs/h.h changed", "/abs/h.h is gone").
std::optional<std::string> check_headers(const std::vector<HeaderRecord>& headers);

// Digests of headers this cache root has hashed, by path, each with the
// trusted stat it was hashed with: <root>/toolchain/header-digests. An entry
// from elsewhere (a remote, an import) lists the ~360 toolkit headers its
// compile read; a header whose stat is still the one recorded here is not
// re-hashed (the rule an entry's own header stats follow), so a remote hit
// into a root that has seen those headers costs no hashing. A memo: a
// missing, damaged or oversized file is empty, and concurrent writers may
// lose each other's additions (they are re-learnt).
class HeaderDigestMemo {
 public:
  static std::string path_in(const std::string& root) { return root + "/toolchain/header-digests"; }
  explicit HeaderDigestMemo(std::string path) : path_(std::move(path)) {}
  // The record for `path` (read from the file on first use), or nullptr.
  const HeaderRecord* find(const std::string& path);
  // Adds the records that carry a trusted stat and rewrites the file
  // atomically when that changed it (errors are ignored: it is a memo).
  void remember(const std::vector<HeaderRecord>& headers);

 private:
  void load();
  std::string path_;
  bool loaded_ = false;
  std::vector<HeaderRecord> records_;  // sorted by path
};

// For an entry that comes from elsewhere (a remote, an import): checks every
// header against the file here whatever its `stat` says (a stat from another
// machine, or planted in a blob, vouches for nothing) -- by hashing it, or by
// `memo` when the file's stat is the one recorded there with the same digest
// -- and sets each `stat` to the trusted one it was checked with (as
// hash_headers records it), so the adopted entry's local hits skip the
// re-hash as a local build's do.
std::optional<std::string> verify_headers_recording_stats(std::vector<HeaderRecord>& headers,
                                                          HeaderDigestMemo* memo = nullptr);

constexpr int64_t kTrustedStatAgeSeconds = 2;

// Merges header lists, keeping the first record of each path.
void merge_headers(std::vector<HeaderRecord>& into, const std::vector<HeaderRecord>& more);

}  // namespace tvmffi_jit::cache
