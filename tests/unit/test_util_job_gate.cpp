// util::JobGate: slots and memory admission shared by every job of a build or batch.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tvmffi_jit/util/job_gate.h"

using namespace tvmffi_jit;

TEST_CASE("the job gate never reserves more memory than its budget", "[util][job_gate]") {
  util::JobGate gate(8, 10);  // 8 slots, 10 bytes
  std::atomic<int> running{0}, most{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 12; ++i)
    threads.emplace_back([&] {
      util::JobGate::Ticket t = gate.acquire(1, 4);  // at most two fit in 10 bytes
      int now = ++running;
      int m = most.load();
      while (now > m && !most.compare_exchange_weak(m, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      --running;
    });
  for (auto& t : threads) t.join();
  CHECK(most.load() <= 2);
  CHECK(gate.peak_reserved_bytes() <= 10);
  CHECK(gate.peak_reserved_bytes() == 8);
}

TEST_CASE("the job gate never runs more jobs than its slots", "[util][job_gate]") {
  util::JobGate gate(3, 0);  // memory unlimited
  std::atomic<int> running{0}, most{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 10; ++i)
    threads.emplace_back([&] {
      util::JobGate::Ticket t = gate.acquire(1, 1u << 30);
      int now = ++running;
      int m = most.load();
      while (now > m && !most.compare_exchange_weak(m, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      --running;
    });
  for (auto& t : threads) t.join();
  CHECK(most.load() <= 3);
  CHECK(gate.peak_slots() <= 3);
}

TEST_CASE("a job larger than the whole memory budget runs alone instead of never", "[util][job_gate]") {
  util::JobGate gate(4, 100);
  util::JobGate::Ticket t = gate.acquire(1, 1000);
  CHECK(t.slots() == 1);
  CHECK(t.bytes() == 100);
}

TEST_CASE("idle slots go to a multi-slot job only when nobody waits", "[util][job_gate]") {
  util::JobGate gate(4, 0);
  {
    util::JobGate::Ticket t = gate.acquire(3, 1);
    CHECK(t.slots() == 3);  // nothing else wants the cores: nvcc --threads 3
    util::JobGate::Ticket u = gate.acquire(3, 1);
    CHECK(u.slots() == 1);  // only one slot left
  }
  // Slots are back after the tickets go.
  util::JobGate::Ticket v = gate.acquire(4, 1);
  CHECK(v.slots() == 4);
}

TEST_CASE("extra slots are bounded by memory as well", "[util][job_gate]") {
  util::JobGate gate(8, 10);
  util::JobGate::Ticket t = gate.acquire(4, 4);
  CHECK(t.slots() == 2);
  CHECK(t.bytes() == 8);
}

TEST_CASE("a moved ticket releases its reservation once", "[util][job_gate]") {
  util::JobGate gate(1, 0);
  {
    util::JobGate::Ticket a = gate.acquire(1, 1);
    util::JobGate::Ticket b = std::move(a);
    CHECK(b.slots() == 1);
  }
  util::JobGate::Ticket c = gate.acquire(1, 1);  // would block forever if the slot leaked
  CHECK(c.slots() == 1);
}

TEST_CASE("MemAvailable is read from meminfo text in bytes", "[util][job_gate]") {
  CHECK(util::parse_meminfo_available("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   21000000 kB\n") ==
        21000000ull * 1024);
  CHECK_FALSE(util::parse_meminfo_available("MemTotal: 1 kB\n"));
  CHECK_FALSE(util::parse_meminfo_available("MemAvailable: lots kB\n"));
  CHECK_FALSE(util::parse_meminfo_available("MemAvailable: 99999999999999999999 kB\n"));
  CHECK(util::available_memory_bytes().value_or(0) > 0);
}

TEST_CASE("a link (finish priority) goes before compiles that queued earlier", "[util][job_gate]") {
  util::JobGate gate(1, 0);
  util::JobGate::Ticket busy = gate.acquire(1, 1);
  std::atomic<int> order{0};
  int compile_turn = 0, link_turn = 0;
  std::atomic<bool> compile_queued{false};
  std::thread compile([&] {
    compile_queued = true;
    util::JobGate::Ticket t = gate.acquire(1, 1);
    compile_turn = ++order;
  });
  while (!compile_queued) std::this_thread::yield();
  // The compile has its queue number once it waits; wait until it does.
  while (gate.waiting() < 1) std::this_thread::yield();
  std::thread link([&] {
    util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kFinish);
    link_turn = ++order;
  });
  while (gate.waiting() < 2) std::this_thread::yield();
  busy = util::JobGate::Ticket();  // frees the one slot
  compile.join();
  link.join();
  CHECK(link_turn == 1);
  CHECK(compile_turn == 2);
}

TEST_CASE("a learned reservation follows the largest job seen, not the default", "[util][job_gate]") {
  util::JobMemoryEstimate learned(4ull << 30, true);
  CHECK(learned.reservation() == 4ull << 30);  // nothing seen yet: the configured value
  learned.observe(400ull << 20);
  CHECK(learned.reservation() == 500ull << 20);  // 5/4 of the largest
  learned.observe(100ull << 20);
  CHECK(learned.reservation() == 500ull << 20);
  learned.observe(1ull << 20);
  util::JobMemoryEstimate tiny(4ull << 30, true);
  tiny.observe(1ull << 20);
  CHECK(tiny.reservation() == 64ull << 20);  // never under 64 MiB
  util::JobMemoryEstimate fixed(4ull << 30, false);  // --mem-per-job given
  fixed.observe(400ull << 20);
  CHECK(fixed.reservation() == 4ull << 30);
}

TEST_CASE("among waiting compiles the heavier (an nvcc job) starts first", "[util][job_gate]") {
  util::JobGate gate(1, 0);
  util::JobGate::Ticket busy = gate.acquire(1, 1);
  std::atomic<int> order{0};
  int light_turn = 0, heavy_turn = 0;
  std::thread light([&] {
    util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kNormal, 1.0);
    light_turn = ++order;
  });
  while (gate.waiting() < 1) std::this_thread::yield();
  std::thread heavy([&] {
    util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kNormal, 4.0);
    heavy_turn = ++order;
  });
  while (gate.waiting() < 2) std::this_thread::yield();
  busy = util::JobGate::Ticket();
  light.join();
  heavy.join();
  CHECK(heavy_turn == 1);
  CHECK(light_turn == 2);
}

TEST_CASE("a held gate admits no job until every module of the batch has checked in", "[util][job_gate]") {
  util::JobGate gate(1, 0);
  gate.hold(2, std::chrono::minutes(10));  // two modules start; the limit never comes into play here
  std::atomic<int> order{0};
  int light_turn = 0, heavy_turn = 0;
  util::JobGate::Party light_module(&gate);
  // The host compile's module computes its keys first and asks while the slot is free...
  std::thread light([&] {
    util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kNormal, 1.0, &light_module);
    light_turn = ++order;
  });
  while (gate.waiting() < 1) std::this_thread::yield();
  CHECK(order.load() == 0);  // ...and still waits: one module has not checked in
  // ...so the nvcc job, which asks later, is served first.
  util::JobGate::Party heavy_module(&gate);
  std::thread heavy([&] {
    util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kNormal, 4.0, &heavy_module);
    heavy_turn = ++order;
  });
  light.join();
  heavy.join();
  CHECK(heavy_turn == 1);
  CHECK(light_turn == 2);
}

namespace {
// A module's job that asks the held gate from its own thread; returns once it waits there.
std::thread queue_job(util::JobGate& gate, util::JobGate::Party& module, std::atomic<bool>& admitted) {
  std::thread job([&] {
    util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kNormal, 1.0, &module);
    admitted = true;
  });
  while (gate.waiting() < 1) std::this_thread::yield();
  return job;
}
}  // namespace

TEST_CASE("a module that ends without a job checks in, so the hold cannot outlive it", "[util][job_gate]") {
  util::JobGate gate(2, 0);
  gate.hold(2, std::chrono::minutes(10));
  util::JobGate::Party waiting_module(&gate);
  std::atomic<bool> admitted{false};
  std::thread job = queue_job(gate, waiting_module, admitted);
  CHECK_FALSE(admitted.load());
  {
    util::JobGate::Party hit_module(&gate);  // a cache hit: no job, checks in when it ends
  }
  job.join();
  CHECK(admitted.load());
}

TEST_CASE("a hold ends at its time limit even if a module never checks in", "[util][job_gate]") {
  util::JobGate gate(1, 0);
  gate.hold(2, std::chrono::milliseconds(50));  // the second module is stuck elsewhere
  util::JobGate::Party module(&gate);
  util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kNormal, 1.0, &module);
  CHECK(t.slots() == 1);
}

TEST_CASE("release_hold admits the waiting jobs at once", "[util][job_gate]") {
  util::JobGate gate(1, 0);
  gate.hold(3, std::chrono::minutes(10));
  util::JobGate::Party module(&gate);
  std::atomic<bool> admitted{false};
  std::thread job = queue_job(gate, module, admitted);
  CHECK_FALSE(admitted.load());
  gate.release_hold();  // a module failed without --keep-going
  job.join();
  CHECK(admitted.load());
}

TEST_CASE("a job longer than its share of the work left gets more slots while others wait", "[util][job_gate]") {
  // Eight jobs queue before any starts (the batch's start hold) on 4 slots.
  // One of 20 s and seven of 5 s: a fair share is (20 + 7 * 5) / 4 = 13.75 s,
  // so the long one, which would end last on one core, asks for
  // ceil(20 / 13.75) = 2. Eight equal jobs: nobody is longer than its share.
  auto first_admitted = [](double heavy, double light) {
    util::JobGate gate(4, 0);
    gate.hold(8, std::chrono::seconds(20));
    std::mutex mutex;
    // (admission, weight, slots): a thread returning from acquire() may record
    // after one admitted later, so the gate's own order sorts them.
    std::vector<std::tuple<uint64_t, double, int>> admitted;
    auto job = [&](double weight) {
      util::JobGate::Party party(&gate);
      util::JobGate::Ticket t = gate.acquire(4, 1, util::JobGate::Priority::kNormal, weight, &party);
      std::lock_guard<std::mutex> lock(mutex);
      admitted.emplace_back(t.admission(), weight, t.slots());
    };
    std::vector<std::thread> threads;
    threads.emplace_back(job, heavy);
    for (int i = 0; i < 7; ++i) threads.emplace_back(job, light);
    for (auto& t : threads) t.join();
    REQUIRE(admitted.size() == 8);
    std::sort(admitted.begin(), admitted.end());
    CHECK(std::get<0>(admitted.front()) == 0);
    return std::make_pair(std::get<1>(admitted.front()), std::get<2>(admitted.front()));
  };
  CHECK(first_admitted(20, 5) == std::make_pair(20.0, 2));  // heaviest first, on two slots
  CHECK(first_admitted(5, 5).second == 1);
}

TEST_CASE("the critical path asks for the slots that end a job by the floor, its serial part counted",
          "[util][job_gate]") {
  using Shape = util::JobGate::Shape;
  // FlashInfer's MoE unit: 263 s of which 70 s serial; a floor of 125 s (the
  // batch's 2000 CPU-s over 16 slots): 70 + 193 / n <= 125 for n = 4.
  CHECK(util::JobGate::slots_to_meet(Shape{263, 70, {}}, 125, 8) == 4);
  // Perfect scaling (no serial part given): 263 / 125 -> 3.
  CHECK(util::JobGate::slots_to_meet(Shape{263, -1, {}}, 125, 8) == 3);
  // Its serial part alone passes the floor: every slot it may use.
  CHECK(util::JobGate::slots_to_meet(Shape{263, 130, {}}, 125, 8) == 8);
  // Within the floor on one slot: one; never past max_slots.
  CHECK(util::JobGate::slots_to_meet(Shape{100, 10, {}}, 125, 8) == 1);
  CHECK(util::JobGate::slots_to_meet(Shape{1000, 100, {}}, 101, 8) == 8);
  CHECK(util::JobGate::slots_to_meet(Shape{1000, 100, {}}, 101, 2) == 2);
}

TEST_CASE("waiters of equal weight are served by their key, not by arrival", "[util][job_gate]") {
  util::JobGate gate(1, 0);
  util::JobGate::Ticket busy = gate.acquire(1, 1);
  std::mutex mutex;
  std::vector<std::string> served;
  std::vector<std::thread> threads;
  for (const char* key : {"m/c.cu", "m/a.cu", "m/b.cu"}) {
    threads.emplace_back([&, key] {
      util::JobGate::Ticket t =
          gate.acquire(1, 1, util::JobGate::Priority::kNormal, util::JobGate::Shape{5, -1, key});
      std::lock_guard<std::mutex> lock(mutex);
      served.push_back(key);
    });
    while (gate.waiting() < threads.size()) std::this_thread::yield();  // arrival order: c, a, b
  }
  busy = util::JobGate::Ticket();
  for (auto& t : threads) t.join();
  CHECK(served == std::vector<std::string>{"m/a.cu", "m/b.cu", "m/c.cu"});
}

TEST_CASE("the floor counts the slots the long jobs hold through their serial passes", "[util][job_gate]") {
  using Shape = util::JobGate::Shape;
  // FlashInfer-like: four 263 s units (70 s serial), one of 250 s (60 s
  // serial), 61 of 20 s, on 16 slots. The work over the slots is 157.6 s, at
  // which each long unit would take 3 slots: 5 x 3 slots held for 157.6 s
  // plus the short ones' 1220 s do not fit in 16 x 157.6. The least floor
  // at which they fit is 203.3 s (2 slots each: 2 x 5 x 203.3 + 1220 = 16 x 203.3).
  std::vector<std::pair<Shape, int>> jobs(4, {Shape{263, 70, {}}, 8});
  jobs.push_back({Shape{250, 60, {}}, 8});
  for (int i = 0; i < 61; ++i) jobs.push_back({Shape{20, 7, {}}, 8});
  const double plain = (4 * 263 + 250 + 61 * 20) / 16.0;
  CHECK(util::JobGate::slots_to_meet(Shape{263, 70, {}}, plain, 8) == 3);
  const double floor = util::JobGate::floor_with_long_jobs(jobs, 0, 16);
  CHECK(floor == Approx(203.33).epsilon(0.01));
  CHECK(util::JobGate::slots_to_meet(Shape{263, 70, {}}, floor, 8) == 2);
  CHECK(util::JobGate::slots_to_meet(Shape{250, 60, {}}, floor, 8) == 2);
  // No long job: the plain floor.
  std::vector<std::pair<Shape, int>> even(32, {Shape{20, 7, {}}, 8});
  CHECK(util::JobGate::floor_with_long_jobs(even, 0, 16) == Approx(40));
}

namespace {
// A compiler thread's side of the jobserver, as nvcc --jobserver does it:
// the fifo named in MAKEFLAGS, opened on its own, one byte per extra thread.
class JobserverClient {
 public:
  explicit JobserverClient(const std::string& makeflags) {
    const std::string key = "--jobserver-auth=fifo:";
    const auto at = makeflags.find(key);
    REQUIRE(at != std::string::npos);
    fd_ = ::open(makeflags.substr(at + key.size()).c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(fd_ >= 0);
  }
  ~JobserverClient() { ::close(fd_); }
  bool take() {
    char c;
    return ::read(fd_, &c, 1) == 1;
  }
  void give() { REQUIRE(::write(fd_, "+", 1) == 1); }
  int take_all() {
    int n = 0;
    while (take()) ++n;
    return n;
  }

 private:
  int fd_ = -1;
};
}  // namespace

TEST_CASE("idle slots are lent to the compilers' threads only while nobody waits", "[util][job_gate][jobserver]") {
  util::JobGate gate(4, 0, /*lend_idle_slots=*/true);
  auto makeflags = gate.jobserver_makeflags();
  REQUIRE(makeflags);
  CHECK(makeflags->rfind("-j4 --jobserver-auth=fifo:", 0) == 0);
  JobserverClient compiler(*makeflags);
  {
    util::JobGate::Ticket running = gate.acquire(1, 1);
    // One job runs, nobody waits: its compiler may take the other three cores.
    CHECK(gate.lent_slots() == 3);
    CHECK(compiler.take_all() == 3);
    for (int i = 0; i < 3; ++i) compiler.give();  // the split passes end
  }
  // The job ended: all four are lent, and a new job takes one back at once.
  CHECK(gate.lent_slots() == 4);
  util::JobGate::Ticket next = gate.acquire(1, 1);
  CHECK(next.slots() == 1);
  CHECK(gate.lent_slots() == 3);
}

TEST_CASE("a job waits for a lent slot until a compiler thread gives it back, never beside it",
          "[util][job_gate][jobserver]") {
  util::JobGate gate(2, 0, /*lend_idle_slots=*/true);
  JobserverClient compiler(*gate.jobserver_makeflags());
  util::JobGate::Ticket running = gate.acquire(1, 1);
  REQUIRE(compiler.take());  // the running job's nvcc took the idle core for a pass
  CHECK_FALSE(compiler.take());
  std::atomic<bool> admitted{false};
  std::thread waiter([&] {
    util::JobGate::Ticket t = gate.acquire(1, 1);
    admitted = true;
  });
  while (gate.waiting() < 1) std::this_thread::yield();
  // Both cores are busy (the job and its compiler's thread): the new job waits...
  CHECK_FALSE(admitted.load());
  CHECK(gate.lent_slots() == 1);  // ...and has not taken the token in use
  compiler.give();  // ...until the pass ends and its token comes back
  waiter.join();
  CHECK(admitted.load());
}

TEST_CASE("nothing is lent while jobs wait: their slots go to them first", "[util][job_gate][jobserver]") {
  util::JobGate gate(2, 0, /*lend_idle_slots=*/true);
  JobserverClient compiler(*gate.jobserver_makeflags());
  gate.hold(1, std::chrono::minutes(10));
  util::JobGate::Party module(&gate);
  std::vector<std::thread> jobs;
  std::atomic<int> started{0};
  std::atomic<bool> done{false};
  for (int i = 0; i < 3; ++i)
    jobs.emplace_back([&] {
      util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kNormal, 1.0, &module);
      ++started;
      while (!done.load()) std::this_thread::yield();
    });
  while (started.load() < 2) std::this_thread::yield();
  // Two run, one waits: no token for a compiler thread.
  CHECK(gate.lent_slots() == 0);
  CHECK_FALSE(compiler.take());
  done = true;
  for (auto& j : jobs) j.join();
  CHECK(gate.lent_slots() == 2);  // the build is over: every slot idles, lent
}

TEST_CASE("a gate made without lending, or told to stop, lends nothing", "[util][job_gate][jobserver]") {
  util::JobGate plain(4, 0);
  CHECK_FALSE(plain.jobserver_makeflags());
  util::JobGate gate(4, 0, true);
  REQUIRE(gate.jobserver_makeflags());
  gate.stop_lending();  // a compiler refused --jobserver
  CHECK_FALSE(gate.jobserver_makeflags());
  util::JobGate::Ticket t = gate.acquire(1, 1);
  CHECK(gate.lent_slots() == 0);
}

TEST_CASE("lent slots count against the memory budget like the jobs' own", "[util][job_gate][jobserver]") {
  util::JobGate gate(4, 10, true);  // 4 slots, 10 bytes
  REQUIRE(gate.jobserver_makeflags());
  {
    util::JobGate::Ticket running = gate.acquire(1, 4);  // a job of 4 bytes per slot
    // Three slots idle, but memory for one more thread of that size only.
    CHECK(gate.lent_slots() == 1);
    CHECK(gate.peak_reserved_bytes() <= 10);
  }
  // Its slot and memory are back: two threads of 4 fit in 10.
  CHECK(gate.lent_slots() == 2);
  // A job that needs the memory takes the lent slots back (nobody uses them).
  util::JobGate::Ticket big = gate.acquire(1, 8);
  CHECK(big.bytes() == 8);
  CHECK(gate.lent_slots() == 0);
  CHECK(gate.peak_reserved_bytes() <= 10);
}
