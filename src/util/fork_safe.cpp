#include "tvmffi_jit/util/fork_safe.h"

#include <pthread.h>

#include <algorithm>
#include <vector>

namespace tvmffi_jit::util {

namespace {

struct Registry {
  std::mutex guard;  // the lists; never held across a lock of a listed mutex
  std::vector<ForkSafeMutex*> list;
  std::vector<ForkChildHook*> hooks;
};

// Never destroyed: static ForkSafeMutexes in other translation units may be
// destroyed after this one's statics at exit.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// What the forking thread locked in prepare(): a fork in another thread
// (which waits for the engine lock meanwhile) has a list of its own.
thread_local std::vector<ForkSafeMutex*> locked_for_fork;

void prepare() {
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> g(r.guard);
    locked_for_fork = r.list;
  }
  std::stable_sort(locked_for_fork.begin(), locked_for_fork.end(),
                   [](const ForkSafeMutex* a, const ForkSafeMutex* b) { return a->rank() < b->rank(); });
  // The engine lock first: once it is ours no engine call is running, so no
  // memo lock is held for long; the guard last, so that a mutex being
  // registered by a thread that still ran an engine call cannot be half-added.
  for (ForkSafeMutex* m : locked_for_fork) m->lock();
  r.guard.lock();
}

void release() {
  registry().guard.unlock();
  for (auto it = locked_for_fork.rbegin(); it != locked_for_fork.rend(); ++it) (*it)->unlock();
  locked_for_fork.clear();
}

// The hooks run after every ForkSafeMutex is unlocked in the child; their
// list is copied while prepare()'s guard is still held, so none is half-added.
void release_in_child() {
  Registry& r = registry();
  std::vector<ForkChildHook*> hooks = r.hooks;  // copied under the guard prepare() took
  release();
  for (ForkChildHook* h : hooks) h->run_in_child();
}

void register_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(prepare, release, release_in_child); });
}

}  // namespace

ForkSafeMutex::ForkSafeMutex(int rank) : rank_(rank) {
  register_handlers();
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.guard);
  r.list.push_back(this);
}

ForkChildHook::ForkChildHook(std::function<void()> drop) : drop_(std::move(drop)) {
  register_handlers();
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.guard);
  r.hooks.push_back(this);
}

ForkChildHook::~ForkChildHook() {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.guard);
  r.hooks.erase(std::remove(r.hooks.begin(), r.hooks.end(), this), r.hooks.end());
}

ForkSafeMutex::~ForkSafeMutex() {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.guard);
  r.list.erase(std::remove(r.list.begin(), r.list.end(), this), r.list.end());
}

}  // namespace tvmffi_jit::util
