#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "tvmffi_jit/compile/compile_commands.h"
#include "tvmffi_jit/compile/depfile.h"
#include "tvmffi_jit/compile/wrapper.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using compile::CompileCommand;
using compile::escape_depfile_path;
using compile::format_depfile;
using compile::parse_depfile;

TEST_CASE("a depfile names the artifact, one prerequisite per line and an empty rule for each",
          "[build][depfile]") {
  const std::string text = format_depfile({"/out/m.so"}, {"/src/m.json", "/src/k.cu", "/inc/k.h", "/src/k.cu"});
  CHECK(text ==
        "/out/m.so: \\\n"
        "  /src/m.json \\\n"
        "  /src/k.cu \\\n"
        "  /inc/k.h\n"
        "/src/m.json:\n"
        "/src/k.cu:\n"
        "/inc/k.h:\n");
}

TEST_CASE("spaces, hashes and dollars in paths are escaped the way make and ninja read them",
          "[build][depfile]") {
  CHECK(escape_depfile_path("/a b/c#d$e") == "/a\\ b/c\\#d$$e");
  CHECK(escape_depfile_path("/odd\\ name") == "/odd\\\\\\ name");  // backslash before a space is doubled
  CHECK(escape_depfile_path("/plain\\dir") == "/plain\\dir");       // other backslashes stay
  CHECK_THROWS_AS(escape_depfile_path("/new\nline"), Error);
}

TEST_CASE("what format_depfile writes, the depfile reader reads back as the same paths", "[build][depfile]") {
  // parse_depfile is the reader used for compiler depfiles; make and
  // ninja follow the same escaping rules.
  const std::vector<std::string> deps = {"/src/with space.cu", "/inc/hash#1.h", "/inc/$HOME.h",
                                         "/odd\\ name.h", "/plain\\dir/x.h", "/ends/in\\"};
  CHECK(escape_depfile_path("/ends/in\\") == "/ends/in\\\\");
  CHECK(parse_depfile(format_depfile({"/out/my module.so"}, deps)) == deps);
}

TEST_CASE("parse_depfile reads gcc and nvcc depfiles", "[build][depfile]") {
  std::string gcc = "cpp_0.o: /src/a.cc /src/h.h \\\n /inc/with\\ space.h \\\n /inc/d$$.h\n/src/h.h:\n";
  CHECK(parse_depfile(gcc) == std::vector<std::string>{"/src/a.cc", "/src/h.h", "/inc/with space.h", "/inc/d$.h"});
  std::string nvcc = "k.o : k.cu \\\r\n    /usr/local/cuda/include/cuda_runtime.h \\\r\n    k.h\r\n";
  CHECK(parse_depfile(nvcc) == std::vector<std::string>{"k.cu", "/usr/local/cuda/include/cuda_runtime.h", "k.h"});
  CHECK(parse_depfile("").empty());
  CHECK(parse_depfile("a.o:\n").empty());
}

TEST_CASE("write_depfile creates the directory and replaces the old file", "[build][depfile]") {
  util::TempDir dir;
  const std::string path = dir.path() + "/deps/m.d";
  compile::write_depfile(path, {"/out/m.so"}, {"/a.cu"});
  compile::write_depfile(path, {"/out/m.so"}, {"/b.cu"});
  CHECK(util::read_file(path) == "/out/m.so: \\\n  /b.cu\n/b.cu:\n");
}

TEST_CASE("compile_commands.json keeps other translation units and replaces the same one",
          "[build][compile_commands]") {
  util::TempDir dir;
  const std::string path = dir.path() + "/compile_commands.json";
  util::write_file(path,
                   R"([{"directory": "/src", "command": "c++ -I'/my inc' -c other.cpp -o other.o", "file": "other.cpp"},
                       {"directory": "/src", "arguments": ["c++", "-c", "k.cpp"], "file": "k.cpp"}])");
  CompileCommand k{"/build", {"c++", "-O2", "-c", "/src/k.cpp", "-o", "/build/k.o"}, "/src/k.cpp", "/build/k.o"};
  compile::update_compile_commands(path, {k});
  const auto db = compile::parse_compile_commands(util::read_file(path), path);
  REQUIRE(db.size() == 2);
  CHECK(db[0].file == "other.cpp");
  CHECK(db[0].arguments == std::vector<std::string>{"c++", "-I/my inc", "-c", "other.cpp", "-o", "other.o"});
  CHECK(db[1].arguments == k.arguments);
  CHECK(db[1].output == "/build/k.o");
}

TEST_CASE("a file that is not a compilation database is left alone", "[build][compile_commands]") {
  util::TempDir dir;
  const std::string path = dir.path() + "/compile_commands.json";
  util::write_file(path, "{\"not\": \"an array\"}");
  CHECK_THROWS_AS(compile::update_compile_commands(path, {CompileCommand{"/b", {"c++"}, "/a.cpp", ""}}), Error);
  CHECK(util::read_file(path) == "{\"not\": \"an array\"}");
}

TEST_CASE("a build's inputs are the manifest, sources, embeds and headers, never generated files",
          "[build][depfile]") {
  compile::Manifest m;
  m.manifest_path = "/proj/m.json";
  m.sources = {"/proj/a.cc", "/proj/k.cu"};
  m.embed_cubin = {{"k", "/proj/k.cubin"}};
  compile::BuildResult r;
  r.build_dir = "/tmp/build-x";
  compile::CompiledUnit unit;
  unit.dependencies = {"/proj/a.h", "/tmp/build-x/cpp_0_a.exports.cpp", "/usr/include/stdio.h", "/proj/a.h"};
  r.units = {unit};
  compile::CompiledUnit device;
  device.dependencies = {"/proj/k.h"};
  r.device_units = {device};
  CHECK(compile::build_inputs(m, r, {}) == std::vector<std::string>{"/proj/m.json", "/proj/a.cc", "/proj/k.cu",
                                                                  "/proj/k.cubin", "/proj/k.h", "/proj/a.h",
                                                                  "/usr/include/stdio.h"});
  // After a cache hit nothing was compiled; the entry's recorded headers stand in.
  compile::BuildResult hit;
  CHECK(compile::build_inputs(m, hit, {"/proj/a.h", "/proj/a.cc"}) ==
        std::vector<std::string>{"/proj/m.json", "/proj/a.cc", "/proj/k.cu", "/proj/k.cubin", "/proj/a.h"});
}

TEST_CASE("compile commands describe the user's files, with the export wrapper replaced by the file",
          "[build][compile_commands]") {
  compile::Manifest m;
  m.name = "mod";
  m.sources = {"/proj/a.cc", "/proj/b.cc"};
  m.functions = {{"f", ""}};
  compile::BuildPlan plan;
  compile::CompileStep wrapped;
  wrapped.compiler = "/usr/bin/c++";
  wrapped.flags = {"-std=c++17", "-I/opt/tvm/include"};
  wrapped.generated_name = "cpp_0_a.exports.cpp";
  wrapped.generated_text = compile::file_export_unit("/proj/a.cc", m.functions);
  wrapped.object_name = "cpp_0.o";
  wrapped.depfile_name = "cpp_0.o.d";
  compile::CompileStep plain = wrapped;
  plain.generated_text.reset();
  plain.generated_name.clear();
  plain.input_path = "/proj/b.cc";
  plain.object_name = "cpp_1.o";
  compile::CompileStep inline_unit = wrapped;
  inline_unit.generated_name = "main.cpp";
  inline_unit.generated_text = "int main_inline() { return 0; }\n";
  plan.compile_steps = {wrapped, plain, inline_unit};

  const auto db = compile::plan_compile_commands(plan, m, "/proj");
  REQUIRE(db.size() == 2);
  CHECK(db[0].file == "/proj/a.cc");
  CHECK(db[0].directory == "/proj");
  CHECK(std::find(db[0].arguments.begin(), db[0].arguments.end(), "/proj/a.cc") != db[0].arguments.end());
  CHECK(std::find(db[0].arguments.begin(), db[0].arguments.end(), "cpp_0_a.exports.cpp") == db[0].arguments.end());
  CHECK(std::find(db[0].arguments.begin(), db[0].arguments.end(), "-I/opt/tvm/include") != db[0].arguments.end());
  CHECK(db[1].file == "/proj/b.cc");
  CHECK(db[1].arguments == plain.argv());
}
