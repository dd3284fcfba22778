// The headers a compile read, recorded after a build and re-checked on every
// lookup (ccache's "direct mode"): a missing or changed one makes the entry a
// miss. A header is re-hashed unless its stamp -- device, inode, mtime and
// ctime in nanoseconds -- equals the one recorded with its hash; the stamp is
// recorded only for a file whose mtime and ctime were at least
// kTrustedStatAgeSeconds old when it was hashed, so a later write (which
// moves ctime, and which no one can set back) cannot hide inside the
// timestamp granularity (cache/proof.h has the whole rule, shared with the
// entry's artifacts). Skipping the re-hash of the ~360 toolkit headers a
// CUDA unit reads is what keeps a CUDA hit within a few milliseconds.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::cache {

struct Rehashed;  // cache/proof.h

// Digests of big files (libraries the linker read, huge headers) remembered
// per machine in <root>/digests/, by path and stat under the same rule as a
// record's stat: a record without a stat of its own (an entry adopted from a
// remote, which never carries one) is checked against the memo instead of
// re-hashing, so libc, libstdc++, libcudart and libtvm_ffi (12.8 MB for the
// README CUDA example) are hashed once per machine, not once per adopted
// entry. Files under kMemoMinBytes are re-hashed: reading a memo costs more.
struct DigestMemo {
  std::string dir;        // <root>/digests; empty: no memo
  bool writable = false;  // record new digests (builds, adoption); lookups only read
};
inline constexpr uint64_t kMemoMinBytes = 256 << 10;

// Hashes the given files (absolute paths, relative ones resolved against
// `base_dir`), skipping any under one of `exclude_dirs` (the build's own
// generated files, whose content is already in the key) and any equal to one
// of `exclude_files` (the translation unit itself). Throws Error(kIo) if a
// header cannot be read: a depfile naming a file that is gone means the
// build raced with an edit, and recording it would be wrong.
std::vector<HeaderRecord> hash_headers(const std::vector<std::string>& paths, const std::string& base_dir,
                                       const std::vector<std::string>& exclude_dirs,
                                       const std::vector<std::string>& exclude_files, const DigestMemo& memo = {});

// Re-hashes recorded headers and looks for their shadows: a value when all
// match and no shadow exists, else the first mismatch ("/abs/h.h changed",
// "/abs/h.h is gone", "/abs/inc1/h.h now shadows /abs/inc2/h.h").
// `rehashed` (may be null) counts the files re-read.
Expected<void> check_headers(const std::vector<HeaderRecord>& headers, const DigestMemo& memo = {},
                             Rehashed* rehashed = nullptr);

// check_headers() that also records, for each file it re-hashed and found
// unchanged, the stat of what it hashed (under the same age rule as
// hash_headers): an entry adopted from a remote or an import carries no
// stats, and without this every later hit would re-hash its headers and
// link inputs (12.8 MB for the README CUDA example) again.
// A lookup restamps the records of its own copy of an entry this way and,
// when any stamp changed, rewrites entry.json (Store::lookup).
// `workers` > 1: the records are checked on that many threads (an adopted
// entry, which carries no stamps: every file is hashed); the mismatch
// reported is then one of them, not always the first in record order.
Expected<void> check_and_stamp_headers(std::vector<HeaderRecord>& headers, const DigestMemo& memo = {},
                                       Rehashed* rehashed = nullptr, int workers = 1);

constexpr int64_t kTrustedStatAgeSeconds = 2;

// Merges header lists, keeping the first record of each path, with the
// shadows of every record of that path (units search different directories).
void merge_headers(std::vector<HeaderRecord>& into, const std::vector<HeaderRecord>& more);

}  // namespace tvmffi_jit::cache
