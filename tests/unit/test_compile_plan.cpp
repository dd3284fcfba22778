// Command construction: the argv of every compile and link step, compared
// with what tvm_ffi's build.ninja runs (apache-tvm-ffi 0.1.15, docs/build.md).
#include <catch2/catch.hpp>

#include "fake_build.h"

#include <sys/stat.h>

#include <algorithm>

#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/compile/wrapper.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::compile;
using Argv = std::vector<std::string>;

namespace {

// The plan tests build CUDA units too.
toolchain::Toolchain fake_toolchain() { return testing::fake_toolchain(true); }
using testing::no_gpus;

struct Sources {
  util::TempDir dir;
  Sources() {
    for (const char* f : {"a.cc", "b.cpp", "k.cu", "c.c", "pre.o", "emb.cu", "kern.cubin"})
      util::write_file(util::join_path(dir.path(), f), "// test\n");
  }
  std::string path(const std::string& f) const { return util::join_path(dir.path(), f); }
  Manifest parse(const std::string& text) const { return parse_manifest_text(text, path("m.json"), dir.path()); }
};

}  // namespace

TEST_CASE("an inline C++ build runs tvm_ffi's compile and link commands", "[build][plan]") {
  Sources s;
  Manifest m = s.parse(R"({"name": "hello", "cpp_sources": "int add(int a, int b) { return a + b; }",
                           "functions": ["add"], "extra_cflags": ["-DFOO", " "], "extra_ldflags": ["-lm"]})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  REQUIRE(p.compile_steps.size() == 1);
  const CompileStep& c = p.compile_steps[0];
  CHECK(c.generated_name == "main.cpp");
  CHECK(*c.generated_text == decorate_with_tvm_ffi("int add(int a, int b) { return a + b; }", {{"add", ""}}));
  CHECK(c.argv() == Argv{"/usr/bin/c++", "-MD", "-MF", "cpp_0.o.d", "-std=c++17", "-fPIC", "-O2", "-DFOO",
                         "-I/tvm/include", "-I/tvm/include", "-c", "main.cpp", "-o", "cpp_0.o"});
  REQUIRE(p.link);
  CHECK(p.link->argv() ==
        Argv{"/usr/bin/c++", "cpp_0.o", "-shared", "-L/tvm/lib", "-ltvm_ffi", "-lm",
             "-Wl,--dependency-file=hello.so.d", "-o", "hello.so"});
  CHECK(p.artifact_name == "hello.so");
  CHECK(p.archs.empty());
}

TEST_CASE("C++ and CUDA inline sources: exports go to C++, CUDA gets gencode and -lcudart", "[build][plan]") {
  Sources s;
  util::make_directories(s.path("inc"));
  Manifest m = s.parse(R"({"name": "hello", "cpp_sources": "void add_one_cuda();",
                           "cuda_sources": "void add_one_cuda() {}", "functions": {"add_one_cuda": "doc"},
                           "extra_cflags": ["-DFOO"], "extra_cuda_cflags": ["--use_fast_math"],
                           "extra_ldflags": ["-lcuda"], "extra_include_paths": ["inc"], "cuda_arch": "9.0"})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  REQUIRE(p.compile_steps.size() == 2);
  CHECK(*p.compile_steps[0].generated_text ==
        decorate_with_tvm_ffi("void add_one_cuda();", {{"add_one_cuda", "doc"}}));
  CHECK(*p.compile_steps[1].generated_text == decorate_with_tvm_ffi("void add_one_cuda() {}", {}));
  const std::string inc = "-I" + s.path("inc");
  CHECK(p.compile_steps[0].argv() ==
        Argv{"/usr/bin/c++", "-MD", "-MF", "cpp_0.o.d", "-std=c++17", "-fPIC", "-O2", "-DFOO", "-I/tvm/include",
             "-I/tvm/include", inc, "-c", "main.cpp", "-o", "cpp_0.o"});
  CHECK(p.compile_steps[1].argv() ==
        Argv{"/opt/cuda/bin/nvcc", "--generate-dependencies-with-compile", "--dependency-output", "cuda_0.o.d",
             "-Xcompiler", "-fPIC", "-std=c++17", "-O2", "-gencode=arch=compute_90,code=sm_90", "--use_fast_math",
             "-I/tvm/include", "-I/tvm/include", inc, "-c", "cuda.cu", "-o", "cuda_0.o"});
  CHECK(p.link->argv() == Argv{"/usr/bin/c++", "cpp_0.o", "cuda_0.o", "-shared", "-L/tvm/lib", "-ltvm_ffi",
                               "-L/opt/cuda/lib64", "-lcudart", "-lcuda", "-Wl,--dependency-file=hello.so.d",
                               "-o", "hello.so"});
  CHECK(p.arch_source == "manifest");
}

TEST_CASE("CUDA-only inline sources receive the exports (load_inline's rule)", "[build][plan]") {
  Sources s;
  Manifest m = s.parse(R"({"name": "k", "cuda_sources": "void f() {}", "functions": "f"})");
  PlanOptions o = no_gpus();
  o.env_arch_list = "8.0 9.0a";
  BuildPlan p = make_plan(m, fake_toolchain(), o);
  REQUIRE(p.compile_steps.size() == 1);
  CHECK(*p.compile_steps[0].generated_text == decorate_with_tvm_ffi("void f() {}", {{"f", ""}}));
  CHECK(p.arch_source == "TVM_FFI_CUDA_ARCH_LIST");
  const Argv& f = p.compile_steps[0].flags;
  CHECK(std::find(f.begin(), f.end(), "-gencode=arch=compute_90a,code=sm_90a") != f.end());
}

TEST_CASE("file sources: the first C++ file is compiled through a generated export unit", "[build][plan]") {
  Sources s;
  Manifest m = s.parse(R"({"name": "mix", "sources": ["c.c", "a.cc", "k.cu", "b.cpp", "pre.o"],
                           "functions": ["f", "g"], "cuda_arch": ["8.0"]})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  REQUIRE(p.compile_steps.size() == 4);
  const CompileStep& c = p.compile_steps[0];
  CHECK(c.language == Language::kC);
  CHECK(c.argv() == Argv{"/usr/bin/cc", "-MD", "-MF", "c_0.o.d", "-fPIC", "-O2", "-I/tvm/include",
                         "-I/tvm/include", "-c", s.path("c.c"), "-o", "c_0.o"});
  const CompileStep& host = p.compile_steps[1];
  CHECK(host.generated_name == "cpp_0_a.exports.cpp");
  CHECK(*host.generated_text == file_export_unit(s.path("a.cc"), {{"f", ""}, {"g", ""}}));
  CHECK(host.compiler_input() == "cpp_0_a.exports.cpp");
  CHECK(host.display == "a.cc");
  CHECK(p.compile_steps[2].language == Language::kCuda);
  CHECK(p.compile_steps[2].input_path == s.path("k.cu"));
  CHECK_FALSE(p.compile_steps[2].generated_text);
  CHECK(p.compile_steps[3].input_path == s.path("b.cpp"));
  CHECK(p.compile_steps[3].object_name == "cpp_1.o");
  CHECK(p.link->inputs == Argv{"c_0.o", "cpp_0.o", "cuda_0.o", "cpp_1.o", s.path("pre.o")});
}

TEST_CASE("with only CUDA files the first one hosts the exports", "[build][plan]") {
  Sources s;
  Manifest m = s.parse(R"({"name": "k", "sources": ["k.cu"], "functions": "f", "cuda_arch": "9.0"})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  REQUIRE(p.compile_steps.size() == 1);
  CHECK(p.compile_steps[0].generated_name == "cuda_0_k.exports.cu");
  CHECK(p.compile_steps[0].argv().back() == "cuda_0.o");
}

TEST_CASE("file sources without functions compile as they are", "[build][plan]") {
  Sources s;
  Manifest m = s.parse(R"({"name": "plain", "sources": ["a.cc"]})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  REQUIRE(p.compile_steps.size() == 1);
  CHECK(p.compile_steps[0].input_path == s.path("a.cc"));
  CHECK_FALSE(p.compile_steps[0].generated_text);
}

TEST_CASE("emit object copies one object and merges several with ld -r", "[build][plan]") {
  Sources s;
  BuildPlan one = make_plan(s.parse(R"({"name": "o", "sources": ["a.cc"], "emit": "object"})"), fake_toolchain(), no_gpus());
  CHECK(one.link->kind == LinkStep::Kind::kCopyObject);
  CHECK(one.artifact_name == "o.o");
  BuildPlan two =
      make_plan(s.parse(R"({"name": "o", "sources": ["a.cc", "b.cpp"], "emit": "object"})"), fake_toolchain(), no_gpus());
  CHECK(two.link->argv() == Argv{"ld", "-r", "-o", "o.o", "cpp_0.o", "cpp_1.o"});
}

TEST_CASE("device emits: cubin for one arch, fatbin for all, PTX for the virtual arch", "[build][plan]") {
  Sources s;
  BuildPlan cubin = make_plan(s.parse(R"({"name": "k", "sources": ["k.cu"], "emit": "cubin", "cuda_arch": "9.0a",
                                          "extra_cuda_cflags": ["--compress-mode=size"]})"),
                              fake_toolchain(), no_gpus());
  REQUIRE(cubin.compile_steps.size() == 1);
  CHECK_FALSE(cubin.link);
  CHECK(cubin.compile_steps[0].argv() ==
        Argv{"/opt/cuda/bin/nvcc", "--generate-dependencies-with-compile", "--dependency-output", "k.cubin.d",
             "-std=c++17", "-O2", "-gencode=arch=compute_90a,code=sm_90a", "--compress-mode=size", "-I/tvm/include",
             "-I/tvm/include", "-cubin", s.path("k.cu"), "-o", "k.cubin"});
  BuildPlan fatbin = make_plan(s.parse(R"({"name": "k", "cuda_sources": "__global__ void k() {}", "emit": "fatbin",
                                           "cuda_arch": "8.0 9.0+PTX"})"),
                               fake_toolchain(), no_gpus());
  const CompileStep& f = fatbin.compile_steps[0];
  CHECK(f.generated_name == "k.cu");
  CHECK(*f.generated_text == "__global__ void k() {}");  // kernel sources are not wrapped
  CHECK(f.argv() == Argv{"/opt/cuda/bin/nvcc", "--generate-dependencies-with-compile", "--dependency-output",
                         "k.fatbin.d", "-std=c++17", "-O2", "-gencode=arch=compute_80,code=sm_80",
                         "-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_90,code=compute_90",
                         "-I/tvm/include", "-I/tvm/include", "-fatbin", "k.cu", "-o", "k.fatbin"});
  BuildPlan ptx = make_plan(s.parse(R"({"name": "k", "sources": ["k.cu"], "emit": "ptx"})"), fake_toolchain(),
                            [] {
                              PlanOptions o;
                              o.env_arch_list = "10.0f";
                              return o;
                            }());
  CHECK(ptx.compile_steps[0].argv() ==
        Argv{"/opt/cuda/bin/nvcc", "--generate-dependencies-with-compile", "--dependency-output", "k.ptx.d",
             "-std=c++17", "-O2", "-arch=compute_100f", "-I/tvm/include", "-I/tvm/include", "-ptx", s.path("k.cu"),
             "-o", "k.ptx"});
}

TEST_CASE("a cubin for several archs is a usage error suggesting fatbin", "[build][plan]") {
  Sources s;
  Manifest m = s.parse(R"({"name": "k", "sources": ["k.cu"], "emit": "cubin", "cuda_arch": "8.0 9.0"})");
  try {
    make_plan(m, fake_toolchain(), no_gpus());
    FAIL("planned");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kUsage);
    CHECK(std::string(e.what()).find("--emit fatbin") != std::string::npos);
  }
  Manifest ptx_in_cubin = s.parse(R"({"name": "k", "sources": ["k.cu"], "emit": "cubin", "cuda_arch": "9.0+PTX"})");
  CHECK_THROWS_AS(make_plan(ptx_in_cubin, fake_toolchain(), no_gpus()), Error);
}

TEST_CASE("nvrtc plans an in-process compile with the name expressions", "[build][plan]") {
  Sources s;
  util::write_file(s.path("t.cu"), "template <typename T> __global__ void k(T* x) {}\n");
  Manifest m = s.parse(R"({"name": "t", "sources": ["t.cu"], "emit": "cubin", "compiler": "nvrtc",
                           "kernel_names": ["k<float>"], "cuda_arch": "9.0", "extra_cuda_cflags": ["-DX=1"]})");
  toolchain::Toolchain tc = fake_toolchain();
  tc.cuda = Unexpected{"no nvcc"};  // NVRTC needs no nvcc
  BuildPlan p = make_plan(m, tc, no_gpus());
  REQUIRE(p.nvrtc);
  CHECK(p.compile_steps.empty());
  CHECK(p.nvrtc->request.source == "template <typename T> __global__ void k(T* x) {}\n");
  // The full path: NVRTC resolves quoted includes next to the source name.
  CHECK(p.nvrtc->request.source_name == s.path("t.cu"));
  CHECK(compile::nvrtc_architecture(p.nvrtc->request) == "sm_90");
  CHECK(p.nvrtc->request.output == NvrtcOutput::kCubin);
  CHECK(p.nvrtc->request.name_expressions == Argv{"k<float>"});
  CHECK(p.nvrtc->request.options == Argv{"-DX=1"});
  CHECK(p.nvrtc->request.include_paths == Argv{"/tvm/include", "/tvm/include"});
  CHECK(p.nvrtc->output_name == "t.cubin");
}

TEST_CASE("embed_cubin: prebuilt files are embedded as is, .cu files are compiled to a cubin first", "[build][plan]") {
  Sources s;
  Manifest m = s.parse(R"({"name": "e", "cpp_sources": "int x;", "embed_cubin": {"pre": "kern.cubin", "built": "emb.cu"},
                           "cuda_arch": "9.0"})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  REQUIRE(p.embeds.size() == 2);
  CHECK(p.embeds[0].path == s.path("kern.cubin"));
  CHECK(p.embeds[1].built_name == "embed_built.cubin");
  REQUIRE(p.device_steps.size() == 1);
  CHECK(p.device_steps[0].output == CompileOutput::kCubin);
  CHECK(p.device_steps[0].object_name == "embed_built.cubin");
  CHECK(p.link->inputs == Argv{"cpp_0.o", "embed_cubin.o"});
  // Embedding a compiled-from-.cu cubin needs exactly one arch.
  Manifest multi = s.parse(R"({"name": "e", "cpp_sources": "int x;", "embed_cubin": {"built": "emb.cu"},
                               "cuda_arch": "8.0 9.0"})");
  CHECK_THROWS_AS(make_plan(multi, fake_toolchain(), no_gpus()), Error);
}

TEST_CASE("the embed unit is a planned compile step: its argv and its source, built cubins named in the build dir",
          "[build][plan][embed]") {
  Sources s;
  Manifest m = s.parse(R"({"name": "e", "cpp_sources": "int x;", "embed_cubin": {"pre": "kern.cubin", "built": "emb.cu"},
                           "cuda_arch": "9.0+PTX"})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  REQUIRE(p.embed_step);
  const CompileStep& e = *p.embed_step;
  CHECK(e.argv() == Argv{"/usr/bin/c++", "-fPIC", "-x", "assembler", "-c", "tvm_ffi_embedded_cubins.s", "-o",
                         "embed_cubin.o"});
  CHECK(e.launcher.empty());  // never launched: a launcher cannot cache an assembler file
  REQUIRE(e.generated_text);
  CHECK(e.generated_text->find(".incbin \"" + s.path("kern.cubin") + "\"\n") != std::string::npos);
  CHECK(e.generated_text->find(".incbin \"embed_built.cubin\"\n") != std::string::npos);
  // The cubin of a +PTX arch is SASS only: one -gencode, written by toolchain::gencode_flag.
  REQUIRE(p.device_steps.size() == 1);
  const Argv& f = p.device_steps[0].flags;
  CHECK(std::count(f.begin(), f.end(), "-gencode=arch=compute_90,code=sm_90") == 1);
  CHECK(p.device_steps[0].gencode_targets() == 1);
  // An empty prebuilt file is refused when planning, naming the item.
  util::write_file(s.path("empty.cubin"), "");
  Manifest empty = s.parse(R"({"name": "e", "cpp_sources": "int x;", "embed_cubin": {"nothing": "empty.cubin"}})");
  try {
    make_plan(empty, fake_toolchain(), no_gpus());
    FAIL("planned");
  } catch (const Error& err) {
    CHECK(err.code() == ExitCode::kUsage);
    CHECK(std::string(err.what()).find("cannot embed 'nothing'") != std::string::npos);
  }
}

TEST_CASE("missing tvm-ffi, nvcc or arch list is exit 4 only when the build needs it", "[build][plan]") {
  Sources s;
  toolchain::Toolchain tc = fake_toolchain();
  tc.tvm_ffi = Unexpected{"tvm-ffi not found"};
  auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return ExitCode::kOk;
  };
  CHECK(code_of([&] { make_plan(s.parse(R"({"name": "m", "cpp_sources": "x"})"), tc, no_gpus()); }) ==
        ExitCode::kMissingTool);
  // A kernel-only build does not need tvm-ffi.
  CHECK(code_of([&] {
          make_plan(s.parse(R"({"name": "m", "cuda_sources": "x", "emit": "cubin", "cuda_arch": "9.0"})"), tc, no_gpus());
        }) == ExitCode::kOk);
  toolchain::Toolchain no_cuda = fake_toolchain();
  no_cuda.cuda = Unexpected{"no CUDA toolkit"};
  CHECK(code_of([&] { make_plan(s.parse(R"({"name": "m", "cpp_sources": "x"})"), no_cuda, no_gpus()); }) ==
        ExitCode::kOk);
  CHECK(code_of([&] {
          make_plan(s.parse(R"({"name": "m", "cuda_sources": "x", "cuda_arch": "9.0"})"), no_cuda, no_gpus());
        }) == ExitCode::kMissingTool);
  // CUDA without any arch source and no GPU.
  CHECK(code_of([&] { make_plan(s.parse(R"({"name": "m", "cuda_sources": "x"})"), fake_toolchain(), no_gpus()); }) ==
        ExitCode::kMissingTool);
}

TEST_CASE("a module name that collides with an intermediate file is refused", "[build][plan]") {
  Sources s;
  CHECK_THROWS_AS(make_plan(s.parse(R"({"name": "cpp_0", "sources": ["a.cc", "b.cpp"], "emit": "object"})"),
                            fake_toolchain(), no_gpus()),
                  Error);
}

TEST_CASE("a launcher prefixes compile commands but not the link, and stays out of argv()", "[build][plan][launcher]") {
  Sources s;
  util::TempDir bin;
  const std::string launcher = util::join_path(bin.path(), "fakecache");
  util::write_file(launcher, "#!/bin/sh\nexec \"$@\"\n");
  ::chmod(launcher.c_str(), 0755);
  Manifest m = s.parse(R"({"name": "mod", "sources": ["a.cc", "k.cu"], "cuda_arch": "8.0 9.0",
                           "cxx_launcher": [")" + launcher + R"(", "--flag"], "cuda_launcher": ")" + launcher + R"("})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  REQUIRE(p.compile_steps.size() == 2);
  const CompileStep& cxx = p.compile_steps[0];
  const CompileStep& cuda = p.compile_steps[1];
  CHECK(cxx.launcher == Argv{launcher, "--flag"});
  CHECK(cxx.launcher_source == "manifest");
  CHECK(cxx.argv().front() == "/usr/bin/c++");  // what cache keys hash
  Argv run = cxx.command(true);
  CHECK(Argv(run.begin(), run.begin() + 3) == Argv{launcher, "--flag", "/usr/bin/c++"});
  CHECK(Argv(run.begin() + 2, run.end()) == cxx.argv());
  CHECK(cxx.command(false) == cxx.argv());
  // nvcc behind a launcher: the short depfile options, which ccache 4.7 understands.
  Argv cu = cuda.command(true);
  CHECK(Argv(cu.begin(), cu.begin() + 4) == Argv{launcher, "/opt/cuda/bin/nvcc", "-MD", "-MF"});
  CHECK(cuda.argv()[1] == "--generate-dependencies-with-compile");
  CHECK(cuda.gencode_targets() == 2);
  Argv threaded = cuda.command(false, 2);
  REQUIRE(threaded.size() == cuda.argv().size() + 2);
  CHECK(Argv(threaded.end() - 6, threaded.end()) == Argv{"--threads", "2", "-c", cuda.compiler_input(), "-o", "cuda_0.o"});
  REQUIRE(p.link);
  CHECK(p.link->argv().front() == "/usr/bin/c++");
}

TEST_CASE("launcher precedence: command line, manifest, environment, then CXX's launcher words", "[build][plan][launcher]") {
  Sources s;
  toolchain::Toolchain tc = fake_toolchain();
  tc.host.cxx_launcher = {"/usr/bin/env"};  // as from CXX="env c++"
  PlanOptions o = no_gpus();
  Manifest m = s.parse(R"({"name": "mod", "sources": ["a.cc"]})");
  CHECK(make_plan(m, tc, o).compile_steps[0].launcher_source == "CXX");
  o.env_cxx_launcher = "true";
  BuildPlan from_env = make_plan(m, tc, o);
  CHECK(from_env.compile_steps[0].launcher_source == "TVMFFI_JIT_CXX_LAUNCHER");
  CHECK(util::file_name(from_env.compile_steps[0].launcher.at(0)) == "true");
  Manifest none = s.parse(R"({"name": "mod", "sources": ["a.cc"], "cxx_launcher": ""})");
  CHECK(make_plan(none, tc, o).compile_steps[0].launcher.empty());  // an explicit empty launcher turns it off
  CommandLineInputs cli;
  cli.cxx_launcher = "env";
  apply_command_line(none, cli);
  CHECK(make_plan(none, tc, o).compile_steps[0].launcher_source == "--cxx-launcher");
}

TEST_CASE("a launcher that is not installed is a missing tool, named with where it came from", "[build][plan][launcher]") {
  Sources s;
  PlanOptions o = no_gpus();
  o.env_cuda_launcher = "no-such-launcher-xyz";
  Manifest m = s.parse(R"({"name": "mod", "sources": ["k.cu"], "cuda_arch": "9.0"})");
  try {
    make_plan(m, fake_toolchain(), o);
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    CHECK(std::string(e.what()).find("TVMFFI_JIT_CUDA_LAUNCHER") != std::string::npos);
  }
}

TEST_CASE("user flags replace the defaults they override instead of repeating them", "[build][plan]") {
  Sources s;
  Manifest m = s.parse(R"({"name": "m", "sources": ["a.cc", "k.cu"], "cuda_arch": "9.0",
                           "extra_cflags": ["-std=c++17", "-O3", "-fPIC"],
                           "extra_cuda_cflags": ["-std=c++20", "-O3", "--compiler-options=-fPIC"]})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  REQUIRE(p.compile_steps.size() == 2);
  const Argv& cxx = p.compile_steps[0].flags;
  CHECK(std::count(cxx.begin(), cxx.end(), "-std=c++17") == 1);
  CHECK(std::count(cxx.begin(), cxx.end(), "-fPIC") == 1);
  CHECK(std::find(cxx.begin(), cxx.end(), "-O2") == cxx.end());
  CHECK(std::find(cxx.begin(), cxx.end(), "-O3") != cxx.end());
  const Argv& cuda = p.compile_steps[1].flags;
  CHECK(std::find(cuda.begin(), cuda.end(), "-O2") == cuda.end());
  CHECK(std::find(cuda.begin(), cuda.end(), "-std=c++17") == cuda.end());
  CHECK(std::find(cuda.begin(), cuda.end(), "-Xcompiler") == cuda.end());  // --compiler-options=-fPIC says it
  CHECK(std::count(cuda.begin(), cuda.end(), "-std=c++20") == 1);
  // Without user flags the defaults are tvm_ffi's, unchanged.
  CHECK(defaults_not_overridden(default_cuda_flags(), {}) == default_cuda_flags());
  CHECK(defaults_not_overridden(default_cuda_flags(), {"-Xcompiler", "-Wall"}) == default_cuda_flags());
  CHECK(defaults_not_overridden(default_cxx_flags(), {"-Os"}) == Argv{"-std=c++17", "-fPIC"});
}

TEST_CASE("system_include_paths are passed as -isystem to every unit after the -I directories", "[build][plan]") {
  Sources s;
  util::make_directories(s.path("sys"));
  util::make_directories(s.path("inc"));
  Manifest m = s.parse(R"({"name": "m", "sources": ["a.cc", "k.cu"], "cuda_arch": "9.0",
                           "extra_include_paths": ["inc"], "system_include_paths": ["sys"]})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  for (const auto& step : p.compile_steps) {
    const Argv& f = step.flags;
    auto isystem = std::find(f.begin(), f.end(), "-isystem");
    REQUIRE(isystem != f.end());
    CHECK(*(isystem + 1) == s.path("sys"));
    CHECK(std::find(f.begin(), f.end(), "-I" + s.path("inc")) < isystem);
  }
}

TEST_CASE("cuda_runtime and cuda_driver give C++ units the toolkit headers and link cudart and the libcuda stub",
          "[build][plan]") {
  Sources s;
  Manifest m = s.parse(R"({"name": "m", "sources": ["a.cc"], "cuda_runtime": true, "cuda_driver": true})");
  BuildPlan p = make_plan(m, fake_toolchain(), no_gpus());
  CHECK(p.archs.empty());  // no CUDA source: no arch needed
  const Argv& f = p.compile_steps[0].flags;
  auto isystem = std::find(f.begin(), f.end(), "-isystem");
  REQUIRE(isystem != f.end());
  CHECK(*(isystem + 1) == "/opt/cuda/include");
  const Argv& l = p.link->flags;
  const Argv runtime = {"-L/opt/cuda/lib64", "-lcudart"};
  CHECK(std::search(l.begin(), l.end(), runtime.begin(), runtime.end()) != l.end());
  const Argv stub = {"-L/opt/cuda/lib64/stubs", "-lcuda"};
  CHECK(std::search(l.begin(), l.end(), stub.begin(), stub.end()) != l.end());
  // Without a toolkit, exit 4 naming the key.
  toolchain::Toolchain tc = fake_toolchain();
  tc.cuda = Unexpected{"nvcc not found"};
  try {
    make_plan(m, tc, no_gpus());
    FAIL("expected an error");
  } catch (const Error& e) {
    CHECK(e.exit_code() == static_cast<int>(ExitCode::kMissingTool));
    CHECK_THAT(e.what(), Catch::Contains("cuda_runtime"));
  }
}
