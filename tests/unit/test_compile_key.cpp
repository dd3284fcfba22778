#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compile/portable_args.h"
#include "tvmffi_jit/compile/key.h"
#include "tvmffi_jit/toolchain/environment.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;

namespace {

ModuleKeyInputs base_inputs() {
  ModuleKeyInputs in;
  in.tool_version = "0.1.0";
  in.emit_kind = "module";
  in.name = "add_one";
  in.sources = {{"a.cc", "/src/proj", "int a() { return 1; }\n"}, {"<inline cpp>", "", "int b();\n"}};
  in.functions = {{"add_one", "adds one"}, {"sub_one", ""}};
  in.flags = {{"c++", {"-std=c++17", "-fPIC", "-O2"}}, {"link", {"-shared"}}};
  in.include_paths = {"/src/proj/include"};
  in.archs = {"sm_80", "sm_90a"};
  in.compilers = {{"cxx", "/usr/bin/c++", "/usr/bin/g++-12", "g++ (Debian 12.2.0-14) 12.2.0\n"}};
  in.tvm_ffi_version = "0.1.15";
  in.tvm_ffi_include_dir = "/opt/tvm_ffi/include";
  in.environment = {{"CXX", "", false}, {"CC", "", false}, {"CUDA_HOME", "/usr/local/cuda", true}};
  in.extra = {{"device_compiler", "nvcc"}};
  return in;
}

using Mutation = std::pair<const char*, std::function<void(ModuleKeyInputs&)>>;

std::vector<Mutation> one_change_per_field() {
  return {
      {"tool version", [](ModuleKeyInputs& in) { in.tool_version = "0.2.0"; }},
      {"emit kind", [](ModuleKeyInputs& in) { in.emit_kind = "object"; }},
      {"name", [](ModuleKeyInputs& in) { in.name = "add_two"; }},
      {"file source content", [](ModuleKeyInputs& in) { in.sources[0].content += " "; }},
      {"inline source content", [](ModuleKeyInputs& in) { in.sources[1].content = "int c();\n"; }},
      {"source name", [](ModuleKeyInputs& in) { in.sources[0].name = "b.cc"; }},
      {"source directory", [](ModuleKeyInputs& in) { in.sources[0].directory = "/src/other"; }},
      {"source order", [](ModuleKeyInputs& in) { std::swap(in.sources[0], in.sources[1]); }},
      {"function name", [](ModuleKeyInputs& in) { in.functions[1].first = "mul_two"; }},
      {"docstring", [](ModuleKeyInputs& in) { in.functions[0].second = "adds 1"; }},
      {"flag value", [](ModuleKeyInputs& in) { in.flags[0].flags[2] = "-O3"; }},
      {"flag order", [](ModuleKeyInputs& in) { std::swap(in.flags[0].flags[0], in.flags[0].flags[1]); }},
      {"flag added", [](ModuleKeyInputs& in) { in.flags[1].flags.push_back("-lfoo"); }},
      {"flag moved between steps",
       [](ModuleKeyInputs& in) {
         in.flags[1].flags.insert(in.flags[1].flags.begin(), in.flags[0].flags.back());
         in.flags[0].flags.pop_back();
       }},
      {"include path", [](ModuleKeyInputs& in) { in.include_paths.push_back("/usr/local/include"); }},
      {"arch list", [](ModuleKeyInputs& in) { in.archs = {"sm_80"}; }},
      {"arch suffix", [](ModuleKeyInputs& in) { in.archs[1] = "sm_90"; }},
      {"compiler path", [](ModuleKeyInputs& in) { in.compilers[0].path = "/opt/gcc/bin/c++"; }},
      {"compiler resolved path", [](ModuleKeyInputs& in) { in.compilers[0].resolved = "/usr/bin/clang++"; }},
      {"compiler version output", [](ModuleKeyInputs& in) { in.compilers[0].identity = "g++ 13.1.0\n"; }},
      {"second compiler", [](ModuleKeyInputs& in) { in.compilers.push_back({"nvcc", "/n", "/n", "V13.0"}); }},
      {"tvm-ffi version", [](ModuleKeyInputs& in) { in.tvm_ffi_version = "0.1.16"; }},
      {"tvm-ffi include dir", [](ModuleKeyInputs& in) { in.tvm_ffi_include_dir = "/other/include"; }},
      {"CXX set", [](ModuleKeyInputs& in) { in.environment[0] = {"CXX", "clang++", true}; }},
      {"CC set to empty", [](ModuleKeyInputs& in) { in.environment[1] = {"CC", "", true}; }},
      {"CUDA_HOME value", [](ModuleKeyInputs& in) { in.environment[2].value = "/usr/local/cuda-12"; }},
      {"extra planner field", [](ModuleKeyInputs& in) { in.extra[0].second = "nvrtc"; }},
  };
}

void set_mtime(const std::string& path, time_t t) {
  struct timeval tv[2] = {{t, 0}, {t, 0}};
  REQUIRE(::utimes(path.c_str(), tv) == 0);
}

}  // namespace

TEST_CASE("module key is a stable 64-hex SHA-256 of its inputs", "[cache][key]") {
  Key a = compute_module_key(base_inputs());
  Key b = compute_module_key(base_inputs());
  CHECK(a.hex.size() == 64);
  CHECK(a.hex == b.hex);
  CHECK(a.short_hex() == a.hex.substr(0, 16));
}

TEST_CASE("changing any one module key field changes the key", "[cache][key]") {
  const std::string base = compute_module_key(base_inputs()).hex;
  std::set<std::string> seen = {base};
  for (const auto& [what, mutate] : one_change_per_field()) {
    ModuleKeyInputs in = base_inputs();
    mutate(in);
    std::string k = compute_module_key(in).hex;
    INFO("field: " << what);
    CHECK(k != base);
    CHECK(seen.insert(k).second);  // and no two different changes collide
  }
}

TEST_CASE("the key trace names every field that was hashed", "[cache][key]") {
  Key k = compute_module_key(base_inputs(), true);
  for (const char* tag : {"cache_format", "tool_version", "emit", "name", "source.content", "source.directory",
                          "function.doc", "flags[]", "include_paths[]", "archs[]", "compiler.identity",
                          "tvm_ffi.version", "tvm_ffi.include_dir", "env.name", "extra.value"}) {
    INFO(tag);
    CHECK(k.trace.find(tag) != std::string::npos);
  }
}

TEST_CASE("object keys change with the compiler, flags, source and its directory", "[cache][key]") {
  ObjectKeyInputs base;
  base.language = "c++";
  base.compiler = {"cxx", "/usr/bin/c++", "/usr/bin/g++-12", "g++ 12"};
  base.flags = {"-std=c++17", "-O2"};
  base.source = {"a.cc", "/p", "int a;"};
  base.include_paths = {"/p/include"};
  base.environment = {{"CXX", "", false}};
  const std::string k0 = compute_object_key(base).hex;
  std::vector<std::function<void(ObjectKeyInputs&)>> changes = {
      [](ObjectKeyInputs& o) { o.language = "cuda"; },
      [](ObjectKeyInputs& o) { o.compiler.identity = "g++ 13"; },
      [](ObjectKeyInputs& o) { o.flags.push_back("-DX"); },
      [](ObjectKeyInputs& o) { o.source.content = "int b;"; },
      [](ObjectKeyInputs& o) { o.source.directory = "/q"; },
      [](ObjectKeyInputs& o) { o.include_paths.clear(); },
      [](ObjectKeyInputs& o) { o.environment[0] = {"CXX", "g++", true}; },
      [](ObjectKeyInputs& o) { o.tool_version = "9"; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    ObjectKeyInputs o = base;
    changes[i](o);
    INFO("change " << i);
    CHECK(compute_object_key(o).hex != k0);
  }
  // Objects and modules never share a key space.
  CHECK(compute_object_key(base).hex != compute_module_key(ModuleKeyInputs{}).hex);
}

TEST_CASE("a source enters the key by content: touching it keeps the key", "[cache][key]") {
  util::TempDir dir;
  std::string src = util::join_path(dir.path(), "a.cc");
  util::write_file(src, "int a() { return 1; }\n");
  auto key_of_file = [&] {
    ModuleKeyInputs in = base_inputs();
    in.sources = {{"a.cc", dir.path(), util::read_file(src)}};
    return compute_module_key(in).hex;
  };
  std::string before = key_of_file();
  set_mtime(src, 1000000000);
  CHECK(key_of_file() == before);
  util::write_file(src, "int a() { return 2; }\n");
  CHECK(key_of_file() != before);
}

TEST_CASE("relevant environment distinguishes unset from empty", "[cache][key]") {
  auto env = relevant_environment(toolchain::fixed_environment({{"CXX", ""}}));
  REQUIRE(env.size() == relevant_environment_names().size());
  int seen = 0;
  for (const auto& v : env) {
    if (v.name == "CC") CHECK_FALSE(v.set);
    if (v.name == "CXX") CHECK((v.set && v.value.empty()));
    seen += v.name == "CC" || v.name == "CXX";
  }
  CHECK(seen == 2);
}

TEST_CASE("every variable that changes what gcc, nvcc or ld produce is read through the given lookup",
          "[cache][key]") {
  // Each of these changes the bytes a compile or link writes (docs/cache.md):
  // a module built with one value must not hit for another.
  const std::vector<std::string> output_changing = {
      "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN", "INCLUDES", "SYSTEM_INCLUDES", "LIBRARIES",
      "CUDAFE_FLAGS", "PTXAS_FLAGS", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH",
      "GCC_EXEC_PREFIX", "COMPILER_PATH", "LIBRARY_PATH", "SOURCE_DATE_EPOCH", "DEPENDENCIES_OUTPUT",
      "SUNPRO_DEPENDENCIES", "LD_RUN_PATH", "CXX", "CC", "CUDA_HOME"};
  std::vector<std::string> asked;
  toolchain::EnvLookup recording = [&](const std::string& name) -> std::optional<std::string> {
    asked.push_back(name);
    return name == "NVCC_APPEND_FLAGS" ? std::optional<std::string>("-DVAL=2") : std::nullopt;
  };
  auto env = relevant_environment(recording);
  for (const auto& name : output_changing) {
    INFO(name);
    CHECK(std::find(asked.begin(), asked.end(), name) != asked.end());
  }
  ModuleKeyInputs a = base_inputs(), b = base_inputs();
  a.environment = env;
  b.environment = relevant_environment(toolchain::fixed_environment({{"NVCC_APPEND_FLAGS", "-DVAL=1"}}));
  CHECK(compute_module_key(a).hex != compute_module_key(b).hex);
  // TMPDIR only says where temporary files go.
  CHECK(std::find(asked.begin(), asked.end(), "TMPDIR") == asked.end());
}

TEST_CASE("the portable key ignores where the project is; the local key does not", "[cache][key][portable]") {
  auto at = [](const std::string& root) {
    ModuleKeyInputs in = base_inputs();
    in.base_dir = root;
    in.sources = {{"a.cc", root + "/src", "int a();\n"},
                  {"main.cpp", "", "#include \"" + root + "/src/a.cc\"\nint b();\n"}};
    in.flags = {{"compile " + root + "/src/a.cc (c++ -> object)", {"-I" + root + "/include", "-O2", root + "/src/a.cc"}}};
    in.include_paths = {root + "/include", "/opt/tvm_ffi/include"};
    return in;
  };
  Key a = compute_module_key(at("/home/ci/one/proj"));
  Key b = compute_module_key(at("/tmp/other/checkout"));
  CHECK(a.portable_hex == b.portable_hex);
  CHECK(a.hex != b.hex);
  CHECK(a.hex == compute_module_key(at("/home/ci/one/proj")).hex);
  // Paths outside the base still count.
  ModuleKeyInputs moved = at("/tmp/other/checkout");
  moved.include_paths[1] = "/opt/other_tvm_ffi/include";
  CHECK(compute_module_key(moved).portable_hex != a.portable_hex);
  // A source that differs in content still differs.
  ModuleKeyInputs edited = at("/tmp/other/checkout");
  edited.sources[0].content = "int a2();\n";
  CHECK(compute_module_key(edited).portable_hex != a.portable_hex);
}

TEST_CASE("a key writes arguments, generated includes and step labels under the base dir portably", "[compile][key]") {
  cache::BaseDir base("/work/ci-7/proj");
  CHECK(portable_arg(base, "/work/ci-7/proj/src/a.cc") == "<base>/src/a.cc");
  CHECK(portable_arg(base, "-I/work/ci-7/proj/include") == "-I<base>/include");
  CHECK(portable_arg(base, "-isystem/work/ci-7/proj/x") == "-isystem<base>/x");
  CHECK(portable_arg(base, "--include-path=/work/ci-7/proj/x") == "--include-path=<base>/x");
  CHECK(portable_arg(base, "-DROOT=/work/ci-7/proj") == "-DROOT=/work/ci-7/proj");  // may reach the artifact
  CHECK(portable_arg(base, "-I/work/ci-7/project/x") == "-I/work/ci-7/project/x");  // a sibling, not under it
  CHECK(portable_text(base, "#include \"/work/ci-7/proj/k.cc\"\nint x;\n") == "#include \"<base>/k.cc\"\nint x;\n");
  CHECK(portable_text(base, "const char* p = \"/work/ci-7/proj/k.cc\";\n") ==
        "const char* p = \"/work/ci-7/proj/k.cc\";\n");
  CHECK(portable_label(base, "compile /work/ci-7/proj/src/a.cc (c++ -> object)") ==
        "compile <base>/src/a.cc (c++ -> object)");
  CHECK(portable_label(base, "compile /work/ci-7/project/a.cc") == "compile /work/ci-7/project/a.cc");
  CHECK(portable_arg(cache::BaseDir(), "-I/work/ci-7/proj/include") == "-I/work/ci-7/proj/include");  // no base
}
