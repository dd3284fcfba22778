// The inspector's format-independent parallel machinery (src/devcode/scheduler.h):
// the decompression arena, the job queue and the demangle memo.
#include <catch2/catch.hpp>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "devcode/parsers.h"
#include "devcode/scheduler.h"

using namespace tvmffi_jit::devcode;

namespace {
constexpr uint64_t kGranule = 64 << 10;  // the arena hands out whole 64 KiB granules
}

TEST_CASE("arena ranges never overlap and never exceed the budget together, on many threads",
          "[devcode][scheduler]") {
  const uint64_t budget = 16 * kGranule;
  DecompressArena arena(budget);
  std::atomic<uint64_t> in_use{0}, peak{0};
  std::atomic<bool> overlap{false};
  std::vector<std::atomic<int>> owner(budget / kGranule);
  for (auto& o : owner) o = -1;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 300; ++i) {
        uint64_t n = 1 + rng() % (5 * kGranule);
        DecompressArena::Range r = arena.acquire(n);
        REQUIRE(r.size >= n);
        REQUIRE_FALSE(r.own_mapping);
        uint64_t now = in_use += r.size;
        uint64_t p = peak;
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        for (uint64_t g = r.offset / kGranule; g < (r.offset + r.size) / kGranule; ++g) {
          int expected = -1;
          if (!owner[g].compare_exchange_strong(expected, t)) overlap = true;
        }
        r.data[0] = 1;  // the memory is usable
        r.data[r.size - 1] = 1;
        for (uint64_t g = r.offset / kGranule; g < (r.offset + r.size) / kGranule; ++g) owner[g] = -1;
        in_use -= r.size;
        arena.release(r);
      }
      arena.trim();
    });
  }
  for (auto& t : threads) t.join();
  CHECK_FALSE(overlap);
  CHECK(peak <= budget);
  CHECK(in_use == 0);
}

TEST_CASE("a request larger than the arena gets a mapping of its own once nothing else is in use",
          "[devcode][scheduler]") {
  DecompressArena arena(2 * kGranule);
  DecompressArena::Range small = arena.acquire(kGranule);
  std::atomic<bool> got{false};
  std::thread big([&] {
    DecompressArena::Range r = arena.acquire(10 * kGranule);
    CHECK(r.own_mapping);
    CHECK(r.size >= 10 * kGranule);
    r.data[r.size - 1] = 1;
    got = true;
    arena.release(r);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(got);  // waits while the small range is out
  arena.release(small);
  big.join();
  CHECK(got);
  // Freed ranges coalesce: the whole budget is one range again.
  DecompressArena::Range all = arena.acquire(2 * kGranule);
  CHECK_FALSE(all.own_mapping);
  CHECK(all.offset == 0);
  arena.release(all);
}

namespace {
struct Counter {
  int processed = 0;  // per-worker scratch: each worker gets its own
};
}  // namespace

TEST_CASE("the job queue processes every job once and lists them in the order they were added",
          "[devcode][scheduler]") {
  for (unsigned threads : {1u, 2u, 7u}) {
    std::atomic<int> processed{0}, admitted{0}, drained{0};
    std::vector<std::atomic<int>> seen(5000);
    JobQueue<int, Counter> q(
        threads,
        [&](int& job, Counter& c) {
          ++seen[job];
          ++c.processed;
          ++processed;
          job = -job;  // the job is the queue's and stays put until the end
        },
        [&](int&) { ++admitted; }, [&] { ++drained; });
    int next = 0;
    for (int batch = 0; batch < 50; ++batch) {  // published in batches, as the walk does per container
      for (int i = 0; i < 100; ++i) q.add(next++);
      q.publish();
    }
    q.finish();
    CHECK(processed == 5000);
    CHECK(admitted == 5000);
    CHECK(drained >= 1);
    REQUIRE(q.jobs().size() == 5000);
    for (int i = 0; i < 5000; ++i) {
      CHECK(seen[i] == 1);
      CHECK(*q.jobs()[i] == -i);
    }
  }
}

TEST_CASE("a job queue dropped before finish() stops its workers without processing the rest",
          "[devcode][scheduler]") {
  std::atomic<int> processed{0};
  {
    JobQueue<int, Counter> q(4, [&](int&, Counter&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ++processed;
    });
    for (int i = 0; i < 2000; ++i) q.add(i);
    q.publish();
  }  // as when a walk throws: the destructor closes the queue and joins
  CHECK(processed < 2000);
}

TEST_CASE("the demangle memo gives every kernel the demangled form of its name, on many threads",
          "[devcode][scheduler]") {
  DemangleMemo memo;
  const std::vector<std::string> names = {"_Z3addPfS_i", "_Z4smemPf", "_Z3locIfEvPT_1Bi", "_Znot_mangled"};
  std::vector<std::vector<Kernel>> per_thread(6, std::vector<Kernel>(400));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < per_thread.size(); ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < per_thread[t].size(); ++i) {
        Kernel& k = per_thread[t][i];
        k.name = names[(i + t) % names.size()];
        memo.demangle_into(k);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& kernels : per_thread)
    for (const Kernel& k : kernels) CHECK(k.demangled == demangle(k.name));
  CHECK(demangle("_Z3addPfS_i") == "add(float*, float*, int)");
}
