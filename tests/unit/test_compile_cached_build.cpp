// cached_build() and a batch of modules through the storage the command
// injects (cache/storage.h): a real local store in a temp dir, remotes in
// memory (testing::make_memory_backend), and a runner that writes what a
// compiler would, so no compiler runs.
#include <catch2/catch.hpp>

#include "fake_build.h"
#include "memory_backend.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/remote/backend.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/compile/scheduler.h"
#include "tvmffi_jit/compile/cached_build.h"
#include "tvmffi_jit/compile/key.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/compile/runner.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;

namespace {

using testing::Project;
using testing::WritingRunner;
using testing::no_gpus;

std::vector<std::unique_ptr<cache::RemoteBackend>> memory(const std::shared_ptr<testing::MemoryServer>& server) {
  std::vector<std::unique_ptr<cache::RemoteBackend>> out;
  out.push_back(testing::make_memory_backend(server, "memory://team"));
  return out;
}

}  // namespace

TEST_CASE("a miss builds and publishes through the injected storage, which counts it; the next command hits",
          "[compile][cached_build]") {
  Project p;
  cache::Store store(cache::open_root(p.path("cache"), true));
  WritingRunner runner;
  const Manifest m = p.manifest("m1", R"("a.cc", "b.cc")");
  cache::StatsCounters first;
  {
    cache::Storage storage(store, {}, &first);
    CachedBuildResult r = p.build(m, storage, runner);
    CHECK(r.cache == cache::CacheStatus::kMiss);
    CHECK(r.stored);
    CHECK(r.objects_compiled == 2);
    CHECK(util::read_file(r.build.artifact_path) == "built\n");
  }
  const int runs = runner.runs;
  CHECK(runs >= 3);  // two compiles and the link
  // Module and objects were counted by the storage, not by compile.
  CHECK((first.misses == 1 && first.object_misses == 2 && first.stores == 3));

  cache::StatsCounters second;
  cache::Storage storage(store, {}, &second);
  CachedBuildResult hit = p.build(m, storage, runner);
  CHECK(hit.cache == cache::CacheStatus::kHit);
  CHECK(runner.runs == runs);  // nothing ran
  CHECK((second.hits == 1 && second.misses == 0));
  // Each module's counts reach the root's journal when cached_build returns.
  cache::StatsCounters journal = cache::read_stats(store.root());
  CHECK((journal.misses == 1 && journal.hits == 1 && journal.object_misses == 2));
}

TEST_CASE("a module uploaded from one root is a remote hit in another; its objects stay local",
          "[compile][cached_build]") {
  Project p;
  auto team = std::make_shared<testing::MemoryServer>();
  WritingRunner runner;
  const Manifest m = p.manifest("m1", R"("a.cc", "b.cc")");
  {
    cache::Store store_a(cache::open_root(p.path("cache-a"), true));
    cache::Storage storage(store_a, {}, nullptr, memory(team));
    CHECK(p.build(m, storage, runner).cache == cache::CacheStatus::kMiss);
  }
  CHECK(team->puts == 2);  // the module's result and its key's result list only: objects go through the local tier alone
  const int runs = runner.runs;

  cache::Store store_b(cache::open_root(p.path("cache-b"), true));
  cache::StatsCounters stats;
  cache::Storage storage(store_b, {}, &stats, memory(team));
  CachedBuildResult r = p.build(m, storage, runner);
  CHECK(r.cache == cache::CacheStatus::kRemoteHit);
  CHECK(r.remote_source == "memory://team");
  CHECK(runner.runs == runs);
  CHECK(stats.remote_hits == 1);
}

TEST_CASE("a batch sharing one storage gives a failing remote up once, for every module",
          "[compile][cached_build][batch]") {
  Project p;
  cache::Store store(cache::open_root(p.path("cache"), true));
  auto silent = std::make_shared<testing::MemoryServer>();
  silent->failing = cache::RemoteFailure{cache::RemoteFailureKind::kTimeout, "no answer (injected)"};
  cache::StatsCounters stats;
  cache::Storage storage(store, {}, &stats, memory(silent));
  WritingRunner runner;
  const std::vector<Manifest> modules = {p.manifest("m1", R"("a.cc")"), p.manifest("m2", R"("b.cc")"),
                                         p.manifest("m3", R"("c.cc")"), p.manifest("m4", R"("d.cc")")};
  BatchOptions bo;
  bo.concurrency = 4;
  std::vector<BatchItem> items = run_batch(modules.size(), bo, [&](size_t i, util::JobGate::Party*) {
    CachedBuildResult r = p.build(modules[i], storage, runner);
    BatchItem item;
    item.status = r.cache == cache::CacheStatus::kMiss ? BatchStatus::kBuilt : BatchStatus::kHit;
    return item;
  });
  for (const auto& item : items) CHECK(item.status == BatchStatus::kBuilt);
  CHECK(silent->gets == 1);  // the first module to ask gave it up for the others
  CHECK((stats.remote_errors == 1 && stats.remote_timeouts == 1 && stats.misses == 4));
  CHECK(batch_exit_code(items) == 0);
}

TEST_CASE("cached_build without the command's storage is an internal error, not a silent second store",
          "[compile][cached_build]") {
  Project p;
  WritingRunner runner;
  const Manifest m = p.manifest("m1", R"("a.cc")");
  cache::Store store(cache::open_root(p.path("cache"), true));
  cache::Storage storage(store, {});
  CachedBuildOptions o = p.options(storage, runner);
  o.storage = nullptr;
  CHECK_THROWS_WITH(cached_build(make_plan(m, p.tc, no_gpus()), m, p.tc, o),
                    Catch::Contains("without the command's storage"));
  CHECK(runner.runs == 0);
}
