// The content-addressed store: lookup, per-key lock, staging, publish.
//
// Publishing protocol (correct without any lock, e.g. on NFS):
//   1. build into a private staging dir <root>/tmp/stage.<host>.<pid>.<rand>/
//   2. move the artifacts into <staging>/entry/, write entry.json there
//   3. rename(<staging>/entry, <root>/<name>_<key16>) — one atomic step
//   4. if the target already exists and is a valid entry for this key,
//      another process won: discard ours and use theirs. If it exists but
//      is broken or stale (artifact missing/wrong size, headers changed), it
//      is first renamed into tmp/ (atomic disappearance), then removed, and
//      the publish retried.
// The per-key flock only keeps concurrent identical builds from all running
// the compiler; waiting is bounded and names the holder's pid.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/lock.h"

namespace tvmffi_jit::cache {

// What a lookup checks beyond entry.json, the full key, each listed
// artifact's presence and size, and the recorded headers.
struct LookupOptions {
  // Artifacts of at most this many bytes are re-hashed against their
  // recorded SHA-256 (0: sizes only; kVerifyAll: every artifact).
  uint64_t verify_digest_up_to = 0;
  // Files the caller is going to use: each must be listed in entry.json, or
  // the entry is a (corrupt) miss.
  std::vector<std::string> required_artifacts;
};
inline constexpr uint64_t kVerifyAll = ~uint64_t{0};

// A module artifact served on a hit is re-hashed when it is at most this big
// (build --verify: always). Chosen from bench/cache/run.sh (docs/cache.md,
// "What the cache promises"): SHA-256 ran at 0.6-1.1 GB/s on the loaded
// 2-core machine, so the largest module re-hashed adds at most ~4-7 ms to a
// hit, while the README example's 57 KB module adds ~0.05 ms.
inline constexpr uint64_t kVerifyOnHitMaxBytes = 4ull << 20;

struct LookupResult {
  bool hit = false;
  std::string entry_dir;
  std::optional<EntryRecord> entry;  // when hit (and when a readable entry was found but rejected)
  std::string miss_reason;           // "absent", "artifact x.so has 12 bytes, entry.json says 99", ...
  bool corrupt = false;              // an entry existed but was unusable (not just absent or stale headers)
  std::string artifact_path(size_t i = 0) const;
  // The path of the artifact named `file` if entry.json lists it, else "".
  std::string artifact_path(const std::string& file) const;
};

// Why `a` (listed in the entry at `entry_dir`) cannot be served: missing, not
// a regular file, another size, or (with `check_digest`) another SHA-256.
// nullopt when it is intact.
std::optional<std::string> check_artifact(const std::string& entry_dir, const ArtifactRecord& a, bool check_digest);

// A private build directory under <root>/tmp, removed on destruction unless
// published or kept.
// The file Staging::keep() leaves in a staging dir kept for the user.
inline constexpr const char* kStagingKeptMarker = "kept";

class Staging {
 public:
  Staging(Staging&&) noexcept = default;
  Staging& operator=(Staging&&) noexcept = default;
  const std::string& path() const { return dir_.path(); }
  std::string build_dir() const;  // <staging>/build: give this to the executor
  std::string entry_dir() const;  // <staging>/entry: what gets renamed
  // Keeps the directory for the user (a failed build's, whose command can be
  // re-run there), marked with kStagingKeptMarker: a later build leaves it,
  // `cache gc` removes it once this process is gone.
  void keep();
  // When a build cannot be published (a source changed during it, the
  // filesystem is full...), its artifact must not be served from here: `cache
  // gc` removes the staging dir once this process is gone. Moves the artifact
  // (at `built_path`, or already moved into entry_dir() by a failed publish)
  // into a new directory outside the root, `$TMPDIR/tvmffi-jit-<label>-XXXXXX`,
  // which belongs to the caller (tvmffi-jit never deletes it), and returns
  // its new path. Throws Error(kIo) saying both failures if it cannot.
  std::string move_artifact_out(const std::string& built_path, const std::string& file_name,
                                const std::string& label) const;

 private:
  friend class Store;
  explicit Staging(util::TempDir dir) : dir_(std::move(dir)) {}
  util::TempDir dir_;
};

struct PublishResult {
  std::string entry_dir;  // the published entry (ours or the winner's)
  EntryRecord entry;
  bool ours = false;      // false: another process published a valid entry first
};

class Store {
 public:
  explicit Store(CacheRoot root);
  const std::string& root() const { return root_.path; }
  bool writable() const { return root_.writable; }
  bool marked() const { return root_.marked; }  // carries tvmffi-jit's root markers (cache/root.h)
  // Probes the root if it was opened without probing (open_root); returns writable().
  bool check_writable();
  const std::string& unwritable_why() const { return root_.unwritable_why; }

  std::string module_entry_dir(const std::string& name, const std::string& key_hex) const;
  std::string object_entry_dir(const std::string& key_hex) const;
  std::string compilers_dir() const;
  // <root>/digests (cache/headers.h): read by lookups, written by builds and
  // adoptions when the root is writable.
  DigestMemo digest_memo(bool record) const;
  std::string tmp_dir() const;
  std::string locks_dir() const;

  // Reads entry.json, checks the full key, every listed artifact (present,
  // regular, recorded size; digest as `options` say), the required artifact
  // names and the recorded headers. On a hit, marks the entry used (its
  // directory mtime, for gc ordering only).
  LookupResult lookup(const std::string& entry_dir, const std::string& key_hex,
                      const LookupOptions& options = {}) const;

  // Per-entry lock; see util/lock.h. `what` goes into the holder line.
  util::FileLock lock(const std::string& entry_dir, const std::string& what, double timeout_seconds) const;

  // A fresh staging dir. Throws Error(kIo) if it cannot be created.
  Staging stage() const;

  // Moves `files` ((source path, file name in the entry)) into the staging
  // entry dir, fills in artifact sizes and hashes and the format fields of
  // `record`, writes entry.json and renames into `entry_dir`. An occupant of
  // `entry_dir` is kept only if it passes a lookup with every digest checked.
  // Throws Error(kIo) if publishing fails; the files may then already be in
  // the staging entry dir, which is the caller's to move out of the root
  // (a staging dir is removed by `cache gc` once its process is gone).
  PublishResult publish(Staging& staging, const std::string& entry_dir, EntryRecord record,
                        const std::vector<std::pair<std::string, std::string>>& files) const;

  // Publishes a staging entry dir that already holds its files and a
  // complete entry.json (a verified remote or imported entry): the same
  // rename protocol as publish(). `record` is that entry.json, parsed.
  PublishResult publish_prepared(Staging& staging, const std::string& entry_dir, EntryRecord record) const;

  // Makes an entry disappear atomically (rename into tmp/), then deletes it.
  // Never follows symlinks. Returns false if there was nothing to remove.
  bool remove_entry(const std::string& entry_dir) const;

  void count(const StatsCounters& delta) const;

 private:
  PublishResult commit(Staging& staging, const std::string& entry_dir, EntryRecord record) const;
  CacheRoot root_;
};

}  // namespace tvmffi_jit::cache
