// The team's costs on the remotes (compile/cost_log.h, docs/remote.md "The
// team's costs"): a CostModel over a cache::Storage whose remote is an
// in-memory server. A fresh runner starts learned; the local log's line
// wins; what a command learned is merged in at its end; a damaged, huge or
// absurd object is ignored or clamped; a failing or read-only server costs
// nothing but the hint.
#include <catch2/catch.hpp>

#include "memory_backend.h"

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/compile/cost_log.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;
using tvmffi_jit::testing::MemoryServer;

namespace {

const std::string kCostsObject = "ns/costs";  // the namespace "ns", joined as a path

CompileStep cxx_unit(const std::string& source) {
  CompileStep s;
  s.language = Language::kCxx;
  s.input_path = source;
  s.object_name = "cpp_0.o";
  return s;
}

// One machine: a checkout of the project (src/k.cc at its own path), a cache
// root, and the command's storage over the team's server.
struct Runner {
  util::TempDir dir;
  cache::Store store{cache::open_root(util::join_path(dir.path(), "cache"), true)};
  cache::StatsCounters stats;
  std::unique_ptr<cache::Storage> storage;

  explicit Runner(const std::shared_ptr<MemoryServer>& server, bool read_only = false) {
    util::make_directories(path("checkout/src"));
    cache::RemoteOptions o;
    o.key_namespace = "ns";
    o.read_only = read_only;
    std::vector<std::unique_ptr<cache::RemoteBackend>> b;
    b.push_back(testing::make_memory_backend(server, "memory://team"));
    storage = std::make_unique<cache::Storage>(store, o, &stats, std::move(b));
  }
  std::string path(const std::string& f) const { return util::join_path(dir.path(), f); }
  std::string log() const { return path("cache/costs.log"); }
  CostScope scope() const { return CostScope("m", path("checkout")); }
  CompileStep unit(const std::string& file = "src/k.cc") const { return cxx_unit(path("checkout/" + file)); }
};

JobCost cost(double cpu, double serial = -1, uint64_t peak = 0) {
  JobCost c{"c++", cpu, cpu, peak};
  c.serial_seconds = serial;
  return c;
}

// Log lines (and the warnings list) captured for one test, then stderr again.
struct CapturedWarnings {
  std::string text;
  CapturedWarnings() {
    util::redirect_logging(&text);
    util::init_logging(0, 0);
  }
  ~CapturedWarnings() {
    util::redirect_logging(nullptr);
    util::init_logging(0, 0);
  }
};

}  // namespace

TEST_CASE("a fresh runner with an empty root starts learned from the remote; a module order never asks it",
          "[compile][costs][shared]") {
  auto server = std::make_shared<MemoryServer>();
  {
    Runner a(server);
    CostModel costs(a.log(), 0, a.storage.get());
    costs.record_unit(a.scope(), a.unit(), cost(42));
    costs.record_link("m", cost(3));
    costs.save();
    REQUIRE(server->objects.count(kCostsObject) == 1);
    CHECK(server->puts == 1);
    CHECK(a.stats.remote_bytes_sent == server->objects[kCostsObject].size());
  }
  const CostLog shared = parse_cost_log(server->objects[kCostsObject]);
  CHECK(shared.jobs.size() == 3);  // the unit by its module and by its source, the link

  Runner b(server);  // another checkout path, an empty root
  REQUIRE_FALSE(util::path_exists(b.log()));
  CostModel costs(b.log(), 0, b.storage.get());
  const size_t gets = server->gets;
  // A batch's module order comes before any lookup: the local log alone.
  BuildPlan plan;
  plan.name = "m";
  plan.compile_steps.push_back(b.unit());
  CHECK(costs.module_chain_seconds(b.scope(), plan) < 42);
  CHECK(server->gets == gets);
  // The first job's estimate reads the object, once.
  CostEstimate unit = costs.estimate_unit(b.scope(), b.unit());
  CHECK(unit.source == EstimateSource::kLog);
  CHECK(unit.cost.cpu_seconds == Approx(42));
  CHECK(costs.estimate_link("m").cost.cpu_seconds == Approx(3));
  CHECK(costs.estimate_unit(CostScope("other", b.path("checkout")), b.unit()).source == EstimateSource::kSameSource);
  CHECK(server->gets == gets + 1);
  // Learned nothing: neither the object nor the root is written.
  costs.save();
  CHECK(server->puts == 1);
  CHECK_FALSE(util::path_exists(b.log()));
}

TEST_CASE("the local log's line wins over the remote's, taking the remote's serial split when it has none",
          "[compile][costs][shared]") {
  auto server = std::make_shared<MemoryServer>();
  Runner r(server);
  const std::string k = unit_cost_id(r.scope(), r.unit());
  const std::string other = unit_cost_id(r.scope(), r.unit("src/other.cc"));
  CostLog local, remote;
  local.jobs[k] = cost(5);  // measured here, split unknown (a launcher ran it)
  remote.jobs[k] = cost(50, 10);
  remote.jobs[other] = cost(7);
  util::write_file(r.log(), format_cost_log(local));
  server->objects[kCostsObject] = format_cost_log(remote);

  CostModel costs(r.log(), 0, r.storage.get());
  CostEstimate e = costs.estimate_unit(r.scope(), r.unit());
  CHECK(e.source == EstimateSource::kLog);
  CHECK(e.cost.cpu_seconds == Approx(5));
  CHECK(e.cost.serial_seconds == Approx(1));  // the remote's fraction, 10 of 50
  CHECK(costs.estimate_unit(r.scope(), r.unit("src/other.cc")).cost.cpu_seconds == Approx(7));

  // The rule itself: the preferred line, the other's split and later fields when it has none.
  JobCost later = cost(8, 2);
  later.later_fields = "gpu_ms=3";
  JobCost merged = merge_job_cost(cost(4), later);
  CHECK(merged.cpu_seconds == Approx(4));
  CHECK(merged.serial_seconds == Approx(1));
  CHECK(merged.later_fields == "gpu_ms=3");
  CHECK(merge_job_cost(cost(4, 3), later).serial_seconds == Approx(3));  // its own split stays
}

TEST_CASE("a command's costs are merged into the remote's object: other jobs and later versions' lines stay",
          "[compile][costs][shared]") {
  auto server = std::make_shared<MemoryServer>();
  Runner r(server);
  const std::string k = unit_cost_id(r.scope(), r.unit());
  const std::string teammate = "u0123456789abcdef0123";
  server->objects[kCostsObject] = "# tvmffi-jit cost log v9: ...\n" + k + "\tc++\t9000\t9000\t10\t9000\t0\tgpu_ms=1\n" +
                                  teammate + "\tnvcc/1\t263000\t263000\t10\t70000\t193000\n" + "v9\tits own line\n";
  {
    CostModel costs(r.log(), 0, r.storage.get());
    costs.record_unit(r.scope(), r.unit(), cost(2));
    costs.save();
  }
  const std::string text = server->objects[kCostsObject];
  const CostLog merged = parse_cost_log(text);
  REQUIRE(merged.jobs.count(k) == 1);
  CHECK(merged.jobs.at(k).cpu_seconds == Approx(2));         // what was measured now
  CHECK(merged.jobs.at(k).later_fields == "gpu_ms=1");       // a later version's fields of it stay
  CHECK(merged.jobs.at(teammate).cpu_seconds == Approx(263));  // a teammate's job stays
  CHECK(merged.later_lines == std::vector<std::string>{"v9\tits own line"});
  CHECK(merged.jobs.count(unit_source_cost_id(r.scope(), r.unit())) == 1);
  // The local log got the same measurement.
  CHECK(parse_cost_log(util::read_file(r.log())).jobs.at(k).cpu_seconds == Approx(2));
}

TEST_CASE("an object too large to read or write starts over from what the command learned",
          "[compile][costs][shared]") {
  auto hex_id = [](size_t i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "u%020zx", i);
    return std::string(buf);
  };
  std::unordered_map<std::string, JobCost> learned{{hex_id(1), cost(2)}};
  CostLog big;
  for (size_t i = 100; big.jobs.size() < 100000; ++i) big.jobs[hex_id(i)] = cost(1);
  const std::string held = format_cost_log(big);
  REQUIRE(held.size() > kMaxSharedCostsBytes);
  // Held text this large is never read by a command (the server refuses it
  // past the cap); given anyway, it is not kept.
  auto text = shared_costs_text(held, learned);
  REQUIRE(text);
  CHECK(parse_cost_log(*text).jobs.size() == 1);
  // A command that learned more than the cap holds puts nothing.
  CHECK_FALSE(shared_costs_text(std::nullopt, big.jobs));

  // Through the model: the server holds an object over the cap.
  auto server = std::make_shared<MemoryServer>();
  server->objects[kCostsObject] = held;
  Runner r(server);
  CostModel costs(r.log(), 0, r.storage.get());
  CHECK(costs.estimate_unit(r.scope(), r.unit()).source == EstimateSource::kDefault);
  costs.record_unit(r.scope(), r.unit(), cost(2));
  costs.save();
  CHECK(parse_cost_log(server->objects[kCostsObject]).jobs.size() == 2);  // the unit, by both its ids
  CHECK(r.stats.remote_errors == 0);
}

TEST_CASE("a damaged or absurd costs object is ignored or clamped, never a failure", "[compile][costs][shared]") {
  auto server = std::make_shared<MemoryServer>();
  Runner r(server);
  const std::string k = unit_cost_id(r.scope(), r.unit());
  const std::string l = unit_cost_id(r.scope(), r.unit("src/l.cc"));
  const std::string slow = unit_cost_id(r.scope(), r.unit("src/slow.cc"));
  SECTION("bytes that are no log at all") {
    static const char kGarbage[] = "\x00\xff\x13garbage\n\tc++\t\t\n";
    server->objects[kCostsObject] = std::string(kGarbage, sizeof kGarbage - 1) + std::string(1000, '\xee');
    CostModel costs(r.log(), 0, r.storage.get());
    CHECK(costs.estimate_unit(r.scope(), r.unit()).source == EstimateSource::kDefault);
    costs.record_unit(r.scope(), r.unit(), cost(2));
    costs.save();  // replaced by a log that parses
    CHECK(parse_cost_log(server->objects[kCostsObject]).jobs.size() == 2);
  }
  SECTION("a peak no machine of this build has, and a compile that took years") {
    const uint64_t budget = 8ull << 30;
    server->objects[kCostsObject] = "# tvmffi-jit cost log v3\n" + k + "\tc++\t5000\t5000\t999999999999999\t-\t-\n" +
                                    l + "\tc++\t6000\t6000\t1000\t-\t-\n" + slow + "\tc++\t999999999999999\t1\t1\t-\t-\n";
    CapturedWarnings captured;
    CostModel costs(r.log(), budget, r.storage.get());
    CostEstimate e = costs.estimate_unit(r.scope(), r.unit());
    CHECK(e.source == EstimateSource::kLog);
    CHECK(e.cost.cpu_seconds == Approx(5));
    CHECK(e.cost.peak_rss_bytes == 0);  // not used for its reservation
    // A believable peak is not used either: the remote's peaks size nothing here.
    CHECK(costs.estimate_unit(r.scope(), r.unit("src/l.cc")).cost.peak_rss_bytes == 0);
    CHECK(costs.estimate_unit(r.scope(), r.unit("src/l.cc")).cost.cpu_seconds == Approx(6));
    CHECK(costs.estimate_unit(r.scope(), r.unit("src/slow.cc")).source != EstimateSource::kLog);  // dropped
    CHECK(util::logged_warnings().empty());  // nothing from the remote is a peak to warn about
  }
}

TEST_CASE("a failing server costs the hint only: it is not given up, and nothing is written over what it holds",
          "[compile][costs][shared]") {
  auto server = std::make_shared<MemoryServer>();
  server->objects[kCostsObject] = "# tvmffi-jit cost log v3\n";
  server->failing = cache::RemoteFailure{cache::RemoteFailureKind::kTimeout, "injected"};
  Runner r(server);
  CostModel costs(r.log(), 0, r.storage.get());
  CHECK(costs.estimate_unit(r.scope(), r.unit()).source == EstimateSource::kDefault);
  costs.record_unit(r.scope(), r.unit(), cost(2));
  costs.save();  // its read fails: no put over what the server may hold
  CHECK(server->gets == 2);
  CHECK(server->puts == 0);
  CHECK(r.stats.remote_errors == 0);
  // Still in use for the command: asked again.
  CHECK(r.storage->get_shared_objects("costs", 1024) == std::vector<std::string>{});
  CHECK(server->gets == 3);
  CHECK(parse_cost_log(util::read_file(r.log())).jobs.size() == 2);  // the local log learned it
}

TEST_CASE("a read-only remote's costs object is read, never written", "[compile][costs][shared]") {
  auto server = std::make_shared<MemoryServer>();
  Runner writer(server);
  {
    CostModel costs(writer.log(), 0, writer.storage.get());
    costs.record_unit(writer.scope(), writer.unit(), cost(42));
    costs.save();
  }
  const std::string before = server->objects[kCostsObject];
  const size_t puts = server->puts;
  Runner reader(server, true);
  CostModel costs(reader.log(), 0, reader.storage.get());
  CHECK(costs.estimate_unit(reader.scope(), reader.unit()).source == EstimateSource::kLog);
  costs.record_unit(reader.scope(), reader.unit(), cost(1));
  costs.save();
  CHECK(server->puts == puts);
  CHECK(server->objects[kCostsObject] == before);
  CHECK(parse_cost_log(util::read_file(reader.log())).jobs.size() == 2);  // learned locally
}
