// The inspector's parallel machinery, independent of any format: the
// decompression arena that bounds the memory of all workers together, the job
// queue that hands entries from the (single-threaded) walk to the workers as
// it goes, and the memo that demangles each distinct kernel name once.
// Tests: tests/unit/test_devcode_scheduler.cpp.
#pragma once

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>

#include "devcode/bytes.h"
#include "tvmffi_jit/devcode/report.h"

namespace tvmffi_jit::devcode {

// Decompression memory shared by the workers of one inspect call: one
// mapping of `budget` bytes, handed out as ranges sized to each entry (first
// fit; freed ranges coalesce). Pages once touched stay mapped and are reused,
// so a run faults in at most the budget: on many threads, fresh per-entry
// buffers cost more in page faults than the parsing. A request that does not
// fit waits for ranges to come back; one larger than the whole budget gets a
// mapping of its own when nothing else is in use, so every entry below
// max_entry_bytes can still be inspected. Each worker holds at most one range
// and waits only while holding none, so every waiter is woken by a worker
// that is running. A release wakes only the waiters that the freed space can
// serve (with many threads, waking them all cost more than the waiting).
class DecompressArena {
 public:
  struct Range {
    uint8_t* data = nullptr;
    uint64_t offset = 0;
    uint64_t size = 0;
    bool own_mapping = false;  // larger than the arena
  };

  explicit DecompressArena(uint64_t budget)
      : budget_(align_up(std::clamp<uint64_t>(budget, kGranule, kMaxBudget), kGranule)) {
    free_.emplace(0, budget_);
  }
  DecompressArena(const DecompressArena&) = delete;
  ~DecompressArena() {
    if (base_) ::munmap(base_, budget_);
  }

  // A range of at least `n` bytes, waiting while it does not fit.
  Range acquire(uint64_t n);
  void release(const Range& r);

  // Gives the pages of the free ranges back to the system. Each worker calls
  // it when the queue is empty, so the pages are freed while the last entries
  // are still being parsed rather than one by one at the end. Under the lock:
  // a range must not be handed out while its pages are being dropped.
  void trim();

 private:
  static constexpr uint64_t kGranule = uint64_t(64) << 10;
  static constexpr uint64_t kMaxBudget = uint64_t(1) << 40;  // address space reserved, not memory

  struct Waiter {
    uint64_t size;
    std::condition_variable wake;
    bool woken = false;
  };

  // Wakes, in arrival order, the waiters that a first fit over the free
  // ranges would serve (all of them once nothing is in use: one may be larger
  // than the arena). A woken waiter that loses its range to a newcomer waits
  // again. Called with the lock held.
  void wake_waiters();

  std::mutex mutex_;
  std::vector<Waiter*> waiters_;  // on the stacks of the waiting threads
  uint8_t* base_ = nullptr;
  uint64_t budget_;
  std::map<uint64_t, uint64_t> free_;  // offset -> size, disjoint and coalesced
  size_t in_use_ = 0;
};

// An arena range for the lifetime of one entry.
class Lease {
 public:
  Lease(DecompressArena& arena, uint64_t n) : arena_(arena), range_(arena.acquire(n)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { arena_.release(range_); }
  uint8_t* data() const { return range_.data; }

 private:
  DecompressArena& arena_;
  DecompressArena::Range range_;
};

// Libraries repeat kernel names across architectures (libcublasLt: 42,200
// kernels, 14,871 names), so each distinct name is demangled once, by the
// worker that meets it first. The memo holds no copies: it points at the name
// and demangled text of the first kernel that had the name, which stay put
// (and unchanged) while the workers run, since a job's kernels are final when
// they are recorded. Sharded so that workers rarely wait for each other; the
// demangler is pure, so a name demangled twice by a race gives the same text.
class DemangleMemo {
 public:
  // Sets k.demangled from k.name (k must stay put until the memo is gone).
  void demangle_into(Kernel& k);

 private:
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::string_view, const std::string*> names;
  };
  std::array<Shard, 64> shards_;
};

// Jobs handed from the container walk to the workers while the walk goes on:
// the walk touches a page of the mapping every few entries, and on many
// threads it took as long as a tenth of the run when it came first. Jobs are
// published in batches (one per container) and never move once published;
// workers are started as jobs appear, up to threads - 1 (the thread that
// walks works too once the walk is done).
//
// Generic over the job and over each worker's scratch state (a zstd
// context): `admit` runs on the producer for every job added, in order;
// `process` on a worker (or on the producer in finish()); `drained` on each
// worker that finds the queue empty and closed.
template <typename Job, typename Scratch>
class JobQueue {
 public:
  using Process = std::function<void(Job&, Scratch&)>;
  JobQueue(unsigned threads, Process process, std::function<void(Job&)> admit = {},
           std::function<void()> drained = {})
      : process_(std::move(process)),
        admit_(std::move(admit)),
        drained_(std::move(drained)),
        max_workers_(std::max(1u, threads) - 1) {}
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;
  // After finish() there is nothing left to stop. Before it (the walk threw)
  // the jobs not yet taken are dropped and the workers stopped.
  ~JobQueue() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
      next_ = ready_.size();
    }
    available_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  // Producer side (one thread).
  void add(Job job) {
    if (admit_) admit_(job);
    pending_.push_back(std::move(job));
  }
  void publish() {
    if (pending_.empty()) return;
    batches_.push_back(std::make_unique<std::vector<Job>>(std::move(pending_)));
    pending_ = {};
    size_t published, wake;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Job& j : *batches_.back()) ready_.push_back(&j);
      published = ready_.size();
      wake = std::min(idle_, batches_.back()->size());
    }
    // One wake-up per new job: waking every idle worker for each container
    // (a job or two) cost more than the walk on many threads.
    for (size_t i = 0; i < wake; ++i) available_.notify_one();
    while (workers_.size() < std::min(max_workers_, published)) {
      try {
        workers_.emplace_back([this] { work(); });
      } catch (const std::system_error&) {
        max_workers_ = workers_.size();  // the system allows no more threads: go on with these
      }
    }
  }
  // Ends the walk: processes the remaining jobs on this thread too and waits
  // for the workers. Afterwards jobs() lists every job in walk order.
  void finish() {
    close();
    work();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }
  const std::vector<Job*>& jobs() const { return ready_; }

 private:
  void close() {
    publish();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    available_.notify_all();
  }
  Job* take() {
    std::unique_lock<std::mutex> lock(mutex_);
    ++idle_;
    available_.wait(lock, [&] { return next_ < ready_.size() || closed_; });
    --idle_;
    return next_ < ready_.size() ? ready_[next_++] : nullptr;
  }
  void work() {
    Scratch scratch;
    while (Job* job = take()) process_(*job, scratch);
    if (drained_) drained_();
  }

  Process process_;
  std::function<void(Job&)> admit_;
  std::function<void()> drained_;
  size_t max_workers_;
  std::vector<Job> pending_;                             // producer only
  std::vector<std::unique_ptr<std::vector<Job>>> batches_;  // producer only; jobs stay put
  std::vector<std::thread> workers_;                     // producer only
  std::mutex mutex_;
  std::condition_variable available_;
  std::vector<Job*> ready_;  // published jobs in walk order (guarded until finish)
  size_t next_ = 0;
  size_t idle_ = 0;  // workers in take()
  bool closed_ = false;
};

}  // namespace tvmffi_jit::devcode
