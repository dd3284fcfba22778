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
// What a watch cannot see, and so what the caller checks by other means:
//   * a write through a shared writable mapping (mmap MAP_SHARED): the kernel
//     sends no inotify event for it, but it does move the file's mtime and
//     ctime (at the first write fault after the page was last written back,
//     which msync and writeback both do). The caller (the cache's watched
//     hits, cache/store/store.cpp) therefore still stats, on every watched
//     hit, the artifact it hands back and every input the calling user owns;
//     what remains unseen is such a write by another user to a file that user
//     owns, and a second write to a page still dirty from the first one
//     (no fault, so no new stamp, until writeback: stats miss that too);
//   * changes made on another host (only the filesystems whose stamps are
//     trusted, util/stamp.h, are watched: local ones);
//   * a mount placed over a watched folder.
// A full event queue (overflow) voids every proof. Off until enable(): a
// one-shot CLI process would pay the watches without ever asking again.
//
// Watches are a per-user kernel resource (fs.inotify.max_user_watches, 8192
// by default before Linux 5.11) shared with the user's IDEs and file
// watchers. So a process takes at most a small share of it (1/16, at most
// 16384), a watch is held only while a kept proof depends on it (release(),
// and a watch that no proof took is removed at once), and once the kernel
// refuses a watch (ENOSPC) no new one is asked for a while.
//
// Fork-safe: in a forked child the inherited inotify descriptor is closed by
// a ForkChildHook inside fork(), while that number is provably still ours
// (util/fork_safe.h), so the child never reads its parent's queue and never
// closes a descriptor it opened itself later; the child starts a new
// instance, and no proof taken before the fork holds in it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tvmffi_jit/util/expected.h"
#include "tvmffi_jit/util/fork_safe.h"

namespace tvmffi_jit::util {

// Why watch() gave no proof: the caller proves with stats either way, and
// may give proofs back and ask again on kBudget.
enum class WatchRefusal {
  kOff,           // not enabled, or no inotify instance
  kNotWatchable,  // a path not absolute, not a regular file, or on a filesystem whose stamps are not trusted
  kBudget,        // this process's share of the user's watches is in use
  kUserLimit,     // the kernel refused a watch (the user's limit): none is asked for a while
};

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
  // A proof holds one reference on each watch it depends on until release().
  struct Proof {
    uint64_t instance = 0;  // the inotify instance (a reset or fork starts another)
    uint64_t epoch = 0;     // events numbered above this void it
    std::vector<Dependency> depends;
  };

  static ChangeWatch& global();
  // `max_watches`: the most this instance holds; 0: a share of the user's
  // limit (default_watch_budget(), read when first enabled). Tests give a few.
  explicit ChangeWatch(size_t max_watches = 0);
  ~ChangeWatch();
  ChangeWatch(const ChangeWatch&) = delete;
  ChangeWatch& operator=(const ChangeWatch&) = delete;

  void enable(bool on = true);  // off again: tests
  bool enabled() const;

  // Watches what `present` (files that must keep their content) and `absent`
  // (paths that must stay absent) depend on; call before proving them. The
  // proof holds its watches until release(); on a refusal every watch this
  // call added is removed again.
  Expected<Proof, Failure<WatchRefusal>> watch(const std::vector<std::string>& present,
                                               const std::vector<std::string>& absent);
  // Whether no event touched what `proof` watched since it was taken; when
  // so, the proof is advanced to the last event read (the caller keeps it).
  bool unchanged(Proof& proof);
  // Gives back the proof's references; a watch no kept proof depends on is
  // removed (inotify_rm_watch). A proof of an earlier instance (a reset, a
  // fork) holds nothing here.
  void release(const Proof& proof);

  size_t watch_count();  // watches held (tests, limits)
  size_t budget() const;  // the most watches this instance holds (0 until enabled with the default)

  // A small share of the user's inotify watches: min(fs.inotify.max_user_watches
  // and, in a user namespace, user.max_inotify_watches) / 16, at most 16384.
  static size_t default_watch_budget();

 private:
  static constexpr size_t kMaxWatches = 16384;
  static constexpr size_t kShareOfUserLimit = 16;
  static constexpr size_t kMaxNamedEvents = 1 << 16;  // then as if the queue overflowed
  static constexpr int kMaxSymlinks = 40;
  static constexpr int64_t kUserLimitBackoffNs = 30 * int64_t{1000000000};
  struct WatchState {
    uint64_t last_event = 0;  // sequence of its last own event
    uint32_t refs = 0;        // kept proofs depending on it
  };
  struct Resolved {  // a directory path, resolved: what its lookups depend on
    uint64_t epoch = 0;
    std::string real_dir;
    int real_watch = -1;  // the watch of real_dir
    std::vector<Dependency> depends;
  };

  bool usable_locked();  // opens (or, in a forked child, re-opens) the instance
  void reset_locked(bool close_descriptor);
  void drain_locked();
  bool changed_since_locked(const std::vector<Dependency>& depends, uint64_t epoch) const;
  // -1 with `refusal` set when no watch could be added.
  int add_locked(const std::string& path, bool directory, WatchRefusal& refusal);
  void remove_unreferenced_locked(const std::vector<int>& candidates);
  // The real directory `dir` names, watching every directory a lookup on the
  // way passes through (the names looked up into `depends`); null: a
  // component is missing (its name in the last existing directory is
  // watched), or `refusal` is set: a limit was hit or a filesystem is not trusted.
  const Resolved* resolve_dir_locked(const std::string& dir, std::vector<Dependency>& depends,
                                     std::optional<WatchRefusal>& refusal);
  std::optional<WatchRefusal> watch_path_locked(const std::string& path, bool must_exist,
                                                std::vector<Dependency>& depends);

  mutable ForkSafeMutex mutex_;
  ForkChildHook drop_in_child_;
  size_t max_watches_;
  bool enabled_ = false;
  int64_t refuse_until_ns_ = 0;  // after the kernel refused a watch (monotonic clock)
  int fd_ = -1;
  pid_t pid_ = 0;
  uint64_t instance_ = 0;
  uint64_t seq_ = 0;
  uint64_t overflow_seq_ = 0;
  uint64_t last_any_seq_ = 0;  // the sequence of the last event read, whatever it was
  std::unordered_map<int, WatchState> watches_;
  std::vector<int> added_;  // watches the current watch() call created (removed again on a refusal)
  // watch -> name in that folder -> sequence of its last event
  std::unordered_map<int, std::unordered_map<std::string, uint64_t>> last_named_;
  size_t named_count_ = 0;
  std::unordered_map<std::string, Resolved> resolved_;
};

}  // namespace tvmffi_jit::util
