// Admission of concurrent jobs against two budgets: job slots (-j) and memory
// (bytes). One gate is shared by every compile and link of a build, or of a
// whole batch of modules, so that `-j 16` on a machine whose memory holds only
// four nvcc processes runs four, not sixteen (nvcc of a large CUDA unit peaks
// at several GB; reference numbers in docs/farm.md).
//
// Waiters are served strictly in arrival order: a job needing much memory is
// not starved by a stream of small ones, and earlier modules of a batch finish
// first. A request larger than the whole memory budget is clamped to it, so
// it runs alone rather than never.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>

namespace tvmffi_jit::util {

class JobGate {
 public:
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket();
    int slots() const { return slots_; }
    uint64_t bytes() const { return bytes_; }

   private:
    friend class JobGate;
    void release();
    JobGate* gate_ = nullptr;
    int slots_ = 0;
    uint64_t bytes_ = 0;
  };

  // slots <= 0: one per core. memory_bytes 0: unlimited.
  JobGate(int slots, uint64_t memory_bytes);
  JobGate(const JobGate&) = delete;
  JobGate& operator=(const JobGate&) = delete;

  // Blocks until it is this caller's turn and at least one slot and
  // `bytes_per_slot` are free; then takes as many slots as are free, up to
  // `max_slots` (each with `bytes_per_slot`), but only one when others are
  // waiting behind it: spare cores go to a job that can use several (nvcc
  // --threads) only when nothing else wants them.
  Ticket acquire(int max_slots, uint64_t bytes_per_slot);

  int slots() const { return slots_; }
  uint64_t memory_bytes() const { return memory_; }  // 0: unlimited
  // The most memory ever reserved at once (for tests and benchmarks).
  uint64_t peak_reserved_bytes() const;
  int peak_slots() const;

 private:
  void give_back(int slots, uint64_t bytes);

  const int slots_;
  const uint64_t memory_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int free_slots_;
  uint64_t reserved_ = 0;
  uint64_t peak_reserved_ = 0;
  int peak_slots_ = 0;
  uint64_t next_ticket_ = 0;
  uint64_t serving_ = 0;
  size_t waiting_ = 0;
};

// MemAvailable from /proc/meminfo, in bytes; nullopt when it cannot be read.
std::optional<uint64_t> available_memory_bytes();
// The same, parsed from the text of a meminfo file (tests).
std::optional<uint64_t> parse_meminfo_available(std::string_view text);

}  // namespace tvmffi_jit::util
