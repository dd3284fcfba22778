// ForkSafeMutex: a mutex that a fork() never leaves locked in the child.
//
// The Python package calls the engine library (src/cli/engine.cpp) from long
// processes that fork: PyTorch DataLoader workers, multiprocessing with the
// fork start method. A plain std::mutex held by another thread at the moment
// of the fork stays locked forever in the child, which has only the forking
// thread. Every ForkSafeMutex is registered with one pthread_atfork handler
// that, before the fork, locks them all in rank order (kEngineRank first: the
// engine's call lock, so a fork waits for a call in flight to end and the
// child never inherits half a call), and unlocks them in the parent and the
// child after it. Memos keep their contents in the child: the same files
// still have the same stamps there.
//
// Rule for users: never hold two of them at once except the engine lock
// around memo locks (the order the handler takes them in), and never fork
// while holding one (the handler would wait for itself).
#pragma once

#include <functional>
#include <mutex>

namespace tvmffi_jit::util {

class ForkSafeMutex {
 public:
  static constexpr int kEngineRank = 0;  // taken first before a fork
  static constexpr int kMemoRank = 1;
  explicit ForkSafeMutex(int rank = kMemoRank);
  ~ForkSafeMutex();
  ForkSafeMutex(const ForkSafeMutex&) = delete;
  ForkSafeMutex& operator=(const ForkSafeMutex&) = delete;

  void lock() { mutex_.lock(); }
  void unlock() { mutex_.unlock(); }
  bool try_lock() { return mutex_.try_lock(); }
  int rank() const { return rank_; }

 private:
  std::mutex mutex_;
  int rank_;
};

// ForkChildHook: runs `drop` in a forked child, inside fork() (the same
// pthread_atfork handler, after every ForkSafeMutex is unlocked there), before
// the child's own code runs. For state a child must not share with its parent
// (a descriptor whose queue or poll state is the parent's): at that moment the
// descriptor number is provably still the one this process opened, so it may
// be closed. Later, once the child's code has run, that number may name a
// file the child opened itself (a daemon that closed what it inherited, then
// opened its log). `drop` runs single-threaded and must not fork or take a
// ForkSafeMutex held by another hook.
class ForkChildHook {
 public:
  explicit ForkChildHook(std::function<void()> drop);
  ~ForkChildHook();
  ForkChildHook(const ForkChildHook&) = delete;
  ForkChildHook& operator=(const ForkChildHook&) = delete;
  void run_in_child() { drop_(); }  // the fork handler's call

 private:
  std::function<void()> drop_;
};

}  // namespace tvmffi_jit::util
