#include "tvmffi_jit/util/lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::util {

namespace {

using Clock = std::chrono::steady_clock;

int open_lock_file(const std::string& path) {
  // O_NOFOLLOW: a lock path that is a symlink is never ours to write through.
  return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

void write_holder(int fd, const std::string& note) {
  std::string line = "pid=" + std::to_string(::getpid()) + " host=" + host_name();
  if (!note.empty()) line += " " + note;
  line += "\n";
  // Best effort: the holder text is only used in messages.
  if (::ftruncate(fd, 0) == 0) {
    ssize_t ignored = ::pwrite(fd, line.data(), line.size(), 0);
    (void)ignored;
  }
}

LockHolder parse_holder(const std::string& text) {
  LockHolder h;
  h.text = std::string(trim(text));
  for (const auto& word : split_any(h.text, " ")) {
    if (starts_with(word, "pid=")) h.pid = std::strtol(word.c_str() + 4, nullptr, 10);
    else if (starts_with(word, "host=")) h.host = word.substr(5);
    else h.note += (h.note.empty() ? "" : " ") + word;
  }
  return h;
}

}  // namespace

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::optional<LockHolder> read_lock_holder(const std::string& path) {
  // "pid=N host=H note": a longer file (or a FIFO planted in its place) is not a holder line.
  auto text = read_small_file(path, 4096);
  if (!text || trim(*text).empty()) return std::nullopt;
  return parse_holder(*text);
}

FileLock::~FileLock() { release(); }

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(other.fd_),
      status_(other.status_),
      path_(std::move(other.path_)),
      last_holder_(std::move(other.last_holder_)),
      waited_seconds_(other.waited_seconds_) {
  other.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    release();
    fd_ = other.fd_;
    status_ = other.status_;
    path_ = std::move(other.path_);
    last_holder_ = std::move(other.last_holder_);
    waited_seconds_ = other.waited_seconds_;
    other.fd_ = -1;
  }
  return *this;
}

void FileLock::release() {
  if (fd_ >= 0) {
    // Closing drops the flock. The holder line stays behind; the next holder
    // overwrites it, and a waiter only reads it while the lock is held.
    ::close(fd_);
    fd_ = -1;
  }
}

FileLock FileLock::try_acquire(const std::string& path, const std::string& note) {
  // acquire() that gives up at its first look: a held lock is kTimedOut with
  // its holder read, and nobody is told about a wait.
  LockOptions once;
  once.timeout_seconds = 0;
  once.notice_after_seconds = std::numeric_limits<double>::infinity();
  once.note = note;
  return acquire(path, once);
}

FileLock FileLock::acquire(const std::string& path, const LockOptions& options) {
  FileLock lock;
  lock.path_ = path;
  int fd = open_lock_file(path);
  if (fd < 0) {
    lock.status_ = LockStatus::kUnavailable;
    return lock;
  }
  auto start = Clock::now();
  bool noticed = false;
  auto sleep = std::chrono::milliseconds(5);
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      write_holder(fd, options.note);
      lock.fd_ = fd;
      lock.status_ = LockStatus::kAcquired;
      lock.waited_seconds_ = std::chrono::duration<double>(Clock::now() - start).count();
      return lock;
    }
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {  // ENOLCK and friends: locking is not supported here
      ::close(fd);
      lock.status_ = LockStatus::kUnavailable;
      return lock;
    }
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    lock.waited_seconds_ = waited;
    if (!noticed && waited >= options.notice_after_seconds) {
      noticed = true;
      lock.last_holder_ = read_lock_holder(path);
      if (options.on_wait) options.on_wait(lock.last_holder_.value_or(LockHolder{}));
    }
    if (waited >= options.timeout_seconds) {
      lock.last_holder_ = read_lock_holder(path);
      ::close(fd);
      lock.status_ = LockStatus::kTimedOut;
      return lock;
    }
    if (termination_signal() != 0) {  // waiting on someone else's build: stop now, nothing to clean up
      ::close(fd);
      throw termination_error();
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(100));
  }
}

}  // namespace tvmffi_jit::util
