// StampMemo<T>: what a long-lived process (the engine library behind the
// Python package) derived from a file, kept while the file's full stamp
// (device, inode, size, mtime, ctime: util/stamp.h) is unchanged, so a
// repeated cache hit does not re-read and re-parse it (docs/python.md,
// "In-process hits").
//
// A file rewritten in place within one clock tick of the filesystem keeps its
// size and mtime; a memo whose stale value could do harm is given a settle
// time: a value read from a file whose mtime or ctime is younger than that is
// returned but not memoised (git's "racily clean" rule). Files replaced by
// rename get a new inode and miss the memo whatever their age. Fork-safe
// (util/fork_safe.h).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "tvmffi_jit/util/fork_safe.h"
#include "tvmffi_jit/util/stamp.h"

namespace tvmffi_jit::util {

template <class T>
class StampMemo {
 public:
  // At most `capacity` files; a full memo starts over (the entries a process
  // hits repeatedly come back at once). `settle_ns`: see above.
  // `follow_symlinks`: false for files the deriving code never reads through
  // a symlink (a symlink put in their place has a stamp of its own).
  StampMemo(size_t capacity, int64_t settle_ns, bool follow_symlinks)
      : capacity_(capacity), settle_ns_(settle_ns), follow_symlinks_(follow_symlinks) {}

  // Two seconds: wider than any local filesystem's mtime tick (FAT's is two).
  static constexpr int64_t kSettleNs = 2 * int64_t{1000000000};

  std::optional<T> find(const std::string& path, const FullStamp& stamp) const {
    std::lock_guard<ForkSafeMutex> guard(mutex_);
    auto it = values_.find(path);
    if (it == values_.end() || !(it->second.first == stamp)) return std::nullopt;
    return it->second.second;
  }

  // Keeps `value` for `path` at `stamp` unless the file is too young to trust
  // its stamp (see above).
  void put(const std::string& path, const FullStamp& stamp, T value) {
    if (!stamp_is_settled(stamp)) return;
    std::lock_guard<ForkSafeMutex> guard(mutex_);
    if (values_.size() >= capacity_ && !values_.count(path)) values_.clear();
    values_[path] = {stamp, std::move(value)};
  }

  // Memoised, else `derive()` (an std::optional<T> or Expected<T>: only a
  // value is kept), on the file's stamp taken before it is derived: a file
  // replaced meanwhile leaves a memo under the old stamp, which the next call
  // does not match.
  // `stamp_out` (may be null): the stamp the value belongs to (inode 0: none).
  template <class Derive>
  auto get_or(const std::string& path, Derive&& derive, FullStamp* stamp_out = nullptr) -> decltype(derive()) {
    const std::optional<FullStamp> stamp = full_stamp(path, follow_symlinks_);
    if (stamp_out) *stamp_out = stamp.value_or(FullStamp{});
    if (stamp)
      if (auto memo = find(path, *stamp)) return std::move(*memo);  // one copy: find's
    auto value = derive();
    if (stamp && value) put(path, *stamp, *value);
    return value;
  }

 private:
  bool stamp_is_settled(const FullStamp& stamp) const {
    if (settle_ns_ <= 0) return true;
    const int64_t now_ns = realtime_now_ns();
    return now_ns - stamp.mtime_ns >= settle_ns_ && now_ns - stamp.ctime_ns >= settle_ns_;
  }

  size_t capacity_;
  int64_t settle_ns_;
  bool follow_symlinks_;
  mutable ForkSafeMutex mutex_;
  std::unordered_map<std::string, std::pair<FullStamp, T>> values_;
};

}  // namespace tvmffi_jit::util
