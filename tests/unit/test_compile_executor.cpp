// Running plans with the real host compiler: outputs, depfile-derived
// dependencies, and failures that show the command and its output.
#include <catch2/catch.hpp>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"

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
  plan.link = link;
  plan.artifact_name = "liblib.so";

  util::TempDir build;
  ExecuteOptions o;
  o.jobs = 2;
  o.quiet = true;
  BuildResult r = execute_plan(plan, build.path(), o);
  CHECK(r.artifact_path == util::canonical_path(build.path()) + "/liblib.so");
  CHECK(util::is_regular_file(r.artifact_path));
  CHECK(r.commands.size() == 4);
  REQUIRE(r.units.size() == 3);
  const auto& deps = r.units[0].dependencies;
  CHECK(std::find(deps.begin(), deps.end(), src.path() + "/shared.h") != deps.end());
  CHECK(std::find(deps.begin(), deps.end(), src.path() + "/a.cc") == deps.end());  // the source itself is not a header
  CHECK(r.units[1].dependencies.empty());
  CHECK(util::read_file(build.path() + "/gen.cpp") == "int c() { return 3; }\n");
  CHECK(util::is_regular_file(r.units[2].object_path));
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
  o.quiet = true;
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
