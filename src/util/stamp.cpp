#include "tvmffi_jit/util/stamp.h"

#include <sys/vfs.h>

#include <ctime>
#include <vector>

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
  return std::to_string(s.device) + ":" + std::to_string(s.inode) + ":" + std::to_string(s.mtime_ns) + ":" +
         std::to_string(s.ctime_ns);
}

bool stamps_are_trusted(const struct stat& st, const std::string& path) {
  // A handful of devices per process (the root, /usr, a checkout): a vector.
  static ForkSafeMutex mutex;
  static std::vector<std::pair<uint64_t, bool>> known;
  const uint64_t dev = static_cast<uint64_t>(st.st_dev);
  {
    std::lock_guard<ForkSafeMutex> g(mutex);
    for (const auto& [d, trusted] : known)
      if (d == dev) return trusted;
  }
  struct statfs fs;
  if (::statfs(path.c_str(), &fs) != 0) return false;  // not memoised: ask again next time
  bool trusted = false;
  for (int64_t magic : kTrustedFilesystems) trusted = trusted || static_cast<int64_t>(fs.f_type) == magic;
  std::lock_guard<ForkSafeMutex> g(mutex);
  if (known.size() < 256) known.emplace_back(dev, trusted);
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
