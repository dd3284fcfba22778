// How a lookup proves that a file an entry recorded -- an artifact of the
// entry, a header or library the build read -- still has the recorded
// content, at the cost of a stat when nothing changed (docs/cache.md, "What
// a hit proves").
//
// The record holds the size, the SHA-256 and, when it was old enough to
// trust, the full stamp of the descriptor that was hashed (util/stamp.h). A
// lookup stats the file; on a filesystem with local fine-grained timestamps
// an equal stamp is the proof. Otherwise, once per changed stamp:
//   1. the per-process memo of digests proven by hashing
//      (util::ProvenDigests), then
//   2. the root's memo of big files' digests (DigestMemo, cache/headers.h),
//   3. else the file is re-hashed through one descriptor, its stamp taken by
//      fstat of that descriptor before reading. Equal content: the new stamp,
//      when settled, is returned for the caller to record (and the process
//      memo keeps it); other content: a miss with its reason.
// A missing, malformed or foreign recorded stamp is just another stamp that
// does not match: one re-hash, then a new stamp. Never a hit without a
// check, never an error.
#pragma once

#include <cstdint>
#include <string>

#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::cache {

// What lookups re-read: reported by `build --json` ("rehashed") and kept as
// totals by `cache stats`.
struct Rehashed {
  uint64_t files = 0;      // files re-hashed (their stamp did not prove them)
  uint64_t bytes = 0;      // bytes read doing so
  uint64_t restamped = 0;  // records given a new stamp (the entry is worth rewriting)
  void add(const Rehashed& o) {
    files += o.files;
    bytes += o.bytes;
    restamped += o.restamped;
  }
};

enum class FileProblem {
  kNone,        // the recorded content is there
  kMissing,     // cannot be stat'ed
  kNotRegular,  // a directory, FIFO, device (or, not following symlinks, a symlink)
  kSize,        // another size (decisive on its own)
  kContent,     // same size, another SHA-256
  kUnreadable,  // could not be opened or read
};

struct FileCheck {
  FileProblem problem = FileProblem::kNone;
  uint64_t found_size = 0;  // the size found (kSize)
  std::string detail;       // why it could not be read (kUnreadable)
  // With kNone: the settled stamp to record in place of the recorded one
  // (a re-hash or a proven digest found the content equal under a new
  // stamp); empty when the recorded stamp stands or none can be trusted yet.
  std::string new_stat;
};

struct FileCheckOptions {
  // Headers are read through symlinks, as the compiler opened them;
  // artifacts never are (a symlink planted in an entry is not served).
  bool follow_symlinks = true;
  // false: re-hash whatever the stamp says (`build --verify`, `cache
  // verify`, object lookups, the occupant check of a publish).
  bool use_stamps = true;
  DigestMemo memo;  // the root's big-file digest memo (empty: none)
};

// Checks `path` against (size, sha256, recorded stamp text), counting what
// it re-hashed into `rehashed` (may be null).
FileCheck check_recorded_file(const std::string& path, uint64_t size, const std::string& sha256,
                              const std::string& recorded_stat, const FileCheckOptions& options, Rehashed* rehashed);

// What hash_file_stamped() read.
struct HashedFile {
  uint64_t size = 0;
  std::string sha256;
  std::string stat;  // the stamp text taken before reading; empty unless settled and trusted
};
// Hashes `path` through one descriptor (never blocking on a FIFO; with
// !follow_symlinks never through a symlink): its size, SHA-256 and the stamp
// text of the descriptor taken before reading, empty unless settled and on a
// filesystem whose stamps are trusted. Why not when it cannot be opened or
// read, or is not a regular file.
Expected<HashedFile> hash_file_stamped(const std::string& path, bool follow_symlinks);

// The root's digest memo (cache/headers.h, DigestMemo): the digest
// remembered for `path` at stamp text `stat` and `size`, or "".
std::string memo_digest(const DigestMemo& memo, const std::string& path, const std::string& stat, uint64_t size);
void remember_digest(const DigestMemo& memo, const std::string& path, const std::string& stat, uint64_t size,
                     const std::string& sha256);

}  // namespace tvmffi_jit::cache
