// The cost log (compile/cost_log.h) as a hint that travels: named by what
// survives a move of the checkout, clamped to what this machine can hold,
// never waited on for long, and never erasing what a later version wrote.
// (How the executor uses it: tests/unit/test_compile_executor.cpp.)
#include <catch2/catch.hpp>

#include "fake_build.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "tvmffi_jit/compile/cost_log.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/job_gate.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;

namespace {

// A C++ unit of `source` (a file), or a generated unit of `text`.
CompileStep file_unit(const std::string& source) {
  CompileStep s;
  s.language = Language::kCxx;
  s.input_path = source;
  s.object_name = "cpp_0.o";
  return s;
}

CompileStep generated_unit(const std::string& text) {
  CompileStep s;
  s.language = Language::kCxx;
  s.generated_name = "cpp_0_k.exports.cpp";
  s.generated_text = text;
  s.object_name = "cpp_0.o";
  return s;
}

// A checkout of one project: a folder with src/k.cc.
struct Checkout {
  util::TempDir dir;
  Checkout() {
    util::make_directories(path("src"));
    util::write_file(path("src/k.cc"), "int k() { return 1; }\n");
  }
  std::string path(const std::string& f) const { return util::join_path(dir.path(), f); }
};

// Log lines (and the warnings list) captured for one test, then stderr again.
struct CapturedLog {
  std::string text;
  CapturedLog() {
    util::redirect_logging(&text);
    util::init_logging(0, 0);
  }
  ~CapturedLog() {
    util::redirect_logging(nullptr);
    util::init_logging(0, 0);
  }
};

}  // namespace

TEST_CASE("a checkout at another path finds its units' costs in the log", "[compile][costs]") {
  Checkout first, moved;
  util::TempDir root;
  const std::string log = util::join_path(root.path(), "costs.log");
  {
    CostModel costs(log);
    const CostScope here("m", first.dir.path());
    costs.record_unit(here, file_unit(first.path("src/k.cc")), JobCost{"", 42, 40, 0});
    // An export wrapper includes its file by absolute path.
    costs.record_unit(here, generated_unit("#include \"" + first.path("src/k.cc") + "\"\n// exports\n"),
                      JobCost{"", 17, 16, 0});
    costs.save();
  }
  CostModel costs(log);
  const CostScope there("m", moved.dir.path());
  CostEstimate unit = costs.estimate_unit(there, file_unit(moved.path("src/k.cc")));
  CHECK(unit.source == EstimateSource::kLog);
  CHECK(unit.cost.cpu_seconds == Approx(42));
  CostEstimate wrapper =
      costs.estimate_unit(there, generated_unit("#include \"" + moved.path("src/k.cc") + "\"\n// exports\n"));
  CHECK(wrapper.source == EstimateSource::kLog);
  CHECK(wrapper.cost.cpu_seconds == Approx(17));
  // The same source in another module of the moved checkout: its source's cost.
  CostEstimate other = costs.estimate_unit(CostScope("other", moved.dir.path()), file_unit(moved.path("src/k.cc")));
  CHECK(other.source == EstimateSource::kSameSource);
  // A source outside the base dir keeps its absolute path: another file is another unit.
  CHECK(costs.estimate_unit(there, file_unit("/elsewhere/k.cc")).source == EstimateSource::kKindMean);
}

TEST_CASE("a learned peak larger than the build's memory is not used, so two jobs still run at once",
          "[compile][costs]") {
  Checkout project;
  util::TempDir root, build;
  toolchain::Toolchain tc = testing::fake_toolchain();
  util::write_file(project.path("src/l.cc"), "int l() { return 2; }\n");
  const Manifest m = parse_manifest_text(R"({"name": "lib", "sources": ["src/k.cc", "src/l.cc"]})",
                                         project.path("lib.json"), project.dir.path());
  const BuildPlan plan = make_plan(m, tc, testing::no_gpus());
  REQUIRE(plan.compile_steps.size() == 2);
  // A log whose peaks have 15 digits (KiB): about an exbibyte each.
  const std::string log = util::join_path(root.path(), "costs.log");
  const CostScope scope("lib", project.dir.path());
  CostLog damaged;
  for (const auto& s : plan.compile_steps)
    damaged.jobs[unit_cost_id(scope, s)] = JobCost{"c++", 5, 5, 999999999999999ull * 1024};
  util::write_file(log, format_cost_log(damaged));

  const uint64_t budget = 8ull << 30;
  CostModel costs(log, budget);
  CapturedLog captured;
  CostEstimate e = costs.estimate_unit(scope, plan.compile_steps[0]);
  CHECK(e.source == EstimateSource::kLog);
  CHECK(e.cost.cpu_seconds == Approx(5));  // the rest of what was learned stays
  CHECK(e.cost.peak_rss_bytes == 0);
  costs.estimate_unit(scope, plan.compile_steps[1]);
  const auto warnings = util::logged_warnings();
  REQUIRE(warnings.size() == 1);  // once for the log, not once per job
  CHECK(warnings[0].find(log) != std::string::npos);
  CHECK(warnings[0].find("2 job(s)") != std::string::npos);

  // -j 2 within the budget: both compiles run at once (each waits, bounded, for the other).
  class PairedRunner : public testing::WritingRunner {
   public:
    std::atomic<int> running{0};
    std::atomic<bool> overlapped{false};
    util::ProcessResult run(const std::vector<std::string>& argv, const util::ProcessOptions& options) override {
      if (argv.back() != "lib.so") {
        ++running;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (running.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        if (running.load() >= 2) overlapped = true;
      }
      return WritingRunner::run(argv, options);
    }
  } runner;
  util::JobGate gate(2, budget);
  JobMemory memory(kDefaultCudaJobBytes, true);
  ExecuteOptions o;
  o.jobs = 2;
  o.gate = &gate;
  o.memory = &memory;
  o.costs = &costs;
  o.base_dir = project.dir.path();
  o.runner = &runner;
  o.hide_compiler_output = true;
  execute_plan(plan, build.path(), o);
  CHECK(runner.overlapped.load());
  CHECK(gate.peak_slots() == 2);
}

TEST_CASE("save gives up at once when another process holds costs.lock, and keeps what it learned",
          "[compile][costs]") {
  util::TempDir root;
  const std::string log = util::join_path(root.path(), "costs.log");
  CostModel costs(log);
  costs.record_link("m", JobCost{"", 3, 3, 0});
  util::FileLock held = util::FileLock::try_acquire(util::join_path(root.path(), "costs.lock"), "another build");
  REQUIRE(held.locked());
  // save() runs while the lock is held; the holder lets go only once save()
  // has returned, or after a bound far above the wait save() may take.
  std::atomic<bool> returned{false};
  std::thread saver([&] {
    costs.save();
    returned = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!returned.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  const bool gave_up_while_held = returned.load();
  held.release();
  saver.join();
  CHECK(gave_up_while_held);
  CHECK_FALSE(util::path_exists(log));
  // Once the lock is free, a later save writes what was learned.
  costs.save();
  CHECK(parse_cost_log(util::read_file(log)).jobs.count(link_cost_id("m")) == 1);
}

TEST_CASE("a later version's fields and lines survive a rewrite by this one", "[compile][costs]") {
  util::TempDir root, project;
  const std::string log = util::join_path(root.path(), "costs.log");
  const CostScope scope("m", project.path());
  const CompileStep known = file_unit(util::join_path(project.path(), "k.cc"));
  const CompileStep fresh = file_unit(util::join_path(project.path(), "new.cc"));
  const std::string id = unit_cost_id(scope, known);
  // Version 9 appends two fields to a job's line (after version 3's serial
  // and splittable ms) and writes lines of its own.
  const std::string later_fields = "gpu_ms=2100\tfuture=900";
  const std::string own_line = "v9\tsomething\tthis version cannot read";
  util::write_file(log, "# tvmffi-jit cost log v9: ...\n" + id + "\tc++\t3000\t3100\t10\t3000\t0\t" + later_fields +
                            "\n" + own_line + "\n");
  {
    CostModel costs(log);
    // The fields this version knows are read.
    CostEstimate e = costs.estimate_unit(scope, known);
    REQUIRE(e.source == EstimateSource::kLog);
    CHECK(e.cost.cpu_seconds == Approx(3));
    costs.record_unit(scope, fresh, JobCost{"", 1, 1, 0});
    costs.save();
  }
  std::string text = util::read_file(log);
  CHECK(util::starts_with(text, "# tvmffi-jit cost log v" + std::to_string(kCostLogVersion)));
  CHECK(text.find("\n" + id + "\tc++\t3000\t3100\t10\t3000\t0\t" + later_fields + "\n") != std::string::npos);
  CHECK(text.find("\n" + own_line + "\n") != std::string::npos);
  CHECK(parse_cost_log(text).jobs.count(unit_cost_id(scope, fresh)) == 1);
  // The job measured again: its known fields change, the later version's stay.
  {
    CostModel costs(log);
    costs.record_unit(scope, known, JobCost{"", 4, 4, 0});
    costs.save();
  }
  text = util::read_file(log);
  // (measured without its split: the fraction logged before, all serial, kept)
  CHECK(text.find("\n" + id + "\tc++\t4000\t4000\t0\t4000\t0\t" + later_fields + "\n") != std::string::npos);
  CHECK(text.find("\n" + own_line + "\n") != std::string::npos);
}

TEST_CASE("version 3's serial and splittable seconds: read from a v2 log, a v3 log and a pair version 2 kept",
          "[compile][costs]") {
  const std::string u = "u0123456789abcdef0123", v = "u0123456789abcdef0124", w = "u0123456789abcdef0125";
  // A version 2 line (five fields); a version 3 line; a version 3 pair that a
  // version 2 binary kept when it measured the job again (cpu 400 s now).
  auto log = parse_cost_log("# tvmffi-jit cost log v2: ...\n" + u + "\tnvcc/1\t263000\t263000\t10\n" + v +
                            "\tnvcc/1\t263000\t263000\t10\t70000\t193000\n" + w +
                            "\tnvcc/1\t400000\t400000\t10\t70000\t193000\n");
  REQUIRE(log.jobs.size() == 3);
  CHECK(log.jobs[u].serial_seconds < 0);  // unknown: the default below
  CHECK(serial_seconds_of(log.jobs[u]) == Approx(2 + 263.0 / 4));
  CHECK(log.jobs[v].serial_seconds == Approx(70));
  CHECK(log.jobs[v].later_fields.empty());
  CHECK(log.jobs[w].serial_seconds == Approx(400 * 70.0 / 263));  // the fraction, never past the CPU
  // Written back as they were read; an unknown pair as "-".
  const std::string text = format_cost_log(log);
  CHECK(text.find(v + "\tnvcc/1\t263000\t263000\t10\t70000\t193000\n") != std::string::npos);
  CHECK(text.find(u + "\tnvcc/1\t263000\t263000\t10\t-\t-\n") != std::string::npos);
  // A C++ job or a link is serial; an nvcc job's serial part is clamped to its CPU.
  CHECK(serial_seconds_of(JobCost{"c++", 5, 5, 0}) == Approx(5));
  JobCost odd{"nvcc/1", 5, 5, 0};
  odd.serial_seconds = 50;
  CHECK(serial_seconds_of(odd) == Approx(5));
}

TEST_CASE("nvcc --time's phases split a unit's seconds into serial and splittable", "[compile][costs]") {
  // nvcc 13.0's CSV (two targets, --split-compile=2), times in ms.
  const std::string csv =
      "source file name , phase name , phase input files , phase output file , arch , tool, metric , unit\n"
      "t.cu , gcc (preprocessing 4) , t.cu  , /tmp/x-5_t.cpp4.ii ,  , nvcc , 314.7560 , ms\n"
      "t.cu , gcc (preprocessing 1) , t.cu  , /tmp/x-8_t.compute_90a.cpp1.ii , compute_90a , nvcc , 363.0850 , ms\n"
      "t.cu , cudafe++ , /tmp/x-5_t.cpp4.ii  , /tmp/x-6_t.compute_80.cudafe1.cpp , compute_80 , nvcc , 1001.7180 , ms\n"
      "t.cu , cicc ,  /tmp/x-8_t.compute_90a.cpp1.ii  , /tmp/x-7_t.compute_90a.ptx , compute_90a , nvcc , 1025.7520 , ms\n"
      "t.cu , cicc ,  /tmp/x-10_t.compute_80.cpp1.ii  , /tmp/x-6_t.compute_80.ptx , compute_80 , nvcc , 1065.9609 , ms\n"
      "t.cu , ptxas , /tmp/x-7_t.compute_90a.ptx  , /tmp/x-9_t.compute_90a.cubin , sm_90a , nvcc , 80.0470 , ms\n"
      "t.cu , fatbinary , /tmp/x-9_t.compute_90a.cubin  , /tmp/x-3_t.fatbin ,  , nvcc , 2.7200 , ms\n"
      "t.cu , gcc (compiling) ,   , t.o , compute_80 , nvcc , 701.4180 , ms\n"
      " , nvcc (driver) ,  , t.o ,  , nvcc , 0.1770 , ms\n";
  auto phases = parse_nvcc_phases(csv);
  REQUIRE(phases);
  CHECK(phases->splittable_seconds == Approx(1.0257520 + 1.0659609 + 0.0800470));
  CHECK(phases->serial_seconds == Approx(0.3147560 + 0.3630850 + 1.0017180 + 0.0027200 + 0.7014180));
  CHECK_FALSE(parse_nvcc_phases("not a csv\n"));
  CHECK_FALSE(parse_nvcc_phases(""));
  // The serial seconds a job measured: its phases (at most its CPU), else a
  // split run's wall against its CPU (70 + 193 / 8 s wall, 263 s CPU), else unknown.
  CHECK(measured_serial_seconds(NvccPhases{70, 193}, 263, 263, 1) == Approx(70));
  CHECK(measured_serial_seconds(NvccPhases{300, 10}, 263, 263, 1) == Approx(263));
  CHECK(measured_serial_seconds(std::nullopt, 263, 70 + 193.0 / 8, 8) == Approx(70));
  CHECK(measured_serial_seconds(std::nullopt, 263, 263, 1) < 0);
}
