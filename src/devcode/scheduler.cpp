#include "devcode/scheduler.h"

#include <sys/mman.h>

#include <new>

#include "devcode/bytes.h"
#include "devcode/parsers.h"

namespace tvmffi_jit::devcode {

DecompressArena::Range DecompressArena::acquire(uint64_t n) {
  uint64_t size = align_up(std::max<uint64_t>(n, 1), kGranule);
  std::unique_lock<std::mutex> lock(mutex_);
  if (!base_) {  // reserved on first use; costs nothing until touched
    void* p = ::mmap(nullptr, budget_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<uint8_t*>(p);
  }
  for (;;) {
    if (size > budget_ && in_use_ == 0) {
      void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      ++in_use_;
      return Range{static_cast<uint8_t*>(p), 0, size, true};
    }
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size) continue;
      Range r{base_ + it->first, it->first, size, false};
      if (it->second > size) free_.emplace(it->first + size, it->second - size);
      free_.erase(it);
      ++in_use_;
      return r;
    }
    Waiter self{size, {}, false};
    waiters_.push_back(&self);
    self.wake.wait(lock, [&] { return self.woken; });
  }
}

void DecompressArena::release(const Range& r) {
  if (r.own_mapping) ::munmap(r.data, r.size);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --in_use_;
    if (!r.own_mapping) {
      auto it = free_.emplace(r.offset, r.size).first;
      if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
        it->second += next->second;
        free_.erase(next);
      }
      if (it != free_.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == it->first) {
          prev->second += it->second;
          free_.erase(it);
        }
      }
    }
    wake_waiters();
  }
}

void DecompressArena::trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!base_) return;
  for (auto [offset, size] : free_) ::madvise(base_ + offset, size, MADV_DONTNEED);
}

void DecompressArena::wake_waiters() {
  std::vector<uint64_t> room;
  for (const auto& [offset, size] : free_) room.push_back(size);
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    Waiter& w = **it;
    auto fit = std::find_if(room.begin(), room.end(), [&](uint64_t r) { return r >= w.size; });
    if (fit == room.end() && in_use_ > 0) {
      ++it;
      continue;
    }
    if (fit != room.end()) *fit -= w.size;
    w.woken = true;
    w.wake.notify_one();
    it = waiters_.erase(it);
  }
}

void DemangleMemo::demangle_into(Kernel& k) {
  Shard& shard = shards_[std::hash<std::string_view>{}(k.name) % shards_.size()];
  {
    std::lock_guard<std::mutex> lock(shard.mutex);
    auto it = shard.names.find(k.name);
    if (it != shard.names.end()) {
      k.demangled = *it->second;
      return;
    }
  }
  k.demangled = demangle(k.name);
  std::lock_guard<std::mutex> lock(shard.mutex);
  shard.names.emplace(k.name, &k.demangled);
}

}  // namespace tvmffi_jit::devcode
