// The batch scheduler (compile/scheduler.h): the order modules start in, the
// gate's hold at the start of a batch, and --keep-going.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "tvmffi_jit/compile/scheduler.h"
#include "tvmffi_jit/util/error.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;

namespace {

// A module of one C++ unit and a link.
BuildPlan one_unit_plan(const std::string& name) {
  BuildPlan plan;
  plan.name = name;
  CompileStep s;
  s.language = Language::kCxx;
  s.compiler = "/usr/bin/c++";
  s.input_path = "/project/" + name + ".cc";
  s.object_name = "cpp_0.o";
  plan.compile_steps.push_back(s);
  LinkStep link;
  link.inputs = {"cpp_0.o"};
  link.output_name = name + ".so";
  plan.link = link;
  plan.artifact_name = link.output_name;
  return plan;
}

BatchItem built() {
  BatchItem it;
  it.status = BatchStatus::kBuilt;
  return it;
}

// Waits (bounded) until `ready` holds; false if it never did.
template <typename F>
bool wait_until(F ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

TEST_CASE("a batch starts the module the cost log knows to be long first, ties by name",
          "[build][batch][scheduler]") {
  std::vector<BuildPlan> plans;
  for (const char* n : {"a", "b", "c", "d"}) plans.push_back(one_unit_plan(n));
  CostModel costs;
  costs.record_unit(CostScope{"c"}, plans[2].compile_steps[0], JobCost{"", 100, 100, 0});  // known long
  costs.record_unit(CostScope{"b"}, plans[1].compile_steps[0], JobCost{"", 1, 1, 0});      // known short
  // a and d were never built: both estimated as the mean of the C++ units known, a tie.
  std::vector<BatchModule> given = {{&plans[0], ""}, {&plans[1], ""}, {&plans[2], ""}, {&plans[3], ""},
                                    {nullptr, ""}};  // e: not planned
  const std::vector<size_t> order = longest_chain_first(costs, given);
  CHECK(order == std::vector<size_t>{2, 0, 3, 1, 4});

  // The pool starts them in that order (one module at a time, so starting is running).
  BatchOptions o;
  o.concurrency = 1;
  o.order = order;
  std::vector<size_t> started;
  run_batch(given.size(), o, [&](size_t i, util::JobGate::Party*) {
    started.push_back(i);
    return built();
  });
  CHECK(started == order);
}

TEST_CASE("with no cost known, a batch starts its modules by name, whatever the input order",
          "[build][batch][scheduler]") {
  std::vector<BuildPlan> plans;
  for (const char* n : {"x", "y", "z"}) plans.push_back(one_unit_plan(n));
  CostModel costs;
  CHECK(longest_chain_first(costs, {{&plans[0], ""}, {&plans[1], ""}, {&plans[2], ""}}) == std::vector<size_t>{0, 1, 2});
  // The same modules given in reverse: the same modules start first.
  CHECK(longest_chain_first(costs, {{&plans[2], ""}, {&plans[1], ""}, {&plans[0], ""}}) == std::vector<size_t>{2, 1, 0});
}

TEST_CASE("a reversed batch starts its modules in the same order", "[build][batch][scheduler]") {
  std::vector<BuildPlan> plans;
  for (const char* n : {"a", "b", "c", "d", "e"}) plans.push_back(one_unit_plan(n));
  CostModel costs;
  costs.record_unit(CostScope{"d"}, plans[3].compile_steps[0], JobCost{"", 50, 50, 0});
  costs.record_unit(CostScope{"b"}, plans[1].compile_steps[0], JobCost{"", 50, 50, 0});  // a tie with d
  costs.record_unit(CostScope{"c"}, plans[2].compile_steps[0], JobCost{"", 5, 5, 0});    // a and e: the mean, 35
  std::vector<BatchModule> forward, backward;
  for (size_t i = 0; i < plans.size(); ++i) forward.push_back({&plans[i], ""});
  for (size_t i = plans.size(); i-- > 0;) backward.push_back({&plans[i], ""});
  auto names = [&](const std::vector<BatchModule>& given) {
    std::vector<std::string> out;
    for (size_t i : longest_chain_first(costs, given)) out.push_back(given[i].plan->name);
    return out;
  };
  CHECK(names(forward) == std::vector<std::string>{"b", "d", "a", "e", "c"});
  CHECK(names(backward) == names(forward));
}

TEST_CASE("run_batch holds the gate until every starting module has checked in", "[build][batch][scheduler]") {
  // Module 0's host compile asks the one slot first; module 1's nvcc job
  // asks later and is heavier. Held, the gate picks among both: nvcc first.
  util::JobGate gate(1, 0);
  BatchOptions o;
  o.concurrency = 2;
  o.gate = &gate;
  o.hold_limit = std::chrono::minutes(10);  // never reached here: the check-ins end the hold
  std::atomic<int> turn{0};
  int light_turn = 0, heavy_turn = 0;
  bool light_queued = true;
  std::vector<BatchItem> items = run_batch(2, o, [&](size_t i, util::JobGate::Party* party) {
    if (i == 0) {
      util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kNormal, 1.0, party);
      light_turn = ++turn;
    } else {
      light_queued = wait_until([&] { return gate.waiting() >= 1; });
      util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kNormal, 4.0, party);
      heavy_turn = ++turn;
    }
    return built();
  });
  REQUIRE(light_queued);
  CHECK(heavy_turn == 1);
  CHECK(light_turn == 2);
  CHECK(batch_exit_code(items) == 0);
}

TEST_CASE("a failed module releases the gate's hold, so the jobs waiting in it start", "[build][batch][scheduler]") {
  // Three modules start: 0 queues a job, 1 fails, 2 waits for 0's job to
  // start before it ends (and checks in). Only the failure can end the hold.
  util::JobGate gate(1, 0);
  BatchOptions o;
  o.concurrency = 3;
  o.keep_going = true;
  o.gate = &gate;
  o.hold_limit = std::chrono::minutes(10);
  std::atomic<bool> admitted{false};
  bool admitted_in_time = false;
  std::vector<BatchItem> items = run_batch(3, o, [&](size_t i, util::JobGate::Party* party) {
    if (i == 0) {
      util::JobGate::Ticket t = gate.acquire(1, 1, util::JobGate::Priority::kNormal, 1.0, party);
      admitted = true;
    } else if (i == 1) {
      throw build_error("compiling bad.cc failed");
    } else {
      admitted_in_time = wait_until([&] { return admitted.load(); });
    }
    return built();
  });
  CHECK(admitted_in_time);
  CHECK(items[0].status == BatchStatus::kBuilt);
  CHECK(items[1].status == BatchStatus::kFailed);
  CHECK(items[2].status == BatchStatus::kBuilt);
}

TEST_CASE("run_batch with keep_going builds every module and reports each failure", "[build][batch][scheduler]") {
  BatchOptions o;
  o.concurrency = 2;
  o.keep_going = true;
  std::atomic<int> failures_seen{0};
  o.on_failure = [&](size_t, const BatchItem&) { ++failures_seen; };
  std::vector<BatchItem> items = run_batch(5, o, [](size_t i, util::JobGate::Party*) {
    if (i == 1) throw build_error("compiling bad.cc failed");
    BatchItem it = built();
    it.objects_compiled = 1;
    return it;
  });
  REQUIRE(items.size() == 5);
  CHECK(items[1].status == BatchStatus::kFailed);
  CHECK(items[1].exit_code == 1);
  CHECK(items[1].error == "compiling bad.cc failed");
  for (size_t i : {0, 2, 3, 4}) CHECK(items[i].status == BatchStatus::kBuilt);
  CHECK(failures_seen == 1);
  CHECK(batch_exit_code(items) == 1);
}

TEST_CASE("run_batch without keep_going starts no module after a failure", "[build][batch][scheduler]") {
  BatchOptions o;
  o.concurrency = 1;  // deterministic order
  o.order = {3, 1, 0, 2};
  std::vector<BatchItem> items = run_batch(4, o, [](size_t i, util::JobGate::Party*) {
    if (i == 1) throw missing_tool_error("no nvcc");
    BatchItem it;
    it.status = BatchStatus::kHit;
    return it;
  });
  CHECK(items[3].status == BatchStatus::kHit);
  CHECK(items[1].status == BatchStatus::kFailed);
  CHECK(items[0].status == BatchStatus::kSkipped);  // after the failure in start order, not in input order
  CHECK(items[2].status == BatchStatus::kSkipped);
  CHECK(batch_exit_code(items) == 4);
}
