// Running plans with the real host compiler: outputs, depfile-derived
// dependencies, failures that show the command and its output, and the hooks
// the object cache plugs into the one compile loop.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "tvmffi_jit/compile/executor.h"
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

// Two C++ units and a link into lib<name>.so, sources in `src`.
BuildPlan two_unit_plan(const std::string& cxx, const std::string& src) {
  util::write_file(src + "/shared.h", "inline int twice(int x) { return 2 * x; }\n");
  util::write_file(src + "/a.cc", "#include \"shared.h\"\nint a() { return twice(1); }\n");
  util::write_file(src + "/b.cc", "int b() { return 2; }\n");
  BuildPlan plan;
  plan.name = "lib";
  plan.compile_steps.push_back(cxx_step(cxx, src + "/a.cc", 0));
  plan.compile_steps.push_back(cxx_step(cxx, src + "/b.cc", 1));
  LinkStep link;
  link.program = cxx;
  link.inputs = {"cpp_0.o", "cpp_1.o"};
  link.flags = {"-shared"};
  link.output_name = "liblib.so";
  plan.link = link;
  plan.artifact_name = "liblib.so";
  return plan;
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
  auto cxx = util::find_program("c++");
  REQUIRE(cxx);
  util::TempDir src;
  BuildPlan plan = two_unit_plan(*cxx, src.path());
  // An object for b.cc from elsewhere (what the cache would hold).
  util::TempDir elsewhere;
  util::ProcessResult made = util::run_process({*cxx, "-fPIC", "-c", src.path() + "/b.cc", "-o", elsewhere.path() + "/b.o"});
  REQUIRE(made.ok());
  // Were the executor to run this step's compiler, the build would fail (exit 4).
  plan.compile_steps[1].compiler = "/nonexistent/c++";

  std::vector<size_t> asked;
  std::mutex mutex;
  CompileHooks hooks;
  hooks.before_compile = [&](const UnitRef& u, const std::string& dir) -> std::optional<CommandRecord> {
    {
      std::lock_guard<std::mutex> lock(mutex);
      asked.push_back(u.index);
    }
    if (u.index != 1) return std::nullopt;
    util::write_file(dir + "/" + u.step.object_name, util::read_file(elsewhere.path() + "/b.o"));
    u.unit.object_path = dir + "/" + u.step.object_name;
    CommandRecord rec;
    rec.description = "cached b.cc";
    rec.output = "b.cc:1: warning: replayed\n";
    return rec;
  };

  CapturedProgress progress;
  util::TempDir build;
  ExecuteOptions o;
  o.jobs = 2;
  BuildResult r = execute_plan(plan, build.path(), o, hooks);
  CHECK(util::is_regular_file(r.artifact_path));
  std::sort(asked.begin(), asked.end());
  CHECK(asked == std::vector<size_t>{0, 1});
  REQUIRE(r.reused.size() == 1);
  CHECK(r.reused[0].description == "cached b.cc");
  CHECK(r.commands.size() == 2);  // a.cc and the link: only what ran
  CHECK(r.units[1].object_path == build.path() + "/cpp_1.o");
  const std::string shown = progress.text();
  CHECK(shown.find("b.cc:1: warning: replayed\n") != std::string::npos);
  CHECK(shown.find("] c++ " + src.path() + "/b.cc (cached)\n") != std::string::npos);
  CHECK(shown.find("] c++ " + src.path() + "/a.cc\n") != std::string::npos);
  CHECK(shown.find("[3/3] link liblib.so\n") != std::string::npos);
}

TEST_CASE("after_compile sees every compiled unit once, with its index and depfile headers, before the link",
          "[build][executor][hooks]") {
  auto cxx = util::find_program("c++");
  REQUIRE(cxx);
  util::TempDir src;
  BuildPlan plan = two_unit_plan(*cxx, src.path());
  CompileStep device = cxx_step(*cxx, src.path() + "/b.cc", 9);  // stands in for a device step: numbered first
  plan.device_steps.push_back(device);

  std::mutex mutex;
  std::vector<std::pair<size_t, std::string>> seen;  // (index, display)
  std::set<std::string> headers_of_a;
  std::atomic<bool> linked_before_hook{false};
  CompileHooks hooks;
  hooks.after_compile = [&](const UnitRef& u, const std::string& dir, const CommandRecord& rec) {
    if (util::is_regular_file(dir + "/liblib.so")) linked_before_hook = true;
    CHECK(util::is_regular_file(u.unit.object_path));
    CHECK(rec.description == "compiling " + u.step.display);
    std::lock_guard<std::mutex> lock(mutex);
    seen.emplace_back(u.index, u.step.object_name);
    if (u.step.object_name == "cpp_0.o") headers_of_a.insert(u.unit.dependencies.begin(), u.unit.dependencies.end());
  };
  util::TempDir build;
  ExecuteOptions o;
  o.jobs = 3;
  o.hide_compiler_output = true;
  BuildResult r = execute_plan(plan, build.path(), o, hooks);
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<std::pair<size_t, std::string>>{{0, "cpp_9.o"}, {1, "cpp_0.o"}, {2, "cpp_1.o"}});
  CHECK(headers_of_a.count(src.path() + "/shared.h") == 1);
  CHECK_FALSE(linked_before_hook);
  CHECK(r.reused.empty());
}

TEST_CASE("an exception from a hook fails the build and nothing is linked", "[build][executor][hooks]") {
  auto cxx = util::find_program("c++");
  REQUIRE(cxx);
  util::TempDir src;
  BuildPlan plan = two_unit_plan(*cxx, src.path());
  CompileHooks hooks;
  hooks.after_compile = [](const UnitRef& u, const std::string&, const CommandRecord&) {
    if (u.index == 0) throw io_error("cannot store the object");
  };
  util::TempDir build;
  ExecuteOptions o;
  o.hide_compiler_output = true;
  try {
    execute_plan(plan, build.path(), o, hooks);
    FAIL("built");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kIo);
    CHECK(std::string(e.what()) == "cannot store the object");
  }
  CHECK_FALSE(util::path_exists(build.path() + "/liblib.so"));
}

TEST_CASE("a compiler that exits 0 without writing its object is a build failure naming the object",
          "[build][executor]") {
  auto truth = util::find_program("true");
  REQUIRE(truth);
  util::TempDir src;
  util::write_file(src.path() + "/a.cc", "int a;\n");
  BuildPlan plan;
  plan.compile_steps.push_back(cxx_step(*truth, src.path() + "/a.cc", 0));
  plan.artifact_name = "cpp_0.o";
  util::TempDir build;
  ExecuteOptions o;
  o.hide_compiler_output = true;
  bool after_called = false;
  CompileHooks hooks;
  hooks.after_compile = [&](const UnitRef&, const std::string&, const CommandRecord&) { after_called = true; };
  try {
    execute_plan(plan, build.path(), o, hooks);
    FAIL("built");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kBuildFailed);
    CHECK(std::string(e.what()).find("exited 0 but did not write cpp_0.o") != std::string::npos);
  }
  CHECK_FALSE(after_called);  // nothing to store
}

TEST_CASE("progress counts every unit, served or compiled, and the link in one run", "[build][executor][hooks]") {
  auto cxx = util::find_program("c++");
  REQUIRE(cxx);
  util::TempDir src;
  BuildPlan plan = two_unit_plan(*cxx, src.path());
  CapturedProgress progress;
  util::TempDir build;
  ExecuteOptions o;
  o.jobs = 1;  // a fixed order for the lines
  execute_plan(plan, build.path(), o);
  CHECK(progress.text() == "[1/3] c++ " + src.path() + "/a.cc\n[2/3] c++ " + src.path() + "/b.cc\n[3/3] link liblib.so\n");
}
