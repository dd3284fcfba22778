// The content-addressed store: lookup, per-key lock, staging, publish.
//
// Publishing protocol (correct without any lock, e.g. on NFS):
//   1. build into a private staging dir <root>/tmp/stage.<host>.<pid>.<rand>/
//   2. move the artifacts into <staging>/entry/, write entry.json there
//   3. rename(<staging>/entry, <target>) — one atomic step. A module's
//      target is a result directory named by its content,
//      <root>/<name>_<key16>/<result16> (cache/results.h); an object's is
//      <root>/objects/<k2>/<key>.
//   4. if the target already exists and is a valid entry for this key,
//      another process won: discard ours and use theirs (for a result: the
//      same content). If it exists but is broken (artifact missing/wrong
//      size or digest), it is first renamed into tmp/ (atomic
//      disappearance), then removed, and the publish retried.
//   5. a module key keeps at most kMaxResultsPerKey results: the least
//      recently used beyond it are renamed into tmp/ and removed (a process
//      that mapped one of their artifacts keeps its mapping).
// The per-key flock only keeps concurrent identical builds from all running
// the compiler; waiting is bounded and names the holder's pid.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/proof.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/lock.h"

namespace tvmffi_jit::cache {

// What a lookup checks beyond entry.json, the full key, each listed
// artifact's presence, size and content (proven by its stamp or re-hashed:
// cache/proof.h), and the recorded headers.
struct LookupOptions {
  // Re-hash every artifact whatever its stamp says (`build --verify`, object
  // lookups, the occupant check of a publish). Recorded headers keep the
  // stamp rule either way.
  bool rehash_artifacts = false;
  // Files the caller is going to use: each must be listed in entry.json, or
  // the entry is a (corrupt) miss.
  std::vector<std::string> required_artifacts;
  // Store::find_result(): why a result that holds is still refused (the trust
  // policy, cache/trust.h), or nullopt to take it. A refused result is
  // skipped and the next one tried.
  std::function<std::optional<std::string>(const EntryRecord&)> refuses;
  // Folders a package manager installs: the compiler's, the CUDA toolkit's
  // and tvm-ffi's (compile fills them in). A watched hit stats every
  // recorded input the calling user owns, as a write through a shared
  // mapping sends no inotify event; for root, who owns the whole system,
  // the inputs under these folders are left to the watch alone
  // (docs/cache.md, "Watched hits").
  std::vector<std::string> toolchain_dirs;
};

struct LookupResult {
  bool hit = false;
  std::string entry_dir;
  SharedEntry entry;                 // when hit (and when a readable entry was found but rejected)
  std::string miss_reason;           // "absent", "artifact x.so has 12 bytes, entry.json says 99", ...
  bool corrupt = false;              // an entry existed but was unusable (not just absent or stale headers)
  Rehashed rehashed;                 // what this lookup re-read (cache/proof.h)
  // A hit this process proved before, taken without a stat of its files:
  // nothing they depend on changed since, says inotify (util/change_watch.h).
  bool watched = false;
  // find_result(): results that held but LookupOptions::refuses refused:
  // (result dir, why).
  std::vector<std::pair<std::string, std::string>> refused;
  std::string artifact_path(size_t i = 0) const;
  // The path of the artifact named `file` if entry.json lists it, else "".
  std::string artifact_path(const std::string& file) const;
};

// Gives back the inotify watches of the results this process proved while
// watched and has not hit for `idle_ns` (a long process does this itself
// for those idle for 10 minutes); the number of proofs released.
size_t give_back_idle_watches(int64_t idle_ns);

// Why `a` (listed in the entry at `entry_dir`) cannot be served: missing, not
// a regular file (a symlink included), another size or another SHA-256,
// proven by its stamp unless `rehash` (cache/proof.h). A value when it is
// intact; then `new_stat` (may be null) gets the stamp to record in place of
// a.stat, or "" when it stands. `rehashed` (may be null) counts re-reads.
Expected<void> check_artifact(const std::string& entry_dir, const ArtifactRecord& a, bool rehash,
                              Rehashed* rehashed = nullptr, std::string* new_stat = nullptr);

// A private build directory under <root>/tmp, removed on destruction unless
// published or kept.
// The file Staging::keep() leaves in a staging dir kept for the user.
inline constexpr const char* kStagingKeptMarker = "kept";

class Staging {
 public:
  // A staging dir in `dir`, its build/ and entry/ made: Store::stage(), and
  // an EntryStorage with no store of its own (a test's fake). Throws
  // Error(kIo) if they cannot be made.
  static Staging create(util::TempDir dir);
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

// Whether an occupant found at the entry dir on publish (a valid entry for
// the key) may stay and answer instead of ours. Empty: it may. --force and
// the trust policy (cache/trust.h) say no, and the occupant is replaced.
using KeepOccupant = std::function<bool(const EntryRecord& occupant)>;

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

  // A module key's directory: its results live inside (cache/results.h).
  std::string module_key_dir(const std::string& name, const std::string& key_hex) const;
  std::string object_entry_dir(const std::string& key_hex) const;
  std::string compilers_dir() const;
  // <root>/digests (cache/headers.h): read by lookups, written by builds and
  // adoptions when the root is writable.
  DigestMemo digest_memo(bool record) const;
  std::string tmp_dir() const;
  std::string locks_dir() const;

  // Reads entry.json, checks the full key, every listed artifact (present,
  // regular, recorded size and content: cache/proof.h), the required
  // artifact names and the recorded headers. On a hit, marks the entry used
  // (its directory mtime, for gc ordering only) and, when it re-hashed files
  // and found them unchanged under new settled stamps, records those stamps
  // in entry.json (record_stamps) so that later hits re-hash nothing.
  LookupResult lookup(const std::string& entry_dir, const std::string& key_hex,
                      const LookupOptions& options = {}) const;

  // The module key's results (cache/results.h), most recently used first,
  // each through lookup(): the first hit answers. A miss says why (absent,
  // or the first result's reason and how many there were); `corrupt` when
  // one of them was unusable for another reason than its headers.
  LookupResult find_result(const std::string& key_dir, const std::string& key_hex,
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
                        const std::vector<std::pair<std::string, std::string>>& files,
                        const KeepOccupant& keep = {}) const;

  // publish() of a module result: into <key_dir>/<result16>, named by the
  // result id of the finished record, then the key's least recently used
  // results beyond kMaxResultsPerKey are removed (never the one published).
  PublishResult publish_result(Staging& staging, const std::string& key_dir, EntryRecord record,
                               const std::vector<std::pair<std::string, std::string>>& files,
                               const KeepOccupant& keep = {}) const;

  // Publishes a staging entry dir that already holds its files and a
  // complete entry.json (a verified remote or imported result) as a result
  // of `key_dir`: the same protocol as publish_result(). `record` is that
  // entry.json, parsed.
  PublishResult publish_prepared(Staging& staging, const std::string& key_dir, EntryRecord record,
                                 const KeepOccupant& keep = {}) const;

  // Makes an entry disappear atomically (rename into tmp/), then deletes it.
  // Never follows symlinks. Returns false if there was nothing to remove.
  bool remove_entry(const std::string& entry_dir) const;

  void count(const StatsCounters& delta) const;

  // Removes the least recently used results of `key_dir` beyond
  // kMaxResultsPerKey, never `keep` (publish_result; cache import, whose
  // <root>/imported/ keys are bounded the same way).
  void evict_results(const std::string& key_dir, const std::string& keep) const;

 private:
  PublishResult commit(Staging& staging, const std::string& entry_dir, EntryRecord record,
                       const KeepOccupant& keep) const;
  PublishResult commit_result(Staging& staging, const std::string& key_dir, EntryRecord record,
                              const KeepOccupant& keep) const;
  CacheRoot root_;
};

}  // namespace tvmffi_jit::cache
