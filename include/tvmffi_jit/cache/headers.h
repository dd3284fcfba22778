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

// For an entry that comes from elsewhere (a remote, an import): re-hashes
// every header whatever its `stat` says (a stat from another machine, or
// planted in a blob, vouches for nothing), and sets each `stat` to the one the
// file was hashed with when it is trusted (as hash_headers records it), so the
// adopted entry's local hits skip the re-hash as a local build's do.
std::optional<std::string> verify_headers_recording_stats(std::vector<HeaderRecord>& headers);

constexpr int64_t kTrustedStatAgeSeconds = 2;

// Merges header lists, keeping the first record of each path.
void merge_headers(std::vector<HeaderRecord>& into, const std::vector<HeaderRecord>& more);

}  // namespace tvmffi_jit::cache
