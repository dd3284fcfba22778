// Advisory per-file locks (flock) with a bounded wait.
//
// These locks exist to avoid duplicate work (two processes compiling the same
// module), never for correctness: flock is node-local on NFS and may silently
// succeed everywhere there. Callers must stay correct when the lock is not
// held (timed out, unsupported, read-only directory) — the cache publishes by
// one atomic rename for exactly that reason.
//
// The holder writes "pid=<pid> host=<host> <note>" into the lock file after
// acquiring it, so a waiter can say whom it is waiting for.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace tvmffi_jit::util {

struct LockHolder {
  long pid = 0;       // 0 when the lock file names nobody (yet)
  std::string host;
  std::string note;
  std::string text;   // the raw line, for messages
};

struct LockOptions {
  double timeout_seconds = 600;     // give up waiting after this (then proceed unlocked)
  double notice_after_seconds = 1;  // call on_wait once after waiting this long
  std::string note;                 // written after pid/host: what the holder is doing
  // Called once (after notice_after_seconds) with whoever holds the lock.
  std::function<void(const LockHolder&)> on_wait;
};

enum class LockStatus {
  kAcquired,     // we hold the lock
  kTimedOut,     // someone else held it for longer than timeout_seconds
  kUnavailable,  // the lock file cannot be created or locked (read-only fs, no flock)
};

class FileLock {
 public:
  FileLock() = default;
  ~FileLock();
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  // Waits (polling flock LOCK_NB with growing sleeps) up to options.timeout_seconds.
  // Never throws for lock failures: the status says what happened. Throws
  // util::termination_error() when a termination signal arrives while waiting.
  static FileLock acquire(const std::string& path, const LockOptions& options = {});
  // One non-blocking attempt.
  static FileLock try_acquire(const std::string& path, const std::string& note = "");

  bool locked() const { return fd_ >= 0; }
  LockStatus status() const { return status_; }
  const std::string& path() const { return path_; }
  // Who held the lock when we last looked (set when we waited or gave up).
  const std::optional<LockHolder>& last_holder() const { return last_holder_; }
  double waited_seconds() const { return waited_seconds_; }
  void release();

 private:
  int fd_ = -1;
  LockStatus status_ = LockStatus::kUnavailable;
  std::string path_;
  std::optional<LockHolder> last_holder_;
  double waited_seconds_ = 0;
};

// Reads the holder line of a lock file (nullopt if the file is missing or empty).
std::optional<LockHolder> read_lock_holder(const std::string& path);
std::string host_name();

}  // namespace tvmffi_jit::util
