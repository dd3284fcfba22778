// cli::build_module(): one module of a request, through the storage the
// command opened (a real local store in a temp dir, a remote in memory) and a
// runner that writes what a compiler would, so no compiler runs.
#include <catch2/catch.hpp>

#include "fake_build.h"
#include "memory_backend.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "cli/build_module.h"
#include "tvmffi_jit/cache/remote/backend.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/runner.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"

using namespace tvmffi_jit;

namespace {

using testing::WritingRunner;

struct Request {
  util::TempDir dir;
  std::string cache = util::join_path(dir.path(), "cache");
  cli::BuildRequest request;
  cli::ModuleRequest module;
  cli::CommandContext ctx;
  WritingRunner runner;
  std::shared_ptr<testing::MemoryServer> server = std::make_shared<testing::MemoryServer>();

  Request() {
    util::write_file(util::join_path(dir.path(), "a.cc"), "int a() { return 1; }\n");
    module.manifest = compile::parse_manifest_text(R"({"name": "mod", "sources": ["a.cc"]})",
                                                   util::join_path(dir.path(), "mod.json"), dir.path());
    module.base_dir = dir.path();
    request.cache_dir = cache;
    request.env = [](const std::string&) { return std::optional<std::string>(); };
  }

  cli::Planned planned() const {
    cli::Planned p;
    p.module = &module;
    p.name = "mod";
    p.tc = testing::fake_toolchain();
    p.plan = compile::make_plan(module.manifest, p.tc, testing::no_gpus());
    return p;
  }

  // One command: its own storage over the root and the in-memory remote.
  cli::ModuleOutcome build() {
    cache::Store store(cache::open_root(cache, true, false));
    std::vector<std::unique_ptr<cache::RemoteBackend>> remotes;
    remotes.push_back(testing::make_memory_backend(server, "memory://team"));
    cache::Storage storage(store, {}, nullptr, std::move(remotes));
    cli::Shared shared{request, ctx, {}, {}};
    shared.storage = request.use_cache ? &storage : nullptr;
    shared.exec.runner = &runner;
    const cli::Planned p = planned();
    return cli::build_module(shared, p, nullptr);
  }
};

}  // namespace

TEST_CASE("build_module builds a miss, then answers the same module as a hit with the same path",
          "[cli][build_module]") {
  Request r;
  cli::ModuleOutcome first = r.build();
  CHECK(first.item.status == compile::BatchStatus::kBuilt);
  CHECK(first.json["cache"] == "miss");
  CHECK(first.json["miss_reason"] == "absent");
  REQUIRE(util::is_regular_file(first.path));
  CHECK(util::starts_with(first.path, r.cache + "/"));
  const int runs = r.runner.runs;
  CHECK(runs >= 2);  // a compile and the link

  cli::ModuleOutcome second = r.build();
  CHECK(second.item.status == compile::BatchStatus::kHit);
  CHECK(second.json["cache"] == "hit");
  CHECK(second.path == first.path);
  CHECK(second.entry_dir == first.entry_dir);
  CHECK(r.runner.runs == runs);  // nothing ran
}

TEST_CASE("build_module with --only-if-cached answers a miss without building, then a hit after a build",
          "[cli][build_module]") {
  Request r;
  r.request.only_if_cached = true;
  cli::ModuleOutcome asked = r.build();
  CHECK(asked.only_if_cached_miss);
  CHECK(asked.item.status == compile::BatchStatus::kHit);  // answered: the caller builds
  CHECK(asked.json["cache"] == "miss");
  CHECK(asked.path.empty());
  CHECK(r.runner.runs == 0);
  r.request.only_if_cached = false;
  cli::ModuleOutcome built = r.build();
  REQUIRE(built.item.status == compile::BatchStatus::kBuilt);
  r.request.only_if_cached = true;
  cli::ModuleOutcome hit = r.build();
  CHECK_FALSE(hit.only_if_cached_miss);
  CHECK(hit.json["cache"] == "hit");
  CHECK(hit.path == built.path);
}

TEST_CASE("build_module shares through the command's storage: a second root gets a remote hit",
          "[cli][build_module]") {
  Request a;
  cli::ModuleOutcome built = a.build();
  REQUIRE(built.json["cache"] == "miss");
  // Another root, the same project and the same in-memory server.
  a.cache = util::join_path(a.dir.path(), "second-cache");
  a.request.cache_dir = a.cache;
  const int runs = a.runner.runs;
  cli::ModuleOutcome fetched = a.build();
  CHECK(fetched.json["cache"] == "remote-hit");
  CHECK(fetched.item.status == compile::BatchStatus::kHit);
  CHECK(util::starts_with(fetched.path, a.cache + "/"));
  CHECK(a.runner.runs == runs);
}

TEST_CASE("build_module without the cache builds in the given folder and counts what was up to date",
          "[cli][build_module]") {
  Request r;
  r.request.use_cache = false;
  r.request.build_dir = util::join_path(r.dir.path(), "out");
  cli::ModuleOutcome first = r.build();
  CHECK(first.json["cache"] == "off");
  CHECK(first.item.status == compile::BatchStatus::kBuilt);
  CHECK(first.item.objects_compiled == 1);
  CHECK(util::starts_with(first.path, r.request.build_dir + "/"));
}
