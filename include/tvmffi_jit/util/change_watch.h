// ChangeWatch: a long-lived process (the engine library behind the Python
// package) proves a cache hit again without one stat per recorded file, for
// as long as inotify reports no change to anything the proof depended on
// (docs/cache.md, "Watched hits").
//
// A proof is taken in this order: watch (this class), then prove with stats
// and digests as every lookup does (cache/proof.h), then remember the epoch
// watch() returned. Any event after the watch was set, including one that
// raced the proving stats, is read later with a higher sequence number and
// voids the proof: a change is never missed, only sometimes over-reported.
//
// What is watched for each file:
//   * the file itself, by inode (a write through any of its names, chmod,
//     chown, a new or removed hard link, its removal or rename);
//   * every directory in which a component of its path is looked up, symlinks
//     followed as the kernel follows them: a renamed or replaced folder, a
//     retargeted symlink (/usr/local/cuda -> another toolkit), and, for the
//     paths that must stay absent (shadows), the file created in their place.
// Directories report names only (create, delete, move), not writes or
// attribute changes of their other files: the cache root's journal line and
// an entry's last-use time do not void a proof.
//
// What a watch cannot see, and so where this is not used or is documented:
// writes through a shared writable mmap, changes made on another host (only
// the filesystems whose stamps are trusted, util/stamp.h, are watched: local
// ones), a mount placed over a watched folder. A full event queue (overflow)
// voids every proof. Off until enable(): a one-shot CLI process would pay the
// watches without ever asking again.
//
// Fork-safe: a child (another pid) never reads the inherited inotify
// descriptor, which would take events from its parent's queue; it starts a
// new instance, and no proof taken before the fork holds in it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tvmffi_jit/util/fork_safe.h"

namespace tvmffi_jit::util {

class ChangeWatch {
 public:
  // One thing a proof depends on: a watch's own events (name empty: a file's
  // writes and metadata, a folder's removal or move), or the events of one
  // name in a watched folder (created, deleted, moved in or out).
  struct Dependency {
    int watch = -1;
    std::string name;
    bool operator<(const Dependency& o) const { return watch != o.watch ? watch < o.watch : name < o.name; }
    bool operator==(const Dependency& o) const { return watch == o.watch && name == o.name; }
  };
  struct Proof {
    uint64_t instance = 0;  // the inotify instance (a reset or fork starts another)
    uint64_t epoch = 0;     // events numbered above this void it
    std::vector<Dependency> depends;
  };

  static ChangeWatch& global();
  // `max_watches`: the most this instance holds (tests give a few).
  explicit ChangeWatch(size_t max_watches = kMaxWatches) : max_watches_(max_watches) {}
  ~ChangeWatch();
  ChangeWatch(const ChangeWatch&) = delete;
  ChangeWatch& operator=(const ChangeWatch&) = delete;

  void enable(bool on = true);  // off again: tests
  bool enabled() const;

  // Watches what `present` (files that must keep their content) and `absent`
  // (paths that must stay absent) depend on; call before proving them.
  // nullopt when not enabled, when a path is on a filesystem whose stamps are
  // not trusted, or when inotify refuses a watch (limits): prove as usual,
  // remember nothing. Once the watch limit is hit, every later call answers
  // nullopt at once (a forked child starts afresh).
  std::optional<Proof> watch(const std::vector<std::string>& present, const std::vector<std::string>& absent);
  // Whether no event touched what `proof` watched since it was taken; when
  // so, the proof is advanced to the last event read (the caller keeps it).
  bool unchanged(Proof& proof);

  // Watches held (tests and limits).
  size_t watch_count();

 private:
  static constexpr size_t kMaxWatches = 16384;
  static constexpr size_t kMaxNamedEvents = 1 << 16;  // then as if the queue overflowed
  static constexpr int kMaxSymlinks = 40;
  struct Resolved {  // a directory path, resolved: what its lookups depend on
    uint64_t epoch = 0;
    std::string real_dir;
    int real_watch = -1;  // the watch of real_dir
    std::vector<Dependency> depends;
  };

  bool usable_locked();  // opens (or, in a forked child, re-opens) the instance
  void reset_locked();
  void drain_locked();
  bool changed_since_locked(const std::vector<Dependency>& depends, uint64_t epoch) const;
  int add_locked(const std::string& path, bool directory);
  // The real directory `dir` names, watching every directory a lookup on the
  // way passes through (the names looked up into `depends`); null: a
  // component is missing (its name in the last existing directory is
  // watched), or `failed`: a limit was hit or a filesystem is not trusted.
  const Resolved* resolve_dir_locked(const std::string& dir, std::vector<Dependency>& depends, bool& failed);
  bool watch_path_locked(const std::string& path, bool must_exist, std::vector<Dependency>& depends);

  mutable ForkSafeMutex mutex_;
  size_t max_watches_;
  bool enabled_ = false;
  bool out_of_watches_ = false;  // a limit was hit: no more proofs in this instance
  int fd_ = -1;
  pid_t pid_ = 0;
  uint64_t instance_ = 0;
  uint64_t seq_ = 0;
  uint64_t overflow_seq_ = 0;
  uint64_t last_any_seq_ = 0;  // the sequence of the last event read, whatever it was
  std::unordered_map<int, uint64_t> last_event_;  // watch -> sequence of its last own event
  // watch -> name in that folder -> sequence of its last event
  std::unordered_map<int, std::unordered_map<std::string, uint64_t>> last_named_;
  size_t named_count_ = 0;
  std::unordered_map<std::string, Resolved> resolved_;
};

}  // namespace tvmffi_jit::util
