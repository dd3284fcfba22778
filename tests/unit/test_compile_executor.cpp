// Running plans. Most tests inject a fake CommandRunner (no compiler runs):
// scheduling, hooks, launcher fallback, failures, incremental skips and what
// the status sink is shown. A few run the real host compiler through the
// default runner: real depfiles, a real compiler's failure, a missing one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include <unistd.h>

#include "tvmffi_jit/compile/cost_log.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/runner.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/progress.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;

namespace {

CompileStep cxx_step(const std::string& cxx, const std::string& input, int index) {
  CompileStep s;
  s.language = Language::kCxx;
  s.compiler = cxx;
  s.flags = {"-std=c++17", "-fPIC", "-O0"};
  s.input_path = input;
  s.object_name = "cpp_" + std::to_string(index) + ".o";
  s.depfile_name = s.object_name + ".d";
  s.display = input;
  return s;
}

// Points Progress::global() at an in-memory stream for one test, in line
// mode, and back to silence afterwards (the stream dies with the guard).
class CapturedProgress {
 public:
  CapturedProgress() : file_(open_memstream(&buffer_, &size_)) {
    REQUIRE(file_ != nullptr);
    util::Progress::Options o;
    o.mode = util::ProgressMode::kLines;
    o.out = file_;
    util::Progress::global().configure(o);
  }
  ~CapturedProgress() {
    util::Progress::Options silent;
    silent.mode = util::ProgressMode::kSilent;
    util::Progress::global().configure(silent);
    std::fclose(file_);
    std::free(buffer_);
  }
  std::string text() {
    std::fflush(file_);
    return std::string(buffer_, size_);
  }

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  std::FILE* file_;
};

}  // namespace

// ---- the executor with an injected runner and status sink: no compiler runs

namespace {

// Stands in for every compiler and linker: records each argv in call order,
// writes what a compiler would into the working directory (the -o output,
// and the depfile named after -MF or --dependency-output, listing the input),
// and fails, or exits 0 without writing anything, for the commands it is told.
class FakeRunner : public CommandRunner {
 public:
  std::function<bool(const std::vector<std::string>&)> fails;
  std::function<bool(const std::vector<std::string>&)> writes_nothing;
  // Called before the command "runs", outside the runner's lock (handshakes).
  std::function<void(const std::vector<std::string>&)> on_run;
  std::string output;  // what each successful command prints
  std::vector<std::string> headers;  // what each depfile lists besides the input

  util::ProcessResult run(const std::vector<std::string>& argv, const util::ProcessOptions& options) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      calls_.push_back(argv);
    }
    if (on_run) on_run(argv);
    util::ProcessResult r;
    r.exit_code = 0;
    if (fails && fails(argv)) {
      r.exit_code = 1;
      r.out = "fake.cc:1: error: it failed\n";
      return r;
    }
    if (writes_nothing && writes_nothing(argv)) return r;
    std::string out, dep;
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "-o") out = argv[i + 1];
      if (argv[i] == "-MF" || argv[i] == "--dependency-output") dep = argv[i + 1];
    }
    const std::string input = argv.size() >= 3 ? argv[argv.size() - 3] : "";
    if (!out.empty()) util::write_file(util::join_path(options.cwd, out), "built from " + input + "\n");
    if (!dep.empty())
      util::write_file(util::join_path(options.cwd, dep), out + ": " + input + " " + util::join(headers, " ") + "\n");
    r.out = output;
    return r;
  }

  std::vector<std::vector<std::string>> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  // The -o of each call, in call order.
  std::vector<std::string> outputs() const {
    std::vector<std::string> names;
    for (const auto& argv : calls())
      for (size_t i = 0; i + 1 < argv.size(); ++i)
        if (argv[i] == "-o") names.push_back(argv[i + 1]);
    return names;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::vector<std::string>> calls_;
};

// Records what the executor shows, one line per event.
class RecordingSink : public StatusSink {
 public:
  void begin(size_t steps) override { add("begin " + std::to_string(steps)); }
  void started(std::string_view label) override { add("started " + std::string(label)); }
  void finished(std::string_view label, std::string_view output) override {
    add("finished " + std::string(label) + (output.empty() ? "" : " | " + std::string(output)));
  }
  void warning(std::string_view message) override { add("warning " + std::string(message)); }
  void end() override { add("end"); }
  std::vector<std::string> events() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }

 private:
  void add(std::string e) {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(e));
  }
  mutable std::mutex mutex_;
  std::vector<std::string> events_;
};

// A compiler path that exists (the build log stamps it) but cannot run: were
// the executor to start it instead of asking the runner, the build would fail.
struct FakeTools {
  util::TempDir dir;
  std::string cxx = dir.path() + "/fake-c++";
  FakeTools() { util::write_file(cxx, "not a program\n"); }
};

// `n` C++ units a.cc, b.cc, ... and a link into liblib.so, all by `cxx`.
BuildPlan fake_plan(const std::string& cxx, const std::string& src, int n) {
  BuildPlan plan;
  plan.name = "lib";
  LinkStep link;
  for (int i = 0; i < n; ++i) {
    const std::string file = src + "/" + std::string(1, static_cast<char>('a' + i)) + ".cc";
    util::write_file(file, "int f" + std::to_string(i) + "();\n");
    plan.compile_steps.push_back(cxx_step(cxx, file, i));
    plan.compile_steps.back().display = util::file_name(file);
    link.inputs.push_back(plan.compile_steps.back().object_name);
  }
  link.program = cxx;
  link.flags = {"-shared"};
  link.output_name = "liblib.so";
  plan.link = link;
  plan.artifact_name = "liblib.so";
  return plan;
}

ExecuteOptions fake_options(FakeRunner& runner, StatusSink& status, int jobs) {
  ExecuteOptions o;
  o.jobs = jobs;
  o.runner = &runner;
  o.status = &status;
  return o;
}

}  // namespace

TEST_CASE("a plan of parallel compiles and a link produces the library and each unit's headers", "[build][executor]") {
  auto cxx = util::find_program("c++");
  REQUIRE(cxx);  // the build needs a host compiler anyway
  util::TempDir src;
  util::write_file(src.path() + "/shared.h", "inline int twice(int x) { return 2 * x; }\n");
  util::write_file(src.path() + "/a.cc", "#include \"shared.h\"\nint a() { return twice(1); }\n");
  util::write_file(src.path() + "/b.cc", "int b() { return 2; }\n");
  BuildPlan plan;
  plan.name = "lib";
  plan.compile_steps.push_back(cxx_step(*cxx, src.path() + "/a.cc", 0));
  plan.compile_steps.push_back(cxx_step(*cxx, src.path() + "/b.cc", 1));
  CompileStep gen = cxx_step(*cxx, "", 2);
  gen.generated_name = "gen.cpp";
  gen.generated_text = "int c() { return 3; }\n";
  plan.compile_steps.push_back(gen);
  LinkStep link;
  link.program = *cxx;
  link.inputs = {"cpp_0.o", "cpp_1.o", "cpp_2.o"};
  link.flags = {"-shared"};
  link.output_name = "liblib.so";
  link.depfile_name = "liblib.so.d";
  plan.link = link;
  plan.artifact_name = "liblib.so";

  util::TempDir build;
  ExecuteOptions o;
  o.jobs = 2;
  o.hide_compiler_output = true;
  BuildResult r = execute_plan(plan, build.path(), o);
  CHECK(r.artifact_path == util::canonical_path(build.path()) + "/liblib.so");
  CHECK(util::is_regular_file(r.artifact_path));
  CHECK(r.commands.size() == 4);
  REQUIRE(r.units.size() == 3);
  const auto& deps = r.units[0].dependencies;
  CHECK(std::find(deps.begin(), deps.end(), src.path() + "/shared.h") != deps.end());
  CHECK(std::find(deps.begin(), deps.end(), src.path() + "/a.cc") == deps.end());  // the source itself is not a header
  // b.cc includes nothing of the project's; what it read is the compiler's own
  // (-MD lists system headers too: gcc pre-includes stdc-predef.h).
  for (const auto& d : r.units[1].dependencies) CHECK_FALSE(util::starts_with(d, src.path() + "/"));
  CHECK(util::read_file(build.path() + "/gen.cpp") == "int c() { return 3; }\n");
  CHECK(util::is_regular_file(r.units[2].object_path));
  // The linker's own list of what it read: the objects and the C library's files.
  REQUIRE(r.link_dependencies);
  const auto& linked = *r.link_dependencies;
  CHECK(std::find(linked.begin(), linked.end(), util::canonical_path(build.path()) + "/cpp_1.o") != linked.end());
  CHECK(std::any_of(linked.begin(), linked.end(), [](const std::string& p) { return p.find("libc") != std::string::npos; }));
}

TEST_CASE("a header the compiler found through -I<symlink>/.. is the dependency it really read", "[build][executor]") {
  auto cxx = util::find_program("c++");
  REQUIRE(cxx);
  util::TempDir src;
  const std::string d = util::canonical_path(src.path());
  util::make_directories(d + "/real/inner");
  util::make_directories(d + "/inc");
  REQUIRE(::symlink((d + "/real/inner").c_str(), (d + "/inc/link").c_str()) == 0);
  util::write_file(d + "/real/val.h", "#define VALUE 1\n");
  util::write_file(d + "/k.cc", "#include <val.h>\nint k() { return VALUE; }\n");
  BuildPlan plan;
  plan.name = "k";
  CompileStep step = cxx_step(*cxx, d + "/k.cc", 0);
  step.flags.push_back("-I" + d + "/inc/link/..");
  plan.compile_steps.push_back(step);
  plan.artifact_name = "cpp_0.o";
  util::TempDir build;
  ExecuteOptions o;
  o.hide_compiler_output = true;
  BuildResult r = execute_plan(plan, build.path(), o);
  REQUIRE(r.units.size() == 1);
  const auto& deps = r.units[0].dependencies;
  CHECK(std::find(deps.begin(), deps.end(), d + "/real/val.h") != deps.end());
  CHECK(std::find(deps.begin(), deps.end(), d + "/inc/val.h") == deps.end());  // where a lexical clean-up points
}

TEST_CASE("a failing compile is exit 1 with the command line and the compiler's file:line output", "[build][executor]") {
  auto cxx = util::find_program("c++");
  REQUIRE(cxx);  // the build needs a host compiler anyway
  util::TempDir src;
  util::write_file(src.path() + "/bad.cc", "int f() {\n  return ;\n}\nint g( {\n");
  BuildPlan plan;
  plan.name = "bad";
  plan.compile_steps.push_back(cxx_step(*cxx, src.path() + "/bad.cc", 0));
  plan.artifact_name = "cpp_0.o";
  util::TempDir build;
  ExecuteOptions o;
  o.hide_compiler_output = true;
  try {
    execute_plan(plan, build.path(), o);
    FAIL("built");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kBuildFailed);
    std::string w = e.what();
    CHECK(w.find("compiling " + src.path() + "/bad.cc failed (exit status 1)") != std::string::npos);
    CHECK(w.find(" -c " + src.path() + "/bad.cc -o cpp_0.o") != std::string::npos);
    CHECK(w.find("bad.cc:4:") != std::string::npos);
  }
  CHECK_FALSE(util::path_exists(build.path() + "/cpp_0.o"));
}

TEST_CASE("a compiler that cannot be started is exit 4", "[build][executor]") {
  util::TempDir src;
  util::write_file(src.path() + "/a.cc", "int a;\n");
  BuildPlan plan;
  plan.compile_steps.push_back(cxx_step("/nonexistent/c++", src.path() + "/a.cc", 0));
  plan.artifact_name = "cpp_0.o";
  util::TempDir build;
  try {
    execute_plan(plan, build.path(), {});
    FAIL("built");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
  }
}

TEST_CASE("a unit served by before_compile is not compiled, its object is linked and its output replayed",
          "[build][executor][hooks]") {
  FakeTools tools;
  util::TempDir src;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 2);
  FakeRunner runner;

  std::vector<size_t> asked;
  std::mutex mutex;
  CompileHooks hooks;
  hooks.before_compile = [&](const UnitRef& u, const std::string& dir) -> std::optional<CommandRecord> {
    {
      std::lock_guard<std::mutex> lock(mutex);
      asked.push_back(u.index);
    }
    if (u.index != 1) return std::nullopt;
    util::write_file(dir + "/" + u.step.object_name, "an object from the cache\n");
    u.unit.object_path = dir + "/" + u.step.object_name;
    CommandRecord rec;
    rec.description = "cached b.cc";
    rec.output = "b.cc:1: warning: replayed\n";
    return rec;
  };

  CapturedProgress progress;  // the default status sink: util::Progress's lines
  util::TempDir build;
  ExecuteOptions o;
  o.jobs = 2;
  o.runner = &runner;
  BuildResult r = execute_plan(plan, build.path(), o, hooks);
  CHECK(util::is_regular_file(r.artifact_path));
  CHECK(runner.outputs() == std::vector<std::string>{"cpp_0.o", "liblib.so"});  // b.cc never compiled
  std::sort(asked.begin(), asked.end());
  CHECK(asked == std::vector<size_t>{0, 1});
  REQUIRE(r.reused.size() == 1);
  CHECK(r.reused[0].description == "cached b.cc");
  CHECK(r.commands.size() == 2);  // a.cc and the link: only what ran
  CHECK(r.units[1].object_path == build.path() + "/cpp_1.o");
  const std::string shown = progress.text();
  CHECK(shown.find("b.cc:1: warning: replayed\n") != std::string::npos);
  CHECK(shown.find("] fake-c++ b.cc (cached)\n") != std::string::npos);
  CHECK(shown.find("] fake-c++ a.cc\n") != std::string::npos);
  CHECK(shown.find("[3/3] link liblib.so\n") != std::string::npos);
}

TEST_CASE("after_compile sees every compiled unit once, with its index and depfile headers, before the link",
          "[build][executor][hooks]") {
  FakeTools tools;
  util::TempDir src;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 2);
  CompileStep device = cxx_step(tools.cxx, src.path() + "/b.cc", 9);  // stands in for a device step: numbered first
  plan.device_steps.push_back(device);
  FakeRunner runner;
  runner.headers = {src.path() + "/shared.h"};

  std::mutex mutex;
  std::vector<std::pair<size_t, std::string>> seen;  // (index, object)
  std::set<std::string> headers_of_a;
  std::atomic<bool> linked_before_hook{false};
  CompileHooks hooks;
  hooks.after_compile = [&](const UnitRef& u, const std::string& dir, const CommandRecord& rec) {
    if (util::is_regular_file(dir + "/liblib.so")) linked_before_hook = true;
    std::lock_guard<std::mutex> lock(mutex);
    seen.emplace_back(u.index, u.step.object_name);
    if (u.step.object_name == "cpp_0.o") headers_of_a.insert(u.unit.dependencies.begin(), u.unit.dependencies.end());
    if (!util::is_regular_file(u.unit.object_path) || rec.description != "compiling " + u.step.display)
      seen.emplace_back(999, "unexpected unit or record: " + u.step.object_name);
  };
  RecordingSink status;
  util::TempDir build;
  BuildResult r = execute_plan(plan, build.path(), fake_options(runner, status, 3), hooks);
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<std::pair<size_t, std::string>>{{0, "cpp_9.o"}, {1, "cpp_0.o"}, {2, "cpp_1.o"}});
  CHECK(headers_of_a == std::set<std::string>{src.path() + "/shared.h"});
  CHECK_FALSE(linked_before_hook);
  CHECK(r.reused.empty());
}

TEST_CASE("an exception from a hook fails the build and nothing is linked", "[build][executor][hooks]") {
  FakeTools tools;
  util::TempDir src;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 2);
  FakeRunner runner;
  CompileHooks hooks;
  hooks.after_compile = [](const UnitRef& u, const std::string&, const CommandRecord&) {
    if (u.index == 0) throw io_error("cannot store the object");
  };
  RecordingSink status;
  util::TempDir build;
  try {
    execute_plan(plan, build.path(), fake_options(runner, status, 1), hooks);
    FAIL("built");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kIo);
    CHECK(std::string(e.what()) == "cannot store the object");
  }
  CHECK(runner.outputs() == std::vector<std::string>{"cpp_0.o"});
  CHECK_FALSE(util::path_exists(build.path() + "/liblib.so"));
}

TEST_CASE("a compiler that exits 0 without writing its object is a build failure naming the object",
          "[build][executor]") {
  FakeTools tools;
  util::TempDir src;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 1);
  FakeRunner runner;
  runner.writes_nothing = [](const std::vector<std::string>&) { return true; };
  RecordingSink status;
  util::TempDir build;
  bool after_called = false;
  CompileHooks hooks;
  hooks.after_compile = [&](const UnitRef&, const std::string&, const CommandRecord&) { after_called = true; };
  try {
    execute_plan(plan, build.path(), fake_options(runner, status, 1), hooks);
    FAIL("built");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kBuildFailed);
    CHECK(std::string(e.what()).find("compiling a.cc exited 0 but cpp_0.o is missing") != std::string::npos);
  }
  CHECK_FALSE(after_called);  // nothing to store
}

TEST_CASE("progress counts every unit, served or compiled, and the link in one run", "[build][executor][hooks]") {
  FakeTools tools;
  util::TempDir src;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 2);
  FakeRunner runner;
  CapturedProgress progress;  // the default status sink
  util::TempDir build;
  ExecuteOptions o;
  o.jobs = 1;  // a fixed order for the lines
  o.runner = &runner;
  execute_plan(plan, build.path(), o);
  CHECK(progress.text() == "[1/3] fake-c++ a.cc\n[2/3] fake-c++ b.cc\n[3/3] link liblib.so\n");
}

TEST_CASE("units run in parallel through the injected runner and the link runs after all of them",
          "[build][executor][runner]") {
  FakeTools tools;
  util::TempDir src, build;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 3);
  FakeRunner runner;
  // Every unit waits for the other two to have started: only a pool of three
  // parallel workers gets past this (a handshake, bounded so a serial
  // executor fails instead of hanging).
  std::mutex mutex;
  std::condition_variable cv;
  int compiles_started = 0, compiles_done = 0;
  bool all_met = true;
  std::vector<std::string> present_at_link;
  runner.on_run = [&](const std::vector<std::string>& argv) {
    std::unique_lock<std::mutex> lock(mutex);
    if (argv.back() == "liblib.so") {
      CHECK(compiles_done == 3);
      for (const char* o : {"cpp_0.o", "cpp_1.o", "cpp_2.o"})
        if (util::is_regular_file(build.path() + "/" + o)) present_at_link.push_back(o);
      return;
    }
    ++compiles_started;
    cv.notify_all();
    if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return compiles_started == 3; })) all_met = false;
    ++compiles_done;
  };
  RecordingSink status;
  BuildResult r = execute_plan(plan, build.path(), fake_options(runner, status, 3));
  CHECK(all_met);
  CHECK(present_at_link == std::vector<std::string>{"cpp_0.o", "cpp_1.o", "cpp_2.o"});
  std::vector<std::string> outs = runner.outputs();
  REQUIRE(outs.size() == 4);
  CHECK(outs.back() == "liblib.so");
  CHECK(r.commands.size() == 4);
  CHECK(r.commands.back().description == "linking liblib.so");
  CHECK(r.commands.back().status == "exit status 0");
  CHECK(util::is_regular_file(r.artifact_path));  // written by the fake link
  REQUIRE(r.units.size() == 3);
  CHECK(r.units[1].dependencies.empty());  // the fake depfile names only the source itself
}

TEST_CASE("the status sink sees each step started and finished with its output, in one run",
          "[build][executor][runner]") {
  FakeTools tools;
  util::TempDir src, build;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 2);
  FakeRunner runner;
  runner.output = "warning: fake\n";
  RecordingSink status;
  execute_plan(plan, build.path(), fake_options(runner, status, 1));
  CHECK(status.events() == std::vector<std::string>{"begin 3", "started fake-c++ a.cc",
                                                    "finished fake-c++ a.cc | warning: fake\n",
                                                    "started fake-c++ b.cc",
                                                    "finished fake-c++ b.cc | warning: fake\n", "started link liblib.so",
                                                    "finished link liblib.so | warning: fake\n", "end"});
  ExecuteOptions hidden = fake_options(runner, status, 1);
  hidden.hide_compiler_output = true;
  RecordingSink quiet;
  hidden.status = &quiet;
  execute_plan(plan, build.path(), hidden);
  CHECK(quiet.events().at(2) == "finished fake-c++ a.cc");
}

TEST_CASE("a launched step whose outputs are missing runs once more without the launcher", "[build][executor][runner]") {
  FakeTools tools;
  util::TempDir src, build;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 1);
  plan.compile_steps[0].launcher = {"/fake/launcher", "--opt"};
  plan.compile_steps[0].launcher_source = "TVMFFI_JIT_CXX_LAUNCHER";
  FakeRunner runner;
  runner.writes_nothing = [](const std::vector<std::string>& argv) { return argv[0] == "/fake/launcher"; };
  RecordingSink status;
  BuildResult r = execute_plan(plan, build.path(), fake_options(runner, status, 1));
  auto calls = runner.calls();
  REQUIRE(calls.size() == 3);
  CHECK(std::vector<std::string>(calls[0].begin(), calls[0].begin() + 3) ==
        std::vector<std::string>{"/fake/launcher", "--opt", tools.cxx});
  CHECK(calls[1] == plan.compile_steps[0].argv());  // the compiler alone
  CHECK(calls[2].back() == "liblib.so");
  REQUIRE(r.commands.size() == 2);
  CHECK(r.commands[0].launcher_fallback);
  CHECK(r.commands[0].launcher_fallback_reason == "launcher (from TVMFFI_JIT_CXX_LAUNCHER) exited 0 but cpp_0.o is missing");
  CHECK(r.commands[0].argv == plan.compile_steps[0].argv());
  CHECK(count_launcher_fallbacks(r.commands) == 1);
  const auto events = status.events();
  CHECK(std::count(events.begin(), events.end(),
                   "warning a.cc: launcher (from TVMFFI_JIT_CXX_LAUNCHER) exited 0 but cpp_0.o is missing; compiling "
                   "it again without the launcher") == 1);

  // The compiler alone delivers nothing either: a failure of its own kind.
  FakeRunner empty;
  empty.writes_nothing = [](const std::vector<std::string>&) { return true; };
  util::TempDir build2;
  auto failed = try_execute_plan(plan, build2.path(), fake_options(empty, status, 1));
  REQUIRE_FALSE(failed);
  CHECK(failed.error().kind == CommandFailureKind::kNoOutput);
  CHECK(empty.calls().size() == 2);  // launched, then alone; never linked
}

TEST_CASE("the first failed unit stops scheduling, running units finish, and nothing is linked",
          "[build][executor][runner]") {
  FakeTools tools;
  util::TempDir src;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 3);
  auto is_b = [](const std::vector<std::string>& argv) { return util::ends_with(argv[argv.size() - 3], "/b.cc"); };

  SECTION("one worker: the units after it never start") {
    FakeRunner runner;
    runner.fails = is_b;
    RecordingSink status;
    util::TempDir build;
    try {
      execute_plan(plan, build.path(), fake_options(runner, status, 1));
      FAIL("built");
    } catch (const Error& e) {
      CHECK(e.code() == ExitCode::kBuildFailed);
      const std::string w = e.what();
      CHECK(util::starts_with(w, "compiling b.cc failed (exit status 1):\n  cd "));
      CHECK(w.find(util::format_command(plan.compile_steps[1].argv())) != std::string::npos);
      CHECK(util::ends_with(w, "fake.cc:1: error: it failed\n"));
    }
    CHECK(runner.outputs() == std::vector<std::string>{"cpp_0.o", "cpp_1.o"});
    const auto events = status.events();
    CHECK(events.back() == "end");  // the run ends however the build does
    CHECK(std::find(events.begin(), events.end(), "started fake-c++ c.cc") == events.end());
  }
  SECTION("as a value: the failed command, what it printed and its status") {
    FakeRunner runner;
    runner.fails = is_b;
    RecordingSink status;
    util::TempDir build;
    auto r = try_execute_plan(plan, build.path(), fake_options(runner, status, 1));
    REQUIRE_FALSE(r);
    CHECK(r.error().kind == CommandFailureKind::kFailed);
    CHECK(r.error().record.argv == plan.compile_steps[1].argv());
    CHECK(r.error().record.status == "exit status 1");
    CHECK(r.error().record.output == "fake.cc:1: error: it failed\n");
  }
  SECTION("two workers: the unit running beside the failure completes") {
    FakeRunner runner;
    runner.fails = is_b;
    // a.cc returns only once b.cc has been started, so both run together.
    std::mutex mutex;
    std::condition_variable cv;
    bool b_started = false, met = true;
    runner.on_run = [&](const std::vector<std::string>& argv) {
      std::unique_lock<std::mutex> lock(mutex);
      if (is_b(argv)) {
        b_started = true;
        cv.notify_all();
      } else if (util::ends_with(argv[argv.size() - 3], "/a.cc")) {
        met = cv.wait_for(lock, std::chrono::seconds(20), [&] { return b_started; });
      }
    };
    RecordingSink status;
    util::TempDir build;
    CHECK_THROWS_AS(execute_plan(plan, build.path(), fake_options(runner, status, 2)), Error);
    CHECK(met);
    CHECK(util::is_regular_file(build.path() + "/cpp_0.o"));
    const auto outs = runner.outputs();
    CHECK(std::find(outs.begin(), outs.end(), "liblib.so") == outs.end());
  }
}

TEST_CASE("an incremental build asks the runner only for the steps whose inputs changed",
          "[build][executor][runner][incremental]") {
  FakeTools tools;
  util::TempDir src, build;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 2);
  auto build_once = [&](RecordingSink& status) {
    FakeRunner runner;
    ExecuteOptions o = fake_options(runner, status, 1);
    o.incremental = true;
    BuildResult r = execute_plan(plan, build.path(), o);
    return std::make_pair(runner.outputs(), r.up_to_date);
  };
  RecordingSink first_status, second_status, third_status;
  auto first = build_once(first_status);
  CHECK(first.first == std::vector<std::string>{"cpp_0.o", "cpp_1.o", ".liblib.so.tmp." + std::to_string(::getpid())});
  CHECK(first.second.empty());

  auto second = build_once(second_status);
  CHECK(second.first.empty());
  CHECK(second.second == std::vector<std::string>{"cpp_0.o", "cpp_1.o", "liblib.so"});
  const auto events = second_status.events();
  CHECK(std::find(events.begin(), events.end(), "started fake-c++ a.cc (up to date)") != events.end());
  CHECK(std::find(events.begin(), events.end(), "started link liblib.so (up to date)") != events.end());

  util::write_file(src.path() + "/b.cc", "int f1(); int changed();\n");
  auto third = build_once(third_status);
  CHECK(third.first == std::vector<std::string>{"cpp_1.o", ".liblib.so.tmp." + std::to_string(::getpid())});
  CHECK(third.second == std::vector<std::string>{"cpp_0.o"});
}

TEST_CASE("the embed unit runs after the device steps it includes and before the link", "[build][executor][runner]") {
  FakeTools tools;
  util::TempDir src, build;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 1);
  CompileStep device = cxx_step(tools.cxx, src.path() + "/a.cc", 7);
  device.object_name = "embed_k.cubin";
  device.depfile_name = "embed_k.cubin.d";
  plan.device_steps.push_back(device);
  plan.embeds.push_back({"k", "", "embed_k.cubin"});
  CompileStep embed;
  embed.compiler = tools.cxx;
  embed.flags = {"-fPIC", "-x", "assembler"};
  embed.generated_name = "embed.s";
  embed.generated_text = "# the embed unit\n";
  embed.object_name = "embed_cubin.o";
  embed.display = "the embedded device binaries";
  plan.embed_step = embed;
  plan.link->inputs.push_back("embed_cubin.o");
  FakeRunner runner;
  RecordingSink status;
  BuildResult r = execute_plan(plan, build.path(), fake_options(runner, status, 2));
  const auto outs = runner.outputs();
  REQUIRE(outs.size() == 4);
  CHECK(std::set<std::string>(outs.begin(), outs.begin() + 2) == std::set<std::string>{"embed_k.cubin", "cpp_0.o"});
  CHECK(outs[2] == "embed_cubin.o");
  CHECK(outs[3] == "liblib.so");
  CHECK(runner.calls()[2] == std::vector<std::string>{tools.cxx, "-fPIC", "-x", "assembler", "-c", "embed.s", "-o",
                                                      "embed_cubin.o"});
  CHECK(util::read_file(build.path() + "/embed.s") == "# the embed unit\n");
  CHECK(r.commands.at(2).description == "compiling the embedded device binaries");
  const auto events = status.events();
  CHECK(std::find(events.begin(), events.end(), "started embed k") != events.end());
}

// ---- the cost model: learned costs order the gate's queue (compile/cost_log.h)

namespace {

// The fake runner, reporting `cpu` seconds for every command it runs.
class CostingRunner : public FakeRunner {
 public:
  double cpu = 2.5;
  util::ProcessResult run(const std::vector<std::string>& argv, const util::ProcessOptions& options) override {
    util::ProcessResult r = FakeRunner::run(argv, options);
    r.cpu_seconds = cpu;
    r.max_rss_bytes = 100u << 20;
    return r;
  }
};

}  // namespace

TEST_CASE("the cost log orders queued jobs longest first and learns what each job cost", "[build][executor][costs]") {
  FakeTools tools;
  util::TempDir src, build, root;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 4);  // a.cc b.cc c.cc d.cc
  const std::string log = util::join_path(root.path(), "costs.log");
  // What an earlier build learned: c.cc is the longest, then a.cc, then d.cc;
  // b.cc was never built: estimated as the mean of the C++ jobs logged, 24 s.
  CostLog earlier;
  earlier.jobs[unit_cost_id(CostScope{"lib"}, plan.compile_steps[2])] = JobCost{"c++", 40, 40, 0};
  earlier.jobs[unit_cost_id(CostScope{"lib"}, plan.compile_steps[0])] = JobCost{"c++", 30, 30, 0};
  earlier.jobs[unit_cost_id(CostScope{"lib"}, plan.compile_steps[3])] = JobCost{"c++", 2, 2, 0};
  util::write_file(log, format_cost_log(earlier));

  CostModel costs(log);
  util::JobGate gate(1, 0);  // one slot: the queue decides the order
  CostingRunner runner;
  // The first job admitted holds the slot until the other three wait in the
  // gate (a handshake, bounded), so their order is the gate's alone.
  std::atomic<bool> first{true};
  bool all_queued = true;
  runner.on_run = [&](const std::vector<std::string>& argv) {
    if (argv.back() == "liblib.so" || !first.exchange(false)) return;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (gate.waiting() < 3) {
      if (std::chrono::steady_clock::now() > deadline) {
        all_queued = false;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  RecordingSink status;
  ExecuteOptions o = fake_options(runner, status, 4);
  o.gate = &gate;
  o.costs = &costs;
  BuildResult r = execute_plan(plan, build.path(), o);
  REQUIRE(all_queued);
  std::vector<std::string> outs = runner.outputs();
  REQUIRE(outs.size() == 5);
  // After whichever started first: longest chain first.
  std::vector<std::string> expected;
  for (const char* o : {"cpp_2.o", "cpp_0.o", "cpp_1.o", "cpp_3.o"})
    if (o != outs[0]) expected.push_back(o);
  CHECK(std::vector<std::string>(outs.begin() + 1, outs.begin() + 4) == expected);
  CHECK(outs.back() == "liblib.so");
  // Each record says what was expected, and from what.
  for (const auto& c : r.commands) {
    if (c.description.find("b.cc") != std::string::npos) {
      CHECK(c.estimate_source == "kind-mean");
      CHECK(c.estimated_cpu_seconds == Approx(24));
    }
    if (c.description.find("c.cc") != std::string::npos) {
      CHECK(c.estimate_source == "log");
      CHECK(c.estimated_cpu_seconds == Approx(40));
    }
  }

  // What this build cost replaces what the log said, and the link is learned.
  costs.save();
  auto saved = parse_cost_log(util::read_file(log)).jobs;
  REQUIRE(saved.count(unit_cost_id(CostScope{"lib"}, plan.compile_steps[2])));
  CHECK(saved[unit_cost_id(CostScope{"lib"}, plan.compile_steps[2])].cpu_seconds == Approx(2.5));
  CHECK(saved[unit_cost_id(CostScope{"lib"}, plan.compile_steps[1])].kind == "c++");
  CHECK(saved.count(link_cost_id("lib")));
  CHECK(saved.count(unit_source_cost_id(CostScope{"lib"}, plan.compile_steps[1])));
  // A new model reads it back: b.cc is now known from the log.
  CostModel again(log);
  CHECK(again.estimate_unit(CostScope{"lib"}, plan.compile_steps[1]).source == EstimateSource::kLog);
  // The same source in another module is estimated from this one's cost.
  CHECK(again.estimate_unit(CostScope{"other"}, plan.compile_steps[1]).source == EstimateSource::kSameSource);
}

TEST_CASE("a damaged cost log is a hint ignored line by line, never a failure", "[build][executor][costs]") {
  auto parsed = parse_cost_log("# header\nnot a line\nu0123456789abcdef0123\tc++\t1500\t1600\t10\n"
                               "u0123456789abcdef0123\tc++\t-1\t1\t1\nzzz\tc++\t1\t1\t1\n\xff\xfe\n").jobs;
  REQUIRE(parsed.size() == 1);
  CHECK(parsed.begin()->second.cpu_seconds == Approx(1.5));
  CHECK(parsed.begin()->second.peak_rss_bytes == 10 * 1024);
  util::TempDir d;
  util::make_directories(d.path() + "/costs.log");  // not a file
  CostModel costs(d.path() + "/costs.log");
  CompileStep s;
  s.language = Language::kCuda;
  s.flags = {"-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_80,code=sm_80"};
  CostEstimate e = costs.estimate_unit(CostScope{"m"}, s);
  CHECK(e.source == EstimateSource::kDefault);
  CHECK(e.cost.kind == "nvcc/2");
  costs.record_unit(CostScope{"m"}, s, JobCost{"", 1, 1, 0});
  costs.save();  // cannot write over a directory: logged, not thrown
}

TEST_CASE("split-compile auto gives a lone nvcc job the idle cores and says so in its command", "[build][executor][costs]") {
  FakeTools tools;
  util::TempDir src, build;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 1);
  CompileStep& s = plan.compile_steps[0];
  s.language = Language::kCuda;
  s.flags = {"-gencode=arch=compute_90a,code=sm_90a"};
  s.split_compile = kSplitCompileAuto;
  CostModel costs;
  util::JobGate gate(4, 0);
  CostingRunner runner;
  RecordingSink status;
  ExecuteOptions o = fake_options(runner, status, 1);
  o.gate = &gate;
  o.costs = &costs;
  BuildResult r = execute_plan(plan, build.path(), o);
  const auto calls = runner.calls();
  REQUIRE(calls.size() == 2);
  CHECK(std::count(calls[0].begin(), calls[0].end(), "--split-compile=4") == 1);
  CHECK(r.commands[0].slots == 4);
  // Without auto, one slot and no flag.
  s.split_compile = 0;
  CostingRunner plain;
  ExecuteOptions p = fake_options(plain, status, 1);
  p.gate = &gate;
  p.costs = &costs;
  util::TempDir build2;
  execute_plan(plan, build2.path(), p);
  const auto plain_calls = plain.calls();
  for (const auto& a : plain_calls.at(0)) CHECK(a.find("split-compile") == std::string::npos);
}

TEST_CASE("split-compile auto never splits beyond the slots a job holds: a cold unit while the pool is full",
          "[build][executor][costs]") {
  FakeTools tools;
  util::TempDir src;
  BuildPlan plan = fake_plan(tools.cxx, src.path(), 1);
  CompileStep& s = plan.compile_steps[0];
  s.language = Language::kCuda;
  s.flags = {"-gencode=arch=compute_90a,code=sm_90a"};
  s.split_compile = kSplitCompileAuto;
  util::JobGate gate(8, 0);
  util::JobGate::Ticket busy = gate.acquire(7, 1);  // other modules' jobs hold 7 of the 8 slots
  REQUIRE(busy.slots() == 7);
  RecordingSink status;
  auto run = [&](CostModel& costs) {
    CostingRunner runner;
    ExecuteOptions o = fake_options(runner, status, 1);
    o.gate = &gate;
    o.costs = &costs;
    util::TempDir build;
    BuildResult r = execute_plan(plan, build.path(), o);
    REQUIRE(r.commands.size() == 2);
    return std::make_pair(runner.calls().at(0), r.commands[0]);
  };
  // Never built, or logged as long: one free slot, one thread (no more
  // threads than cores while the others run).
  CostModel cold;
  auto [cold_argv, cold_rec] = run(cold);
  CHECK(cold_rec.slots == 1);
  CHECK(cold_rec.split == 0);
  for (const auto& a : cold_argv) CHECK(a.find("split-compile") == std::string::npos);
  util::TempDir logs;
  CostModel known(logs.path() + "/costs.log");
  known.record_unit(CostScope{ExecuteOptions{}.plan_name}, s, JobCost{"", 500, 500, 0});
  auto [known_argv, known_rec] = run(known);
  CHECK(known_rec.slots == 1);
  CHECK(known_rec.split == 0);
}

namespace {

// `n` nvcc units (a.cu, b.cu, ...; one -gencode target, --split-compile auto)
// of module `name`, in the order given by `letters`.
BuildPlan nvcc_plan(const std::string& nvcc, const std::string& src, const std::string& letters,
                    const std::string& name = "lib") {
  BuildPlan plan;
  plan.name = name;
  LinkStep link;
  int i = 0;
  for (char c : letters) {
    const std::string file = src + "/" + std::string(1, c) + ".cu";
    if (!util::path_exists(file)) util::write_file(file, "__global__ void k();\n");
    CompileStep st = cxx_step(nvcc, file, i);
    st.language = Language::kCuda;
    st.flags = {"-gencode=arch=compute_90a,code=sm_90a"};
    st.split_compile = kSplitCompileAuto;
    st.object_name = "cuda_" + std::to_string(i) + ".o";
    st.depfile_name = st.object_name + ".d";
    st.display = util::file_name(file);
    plan.compile_steps.push_back(st);
    link.inputs.push_back(st.object_name);
    ++i;
  }
  link.program = nvcc;
  link.flags = {"-shared"};
  link.output_name = "lib" + name + ".so";
  plan.link = link;
  plan.artifact_name = link.output_name;
  return plan;
}

// Runs `plan` on `gate` after every unit has queued (the first job admitted
// waits for them, so the order is the gate's alone); returns the records of
// the compiles in the order the gate admitted them.
std::vector<CommandRecord> run_all_queued(const BuildPlan& plan, util::JobGate& gate, CostModel& costs,
                                          FakeRunner& runner) {
  util::JobGate::Ticket busy = gate.acquire(gate.slots(), 1);  // the other modules' jobs, for now
  std::thread release([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (gate.waiting() < plan.compile_steps.size() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    busy = util::JobGate::Ticket();
  });
  RecordingSink status;
  ExecuteOptions o = fake_options(runner, status, static_cast<int>(plan.compile_steps.size()));
  o.gate = &gate;
  o.costs = &costs;
  util::TempDir build;
  BuildResult r = execute_plan(plan, build.path(), o);
  release.join();
  std::vector<CommandRecord> units;
  for (const auto& c : r.commands)
    if (c.description.rfind("compiling", 0) == 0) units.push_back(c);
  std::vector<CommandRecord> ordered = units;
  std::sort(ordered.begin(), ordered.end(),
            [](const CommandRecord& a, const CommandRecord& b) { return a.admission < b.admission; });
  return ordered;
}

std::vector<std::string> names_of(const std::vector<CommandRecord>& records) {
  std::vector<std::string> out;
  for (const auto& r : records) out.push_back(r.description.substr(std::string("compiling ").size()));
  return out;
}

}  // namespace

TEST_CASE("split-compile auto: the unit known to be long starts first, on the threads that end it by the floor",
          "[build][executor][costs]") {
  // Eight slots; a.cu logged at 100 CPU-s of which 20 serial (nvcc --time),
  // eleven units of 20 s. The work left over the slots: (100.5 + 11 *
  // 20.5) / 8 = 40.75 s (each chain with its 0.5 s link), by which a.cu
  // would end on 4 threads (20.5 + 80 / 4); but 4 slots held for 40.75 s
  // and the others' 225.5 s do not fit in 8 x 40.75. The floor at which they
  // do is 47.2 s, which a.cu meets on 3 (20.5 + 80 / 3 = 47.2): 3 slots, not
  // all 8 (perfect scaling, 100.5 / 40.75, happens to ask for 3 too).
  FakeTools tools;
  util::TempDir src;
  const BuildPlan plan = nvcc_plan(tools.cxx, src.path(), "lbcdefghijka");
  CostModel costs;
  for (const auto& st : plan.compile_steps) {
    JobCost c{"", st.display == "a.cu" ? 100.0 : 20.0, 0, 0};
    c.serial_seconds = st.display == "a.cu" ? 20 : 8;
    costs.record_unit(CostScope{"lib"}, st, c);
  }
  util::JobGate gate(8, 0);
  CostingRunner runner;
  const auto order = run_all_queued(plan, gate, costs, runner);
  REQUIRE(order.size() == 12);
  CHECK(order[0].description == "compiling a.cu");
  CHECK(order[0].slots == 3);
  CHECK(order[0].split == 3);
  // The first others ran on one slot each while the pool was full, and none
  // ran more threads than it held.
  // (while seven or more waited behind them, the floor stayed above 20.5 s)
  for (size_t i = 1; i <= 4; ++i) CHECK(order[i].slots == 1);
  for (const auto& r : order) CHECK(r.split <= std::max(1, r.slots));
  // Ties (the eleven of 20 s) by name, whatever the plan's order.
  CHECK(names_of(order) == std::vector<std::string>{"a.cu", "b.cu", "c.cu", "d.cu", "e.cu", "f.cu", "g.cu", "h.cu",
                                                    "i.cu", "j.cu", "k.cu", "l.cu"});
}

TEST_CASE("a plan given in reverse admits its units in the same order", "[build][executor][costs]") {
  FakeTools tools;
  util::TempDir src;
  // Cold C++-like weights: every unit the same default; a tie broken by name.
  auto admitted = [&](const std::string& letters) {
    const BuildPlan plan = nvcc_plan(tools.cxx, src.path(), letters);
    CostModel costs;
    util::JobGate gate(1, 0);
    CostingRunner runner;
    return names_of(run_all_queued(plan, gate, costs, runner));
  };
  const auto forward = admitted("abcdef");
  CHECK(forward == std::vector<std::string>{"a.cu", "b.cu", "c.cu", "d.cu", "e.cu", "f.cu"});
  CHECK(admitted("fedcba") == forward);
  CHECK(admitted("dafceb") == forward);
}

TEST_CASE("a cold nvcc unit is estimated from the bytes its source and headers hold", "[build][executor][costs]") {
  FakeTools tools;
  util::TempDir src;
  util::make_directories(src.path() + "/inc");
  // b.cu includes a large header through -I; a.cu and c.cu only themselves.
  util::write_file(src.path() + "/inc/big.cuh", std::string(3 << 20, ' ') + "\n#include \"more.cuh\"\n");
  util::write_file(src.path() + "/inc/more.cuh", std::string(1 << 20, ' '));
  util::write_file(src.path() + "/b.cu", "#include <big.cuh>\n#include \"missing.h\"\n__global__ void k();\n");
  BuildPlan plan = nvcc_plan(tools.cxx, src.path(), "abc");
  for (auto& st : plan.compile_steps) st.flags.push_back("-I" + src.path() + "/inc");
  CostModel costs;
  util::JobGate gate(1, 0);
  CostingRunner runner;
  const auto order = run_all_queued(plan, gate, costs, runner);
  REQUIRE(order.size() == 3);
  CHECK(names_of(order) == std::vector<std::string>{"b.cu", "a.cu", "c.cu"});
  CHECK(order[0].estimate_source == "source-size");
  CHECK(order[0].estimated_cpu_seconds > order[1].estimated_cpu_seconds);
  CHECK(order[0].estimated_cpu_seconds ==
        Approx(source_size_cpu_seconds("nvcc/1", (4u << 20) + 1 + 22 + util::read_file(src.path() + "/b.cu").size())));
  // A module's order (before any lookup) reads no source: the kind's default.
  CostModel fresh;
  CHECK(fresh.estimate_unit(CostScope{"lib"}, plan.compile_steps[1], false).source == EstimateSource::kDefault);
}

namespace {

// Answers `--time FILE` as nvcc 13 does (CSV, ms): 3 s serial, 9 s of cicc and ptxas.
class TimingRunner : public CostingRunner {
 public:
  util::ProcessResult run(const std::vector<std::string>& argv, const util::ProcessOptions& options) override {
    for (size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == "--time")
        util::write_file(util::join_path(options.cwd, argv[i + 1]),
                         "source file name , phase name , phase input files , phase output file , arch , tool, "
                         "metric , unit\n"
                         "k.cu , gcc (preprocessing 4) , k.cu , x.ii ,  , nvcc , 1000.0 , ms\n"
                         "k.cu , cudafe++ , x.ii , y.cpp , compute_90a , nvcc , 1000.0 , ms\n"
                         "k.cu , cicc , x.ii , x.ptx , compute_90a , nvcc , 6000.0 , ms\n"
                         "k.cu , ptxas , x.ptx , x.cubin , sm_90a , nvcc , 3000.0 , ms\n"
                         "k.cu , gcc (compiling) , , k.o , compute_90a , nvcc , 1000.0 , ms\n");
    util::ProcessResult r = CostingRunner::run(argv, options);
    r.cpu_seconds = 12;
    return r;
  }
};

}  // namespace

TEST_CASE("nvcc --time teaches the cost log a unit's serial and splittable seconds, outside its key",
          "[build][executor][costs]") {
  FakeTools tools;
  util::TempDir src, root;
  BuildPlan plan = nvcc_plan(tools.cxx, src.path(), "a");
  const std::string log = util::join_path(root.path(), "costs.log");
  CostModel costs(log);
  TimingRunner runner;
  RecordingSink status;
  ExecuteOptions o = fake_options(runner, status, 1);
  o.costs = &costs;
  util::TempDir build;
  BuildResult r = execute_plan(plan, build.path(), o);
  const auto argv = runner.calls().at(0);
  auto t = std::find(argv.begin(), argv.end(), "--time");
  REQUIRE(t != argv.end());
  CHECK(*(t + 1) == "cuda_0.o.time.csv");                               // in the build's temp dir...
  CHECK_FALSE(util::path_exists(build.path() + "/cuda_0.o.time.csv"));  // ...and gone once read
  // Not in the step's argv(), which the cache keys hash.
  for (const auto& a : plan.compile_steps[0].argv()) CHECK(a != "--time");
  CHECK(r.commands[0].serial_seconds == Approx(3));
  costs.save();
  auto saved = parse_cost_log(util::read_file(log)).jobs;
  const auto& learned = saved.at(unit_cost_id(CostScope{"lib"}, plan.compile_steps[0]));
  CHECK(learned.serial_seconds == Approx(3));
  CHECK(learned.cpu_seconds == Approx(12));
  // With a launcher, nvcc is not asked (the launcher would hash or forward it).
  plan.compile_steps[0].launcher = {tools.cxx};
  TimingRunner launched;
  ExecuteOptions l = fake_options(launched, status, 1);
  l.costs = &costs;
  util::TempDir build2;
  execute_plan(plan, build2.path(), l);
  const auto launched_calls = launched.calls();
  for (const auto& a : launched_calls.at(0)) CHECK(a != "--time");
}

namespace {
// Records each command's MAKEFLAGS, and what the gate lent while it ran.
class JobserverRunner : public CostingRunner {
 public:
  util::JobGate* gate = nullptr;
  bool refuse_jobserver = false;  // an nvcc older than --jobserver
  std::vector<std::string> makeflags;
  std::vector<int> lent_while_running;
  util::ProcessResult run(const std::vector<std::string>& argv, const util::ProcessOptions& options) override {
    std::string flags;
    for (const auto& [k, v] : options.env)
      if (k == "MAKEFLAGS") flags = v;
    makeflags.push_back(flags);
    lent_while_running.push_back(gate ? gate->lent_slots() : -1);
    if (refuse_jobserver && std::count(argv.begin(), argv.end(), "--jobserver")) {
      util::ProcessResult r;
      r.exit_code = 1;
      r.out = "nvcc fatal   : Unknown option '--jobserver'\n";
      calls_for_refusal.push_back(argv);
      return r;
    }
    return CostingRunner::run(argv, options);
  }
  std::vector<std::vector<std::string>> calls_for_refusal;
};

// One nvcc unit (--split-compile auto) and its link, built on a lending gate of 4 slots.
struct LoneSplitUnit {
  FakeTools tools;
  util::TempDir src, build;
  BuildPlan plan;
  CostModel costs;
  util::JobGate gate{4, 0, /*lend_idle_slots=*/true};
  JobserverRunner runner;
  RecordingSink status;
  LoneSplitUnit() {
    plan = fake_plan(tools.cxx, src.path(), 1);
    CompileStep& s = plan.compile_steps[0];
    s.language = Language::kCuda;
    s.flags = {"-gencode=arch=compute_90a,code=sm_90a"};
    s.split_compile = kSplitCompileAuto;
    runner.gate = &gate;
  }
  BuildResult run() {
    ExecuteOptions o = fake_options(runner, status, 1);
    o.gate = &gate;
    o.costs = &costs;
    return execute_plan(plan, build.path(), o);
  }
};
}  // namespace

TEST_CASE("split-compile auto with a lending gate: one slot, nvcc --split-compile=16 --jobserver, the idle slots lent",
          "[build][executor][costs][jobserver]") {
  LoneSplitUnit t;
  BuildResult r = t.run();
  JobserverRunner& runner = t.runner;
  util::JobGate& gate = t.gate;
  const CompileStep& s = t.plan.compile_steps[0];
  const auto calls = runner.calls();
  REQUIRE(calls.size() == 2);
  CHECK(std::count(calls[0].begin(), calls[0].end(), "--split-compile=16") == 1);
  CHECK(std::count(calls[0].begin(), calls[0].end(), "--jobserver") == 1);
  CHECK(runner.makeflags[0] == *gate.jobserver_makeflags());
  CHECK(runner.makeflags[1].empty());  // the link has no jobserver
  CHECK(r.commands[0].slots == 1);     // its other threads are lent, not held
  CHECK(runner.lent_while_running[0] == 3);
  // The key's argv holds neither (compile/module_key.cpp keys "auto").
  for (const auto& a : s.argv()) CHECK(a.find("jobserver") == std::string::npos);
}

TEST_CASE("an nvcc that refuses --jobserver runs again on the slots its job holds, and the gate stops lending",
          "[build][executor][costs][jobserver]") {
  LoneSplitUnit t;
  t.runner.refuse_jobserver = true;
  BuildResult r = t.run();
  JobserverRunner& runner = t.runner;
  util::JobGate& gate = t.gate;
  REQUIRE(runner.calls_for_refusal.size() == 1);
  const auto calls = runner.calls();
  REQUIRE(calls.size() == 2);  // the compile again (without it), then the link
  for (const auto& a : calls[0]) CHECK(a.find("jobserver") == std::string::npos);
  CHECK(runner.makeflags[1].empty());
  CHECK(r.commands[0].slots == 1);
  CHECK_FALSE(gate.jobserver_makeflags());
}
