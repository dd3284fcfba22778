#include "tvmffi_jit/util/stamp.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <ctime>
#include <mutex>
#include <optional>
#include <vector>

#include <fmt/format.h>


namespace tvmffi_jit::util {

namespace {

int64_t ns(const struct timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; }

// statfs f_type values (linux/magic.h; ZFS's from OpenZFS).
constexpr int64_t kTrustedFilesystems[] = {
    0xEF53,      // ext2, ext3, ext4
    0x58465342,  // xfs
    0x9123683E,  // btrfs
    0x01021994,  // tmpfs
    0x794C7630,  // overlayfs
    0x2FC12FC1,  // zfs
    0xF2F52010,  // f2fs
};

}  // namespace

FullStamp full_stamp_of(const struct stat& st) {
  FullStamp s;
  s.device = static_cast<uint64_t>(st.st_dev);
  s.inode = static_cast<uint64_t>(st.st_ino);
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = ns(st.st_mtim);
  s.ctime_ns = ns(st.st_ctim);
  return s;
}

std::optional<FullStamp> full_stamp(const std::string& path, bool follow_symlinks) {
  struct stat st;
  if ((follow_symlinks ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) return std::nullopt;
  return full_stamp_of(st);
}

int64_t realtime_now_ns() {
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  return ns(now);
}

bool stamp_is_settled(const FullStamp& s, int64_t now_ns) {
  return now_ns - s.mtime_ns >= kSettledNs && now_ns - s.ctime_ns >= kSettledNs;
}

std::string stamp_text(const FullStamp& s) {
  // One allocation: a hit formats the stamp of every file it checks.
  return fmt::format("{}:{}:{}:{}", s.device, s.inode, s.mtime_ns, s.ctime_ns);
}

namespace {

// Which devices' filesystems keep trusted stamps, per process. A device
// number alone does not name a filesystem for good: once one is unmounted its
// anonymous device number goes to the next mount (a ramfs where a tmpfs was
// gets the same st_dev). So the memo is kept only while the mount table is
// unchanged: /proc/self/mountinfo polls readable-with-priority after any
// mount or unmount in this mount namespace (proc(5)), one poll(0) per ask.
thread_local int poll_scope_depth = 0;       // OneMountTablePoll objects alive on this thread
thread_local bool polled_in_scope = false;  // and whether one of them has polled

class FilesystemTrustMemo {
 public:
  static FilesystemTrustMemo& global() {
    static FilesystemTrustMemo* memo = new FilesystemTrustMemo;  // never destroyed: used until exit
    return *memo;
  }
  std::optional<bool> find(uint64_t dev) {
    std::lock_guard<ForkSafeMutex> g(mutex_);
    // Inside a OneMountTablePoll, only the first question polls.
    const bool asked_in_scope = poll_scope_depth > 0 && polled_in_scope;
    if (poll_scope_depth > 0) polled_in_scope = true;
    if (!asked_in_scope && !mount_table_unchanged_locked()) {
      known_.clear();
      return std::nullopt;
    }
    for (const auto& [d, trusted] : known_)
      if (d == dev) return trusted;
    return std::nullopt;
  }
  void remember(uint64_t dev, bool trusted) {
    std::lock_guard<ForkSafeMutex> g(mutex_);
    if (mounts_fd_ < 0) return;  // nothing tells this process of a change: ask every time
    if (known_.size() < 256) known_.emplace_back(dev, trusted);
  }

 private:
  // False when a mount or unmount happened since the last ask, or when the
  // mount table cannot be watched (then nothing is remembered).
  bool mount_table_unchanged_locked() {
    if (mounts_fd_ < 0) {
      mounts_fd_ = ::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
      return false;  // a new watch of the table: what was remembered before it is not vouched for
    }
    struct pollfd p = {mounts_fd_, POLLPRI, 0};
    const int n = ::poll(&p, 1, 0);
    return n == 0;  // an event (POLLPRI|POLLERR) or a failed poll: changed, as far as we know
  }

  ForkSafeMutex mutex_;
  // The poll state lives in the open file, which a forked child shares with
  // its parent: the child closes its copy inside fork() (util/fork_safe.h)
  // and opens its own, so neither consumes the other's event.
  ForkChildHook drop_in_child_{[this] {
    if (mounts_fd_ >= 0) ::close(mounts_fd_);
    mounts_fd_ = -1;
    known_.clear();
  }};
  int mounts_fd_ = -1;
  // A handful of devices per process (the root, /usr, a checkout): a vector.
  std::vector<std::pair<uint64_t, bool>> known_;
};

}  // namespace

OneMountTablePoll::OneMountTablePoll() { ++poll_scope_depth; }

OneMountTablePoll::~OneMountTablePoll() {
  if (--poll_scope_depth == 0) polled_in_scope = false;
}

bool stamps_are_trusted(const struct stat& st, const std::string& path) {
  const uint64_t dev = static_cast<uint64_t>(st.st_dev);
  FilesystemTrustMemo& memo = FilesystemTrustMemo::global();
  if (auto known = memo.find(dev)) return *known;
  struct statfs fs;
  if (::statfs(path.c_str(), &fs) != 0) return false;  // not memoised: ask again next time
  bool trusted = false;
  for (int64_t magic : kTrustedFilesystems) trusted = trusted || static_cast<int64_t>(fs.f_type) == magic;
  memo.remember(dev, trusted);
  return trusted;
}

ProvenDigests& ProvenDigests::global() {
  static ProvenDigests* memo = new ProvenDigests;  // never destroyed: used until exit
  return *memo;
}

std::optional<std::string> ProvenDigests::find(const std::string& path, const FullStamp& stamp) const {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  auto it = digests_.find(path);
  if (it == digests_.end() || it->second.first != stamp) return std::nullopt;
  return it->second.second;
}

void ProvenDigests::remember(const std::string& path, const FullStamp& stamp, const std::string& sha256) {
  if (!stamp_is_settled(stamp)) return;
  std::lock_guard<ForkSafeMutex> g(mutex_);
  // A full memo starts over: what a process hits again comes back at once.
  if (digests_.size() >= kCapacity && !digests_.count(path)) digests_.clear();
  digests_[path] = {stamp, sha256};
}

void ProvenDigests::clear() {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  digests_.clear();
}

}  // namespace tvmffi_jit::util
