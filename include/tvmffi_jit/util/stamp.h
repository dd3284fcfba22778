// Full stamps: what a cache hit compares instead of re-reading a file.
//
// A stamp is (device, inode, size, mtime, ctime) in nanoseconds. It stands
// for a content only when
//   - it was taken by fstat of the very descriptor that was then hashed,
//     before reading (a file replaced meanwhile has another inode), and
//   - both mtime and ctime were at least kSettledNs old when it was taken: a
//     write in the same timestamp tick as the hash cannot hide behind it
//     (git's "racily clean" rule), and no one can set ctime back, so a later
//     write, chmod or rename always changes the stamp;
//   - the file lives on a filesystem whose timestamps are local and
//     fine-grained (stamps_are_trusted): on NFS, FUSE, vfat and the like a
//     file is re-hashed whatever its stamp.
// What a stamp cannot see: a write through a shared writable mapping to a page
// still dirty from an earlier write (the kernel moves mtime at the write fault
// after a page was written back, not at every store), and bit rot under an unchanged inode (`tvmffi-jit cache
// verify` re-hashes everything; docs/cache.md, "What the cache promises").
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "tvmffi_jit/util/fork_safe.h"

namespace tvmffi_jit::util {

struct FullStamp {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FullStamp& o) const {
    return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns &&
           ctime_ns == o.ctime_ns;
  }
  bool operator!=(const FullStamp& o) const { return !(*this == o); }
};

inline constexpr int64_t kSettledNs = 2 * int64_t{1000000000};

FullStamp full_stamp_of(const struct stat& st);
// stat (follow_symlinks) or lstat of `path`; nullopt when it cannot be stat'ed.
std::optional<FullStamp> full_stamp(const std::string& path, bool follow_symlinks = true);
int64_t realtime_now_ns();
// Both mtime and ctime at least kSettledNs before `now_ns`.
bool stamp_is_settled(const FullStamp& s, int64_t now_ns = realtime_now_ns());
// "dev:ino:mtime_ns:ctime_ns", the form entry.json records beside the size
// (cache/entry.h); the size is compared from its own field.
std::string stamp_text(const FullStamp& s);

// Whether the filesystem holding the file `st` describes (at `path`) keeps
// local, fine-grained timestamps: ext2/3/4, xfs, btrfs, tmpfs, overlayfs,
// zfs, f2fs. Asked with statfs once per device per process while the mount
// table is unchanged: a device number freed by an unmount is reused by the
// next mount (a ramfs where a tmpfs was), so any mount or unmount in this
// mount namespace (one poll of /proc/self/mountinfo per ask) clears the memo.
// Without /proc every ask is a statfs.
bool stamps_are_trusted(const struct stat& st, const std::string& path);

// While one is alive on a thread, that thread's stamps_are_trusted questions
// poll the mount table once, at the first, not once each: a lookup asks for
// every file it checks (hundreds of headers), and the poll was a third of a
// command-line hit's system calls. A mount or unmount during that one lookup
// is seen by the next. Nested scopes count as the outermost.
class OneMountTablePoll {
 public:
  OneMountTablePoll();
  ~OneMountTablePoll();
  OneMountTablePoll(const OneMountTablePoll&) = delete;
  OneMountTablePoll& operator=(const OneMountTablePoll&) = delete;
};

// Per-process memo of digests proven by hashing: path -> (the settled stamp
// of the descriptor hashed, its SHA-256). A file whose stamp is unchanged is
// not re-hashed in this process, whatever entry or root records it; with a
// read-only cache root this is the only record of a re-hash. Fork-safe (the
// child keeps what the parent proved: same files, same stamps).
class ProvenDigests {
 public:
  static ProvenDigests& global();
  // The digest proven for `path` at exactly `stamp`, if any.
  std::optional<std::string> find(const std::string& path, const FullStamp& stamp) const;
  // Remembers a digest when `stamp` is settled (else nothing).
  void remember(const std::string& path, const FullStamp& stamp, const std::string& sha256);
  void clear();  // tests

 private:
  static constexpr size_t kCapacity = 1 << 14;
  mutable ForkSafeMutex mutex_;
  std::unordered_map<std::string, std::pair<FullStamp, std::string>> digests_;
};

}  // namespace tvmffi_jit::util
