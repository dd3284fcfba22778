// Admission of concurrent jobs against two budgets: job slots (-j) and memory
// (bytes). One gate is shared by every compile and link of a build, or of a
// whole batch of modules, so that `-j 16` on a machine whose memory holds only
// four nvcc processes runs four, not sixteen (nvcc of a large CUDA unit peaks
// at several GB; reference numbers in docs/farm.md).
//
// Waiters are served in one order (class, weight, arrival; see acquire()) and
// only the first may start: a job needing much memory is not starved by a
// stream of small ones. A request larger than the whole memory budget is clamped to it, so
// it runs alone rather than never.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <string_view>
#include <utility>
#include <vector>

namespace tvmffi_jit::util {

class Jobserver;  // util/jobserver.h

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
    // 0 for the first job this gate admitted, then 1, 2, ...: the order the
    // gate chose, which threads returning from acquire() may not keep.
    uint64_t admission() const { return admission_; }

   private:
    friend class JobGate;
    void release();
    JobGate* gate_ = nullptr;
    int slots_ = 0;
    uint64_t bytes_ = 0;
    double weight_ = 0;
    uint64_t admission_ = 0;
  };

  // slots <= 0: one per core. memory_bytes 0: unlimited. lend_idle_slots:
  // jobserver_makeflags() may lend (below); off, a job's threads are only
  // the slots it holds.
  JobGate(int slots, uint64_t memory_bytes, bool lend_idle_slots = false);
  ~JobGate();
  JobGate(const JobGate&) = delete;
  JobGate& operator=(const JobGate&) = delete;

  // Waiters are served by priority class, then by weight (larger first),
  // then in arrival order. kFinish (a module's link, which ends a module and
  // frees its artifact) goes before every kNormal waiter, so links do not wait
  // behind a whole batch's compiles queued before them. Among compiles, the
  // heavier go first (an nvcc job before a host compile): a long job started
  // last would run alone at the end while the cores idle.
  enum class Priority { kNormal, kFinish };

  // One module of a batch, for hold(): it checks in when its first job asks
  // the gate, or when it ends without asking (a cache hit, a failure), once.
  // Its jobs may run on several threads.
  class Party {
   public:
    explicit Party(JobGate* gate) : gate_(gate) {}
    Party(const Party&) = delete;
    Party& operator=(const Party&) = delete;
    ~Party() { check_in(); }
    void check_in();

   private:
    friend class JobGate;
    JobGate* gate_;
    std::atomic<bool> checked_in_{false};
  };

  // A batch's start: no job is admitted until `parties` modules have checked
  // in or `max_wait` has passed, so the first jobs are chosen from every
  // module's (heaviest first) instead of going to whichever module computed
  // its cache keys soonest (host compiles, whose keys are quicker, took cores
  // that nvcc jobs then lacked at the end). The time limit bounds what a
  // module that waits on something else before its first job (a unit another
  // module compiles) can cost; it never decides correctness. Check-ins past
  // `parties` are ignored.
  void hold(size_t parties, std::chrono::milliseconds max_wait);
  void release_hold();  // e.g. a module failed: the batch is ending

  // What a job tells the gate beyond its slots and memory: its order among
  // the waiters and how its seconds shrink with more slots.
  struct Shape {
    // Its expected seconds on one slot (its chain: larger first).
    double weight = 0;
    // The part of `weight` that no slot more shortens (nvcc's host passes,
    // its module's link). Negative: all of it shortens, weight / slots.
    double serial = -1;
    // Breaks ties between equal weights (a stable name: the module and the
    // output), so the order never depends on which thread asked first.
    std::string key = {};
  };

  // A job gets one slot, and more (up to max_slots: nvcc --split-compile
  // runs that many threads) when the cores would otherwise idle while it runs
  // on: when nobody waits (the tail of a build), or when its weight is longer
  // than the floor, a fair share of the work left (the weights of every
  // waiting and running job over the slots), so that it would end last
  // however the others are scheduled (the critical path). Then it asks for
  // the slots that make it end by the floor, serial + (weight - serial) / n
  // <= floor (every slot it can use when the serial part alone passes the
  // floor), and takes those that are free: a job never gets more slots than
  // are free, so the threads of the jobs running never exceed the slots.
  Ticket acquire(int max_slots, uint64_t bytes_per_slot, Priority priority, const Shape& shape,
                 Party* party = nullptr);
  Ticket acquire(int max_slots, uint64_t bytes_per_slot, Priority priority = Priority::kNormal, double weight = 0,
                 Party* party = nullptr) {
    return acquire(max_slots, bytes_per_slot, priority, Shape{weight, -1, {}}, party);
  }
  // The slots a job of `shape` asks for when the floor is `floor` seconds
  // (the critical-path rule above; 1 when it ends by the floor on one).
  static int slots_to_meet(const Shape& shape, double floor, int max_slots);
  // A job that holds n slots to end by the floor T holds them for T
  // seconds, its serial passes included, so the long jobs together need more
  // slot-seconds than their CPU seconds: the floor the gate uses is the
  // least T at which every job fits, sum over jobs longer than T of
  // slots_to_meet(job, T) * T, plus the weights of the others and of the
  // jobs running, within slots * T (never under the work left over the
  // slots). Without it the first long jobs would each take the slots that
  // end them by the plain floor, and the next long one would find none.
  // `jobs`: (shape, max_slots) of the job being admitted and of every waiter.
  static double floor_with_long_jobs(const std::vector<std::pair<Shape, int>>& jobs, double running_weight,
                                     int slots);

  // Lending (util/jobserver.h; a gate made with lend_idle_slots): from the
  // first call on, the slots nobody waits for (the tail of a build, a build
  // smaller than -j) are lent to the running jobs' compilers as jobserver
  // tokens, and taken back one by one when a job asks for a slot (or for
  // memory) and none is free (a token comes back when the compiler thread
  // holding it ends its pass; the waiter looks every few milliseconds).
  // Within a memory budget each lent slot reserves what a slot of the
  // largest job admitted so far does, and fewer are lent when it would pass.
  // Returns the MAKEFLAGS value for such a job's compiler; nullopt when the
  // gate does not lend, or the fifo cannot be made (the job then runs as it
  // would without lending).
  std::optional<std::string> jobserver_makeflags();
  // A compiler refused the jobserver (an nvcc older than --jobserver): no
  // more lending from now on; what was lent comes back as jobs ask for it.
  void stop_lending();
  // Slots lent now (tests), and those of them a compiler thread holds now
  // (the job trace's samples).
  int lent_slots() const;
  int lent_in_use() const;

  int slots() const { return slots_; }
  uint64_t memory_bytes() const { return memory_; }  // 0: unlimited
  // The most memory ever reserved at once (for tests and benchmarks).
  uint64_t peak_reserved_bytes() const;
  int peak_slots() const;
  size_t waiting() const;  // callers blocked in acquire() now (tests)

 private:
  void give_back(int slots, uint64_t bytes, double weight);
  void checked_in();  // mutex_ not held
  void count_check_in();  // mutex_ held
  void lend_idle_locked();      // mutex_ held: nobody waits, so the free slots go to the jobserver
  bool take_back_one_locked();  // mutex_ held: one lent token back, if one is in the fifo now
  // (-class, -weight, key, arrival): the serving order of queue_.
  using Waiter = std::tuple<int, double, std::string, uint64_t>;
  bool fits_locked(int slots, uint64_t bytes_per_slot) const;
  // Until `me` is first in line and one slot (and its memory) is free.
  void wait_for_turn_locked(std::unique_lock<std::mutex>& lock, const Waiter& me, uint64_t bytes_per_slot);
  // The slots an admitted job asks for (acquire()'s rule: the tail, the critical path).
  int slots_wanted_locked(const Shape& shape, double counted, int max_slots) const;

  const int slots_;
  const uint64_t memory_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int free_slots_;
  uint64_t reserved_ = 0;
  uint64_t peak_reserved_ = 0;
  int peak_slots_ = 0;
  // The waiters in serving order: (-class, -weight, key, arrival).
  std::set<Waiter> queue_;
  // The kNormal waiters' shapes and max slots, by arrival (floor_with_long_jobs).
  std::map<uint64_t, std::pair<Shape, int>> shapes_;
  uint64_t arrivals_ = 0;
  uint64_t admissions_ = 0;
  size_t waiting_ = 0;
  double waiting_weight_ = 0;  // the weights of the jobs in queue_ (kNormal)
  double running_weight_ = 0;  // the weights of the admitted jobs not yet given back
  size_t held_for_ = 0;  // parties hold() still waits for
  bool lend_;                                   // jobserver_makeflags() may lend
  std::unique_ptr<Jobserver> jobserver_;  // lending on (jobserver_makeflags())
  int lent_ = 0;                                // tokens written and not taken back
  uint64_t lent_bytes_ = 0;                     // what they reserve (memory budget only)
  uint64_t lend_bytes_per_slot_ = 0;            // a lent slot's reservation: the largest job slot's so far
  std::chrono::steady_clock::time_point hold_until_;
};

// What one kind of job (an nvcc compile, a host compile or link) is assumed to
// need in the gate: the configured reservation until a job of the kind has
// finished, then 5/4 of the largest peak seen (never under 64 MiB). nvcc of a
// small kernel peaks near 0.5 GiB against the 4 GiB default (docs/farm.md), so
// learning lets a memory-bound machine run eight of them instead of one.
// Jobs running when a larger peak is seen keep their reservation; a job of a
// different size than all before it can exceed its reservation once.
// With `learn` false (the user gave --mem-per-job) the configured value stays.
class JobMemoryEstimate {
 public:
  JobMemoryEstimate(uint64_t configured, bool learn) : configured_(configured), learn_(learn) {}
  uint64_t reservation() const;
  void observe(uint64_t peak_bytes);
  uint64_t largest_seen() const;

 private:
  mutable std::mutex mutex_;
  const uint64_t configured_;
  const bool learn_;
  uint64_t largest_ = 0;
};

// MemAvailable from /proc/meminfo, in bytes; nullopt when it cannot be read.
std::optional<uint64_t> available_memory_bytes();
// The same, parsed from the text of a meminfo file (tests).
std::optional<uint64_t> parse_meminfo_available(std::string_view text);

}  // namespace tvmffi_jit::util
