// NVRTC backend: real compilations through the toolkit's libnvrtc (dlopen),
// the library search order, and the failures a user can meet.
#include <elf.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/compile/runner.h"
#include "tvmffi_jit/toolchain/nvrtc_locate.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;

namespace {

// Sets (or unsets, for nullptr) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

struct CubinFacts {
  uint16_t machine = 0;
  unsigned sm = 0;
  std::set<std::string> kernels;  // STT_FUNC with STO_CUDA_ENTRY (st_other & 0x10)
};

// Just enough ELF64 reading to say what a cubin holds; bounds-checked so a bad
// output fails the test instead of crashing it.
CubinFacts read_cubin(const std::string& bytes) {
  CubinFacts facts;
  REQUIRE(bytes.size() >= sizeof(Elf64_Ehdr));
  REQUIRE(std::memcmp(bytes.data(), ELFMAG, SELFMAG) == 0);
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  facts.machine = eh.e_machine;
  facts.sm = eh.e_ident[EI_ABIVERSION] >= 8 ? (eh.e_flags >> 8) & 0xff : eh.e_flags & 0xff;
  REQUIRE(eh.e_shoff + uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr) <= bytes.size());
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
    return sh;
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr symtab = section(i);
    if (symtab.sh_type != SHT_SYMTAB) continue;
    REQUIRE(symtab.sh_link < eh.e_shnum);
    Elf64_Shdr strtab = section(symtab.sh_link);
    REQUIRE(symtab.sh_offset + symtab.sh_size <= bytes.size());
    REQUIRE(strtab.sh_offset + strtab.sh_size <= bytes.size());
    for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= symtab.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, bytes.data() + symtab.sh_offset + off, sizeof sym);
      if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !(sym.st_other & 0x10)) continue;
      REQUIRE(sym.st_name < strtab.sh_size);
      const char* name = bytes.data() + strtab.sh_offset + sym.st_name;
      facts.kernels.insert(std::string(name, strnlen(name, strtab.sh_size - sym.st_name)));
    }
  }
  return facts;
}

const char* kKernels = R"(
template <typename T> __global__ void scale(T* x, T factor) { x[threadIdx.x] *= factor; }
template __global__ void scale<int>(int*, int);
extern "C" __global__ void fill(float* x, float v) { x[blockIdx.x * blockDim.x + threadIdx.x] = v; }
__global__ void mangled(double* x) { x[0] = 1.0; }
)";

compile::NvrtcRequest request(std::string source, toolchain::CudaArch arch = {9, 0}) {
  compile::NvrtcRequest r;
  r.source = std::move(source);
  r.source_name = "kernels.cu";
  r.arch = arch;
  return r;
}

}  // namespace

TEST_CASE("NVRTC compiles a source to an sm_90 cubin holding exactly its kernels", "[build][nvrtc]") {
  compile::NvrtcResult result = compile::nvrtc_compile(request(kKernels));
  INFO(result.log);
  REQUIRE(result.ok);
  CubinFacts facts = read_cubin(result.binary);
  CHECK(facts.machine == 190);  // EM_CUDA
  CHECK(facts.sm == 90);
  CHECK(facts.kernels == std::set<std::string>{"_Z5scaleIiEvPT_S0_", "fill", "_Z7mangledPd"});
  CHECK(result.effective_options.front() == "--gpu-architecture=sm_90");
}

TEST_CASE("NVRTC PTX output is text for the virtual architecture with every entry", "[build][nvrtc]") {
  compile::NvrtcRequest r = request(kKernels, {8, 0});  // PTX: the virtual compute_80
  r.output = compile::NvrtcOutput::kPtx;
  compile::NvrtcResult result = compile::nvrtc_compile(r);
  INFO(result.log);
  REQUIRE(result.ok);
  CHECK(result.effective_options.front() == "--gpu-architecture=compute_80");
  CHECK(result.binary.find(".target sm_80") != std::string::npos);
  CHECK(result.binary.find(".entry fill(") != std::string::npos);
  CHECK(result.binary.find(".entry _Z5scaleIiEvPT_S0_(") != std::string::npos);
  CHECK(result.binary.find('\0') == std::string::npos);  // NVRTC's terminating NUL is not part of the text
}

TEST_CASE("NVRTC name expressions instantiate templates and report their lowered names", "[build][nvrtc]") {
  compile::NvrtcRequest r = request(kKernels);
  r.name_expressions = {"scale<float>", "&scale<double>"};
  compile::NvrtcResult result = compile::nvrtc_compile(r);
  INFO(result.log);
  REQUIRE(result.ok);
  REQUIRE(result.lowered_names.size() == 2);
  CHECK(result.lowered_names[0] == std::make_pair(std::string("scale<float>"), std::string("_Z5scaleIfEvPT_S0_")));
  CHECK(result.lowered_names[1].second == "_Z5scaleIdEvPT_S0_");
  CubinFacts facts = read_cubin(result.binary);
  CHECK(facts.kernels.count("_Z5scaleIfEvPT_S0_") == 1);
  CHECK(facts.kernels.count("_Z5scaleIdEvPT_S0_") == 1);
}

TEST_CASE("an NVRTC compile error is a failed result carrying the log with file and line", "[build][nvrtc]") {
  compile::NvrtcResult result =
      compile::nvrtc_compile(request("extern \"C\" __global__ void k(int* x) {\n  x[0] = undefined_name;\n}\n"));
  CHECK_FALSE(result.ok);
  CHECK(result.binary.empty());
  CHECK(result.log.find("kernels.cu(2): error") != std::string::npos);
  CHECK(result.log.find("undefined_name") != std::string::npos);
}

TEST_CASE("an NVRTC compile error is the plan's failed command, returned as a compiler's is", "[build][nvrtc]") {
  // NVRTC runs in-process, outside the CommandRunner seam, but its failure
  // takes the same shape: try_execute_plan() returns it, nothing is thrown.
  compile::BuildPlan plan;
  plan.name = "k";
  plan.nvrtc = compile::NvrtcStep{request("extern \"C\" __global__ void k(int* x) {\n  x[0] = undefined_name;\n}\n"),
                                  "k.cubin"};
  plan.artifact_name = "k.cubin";
  util::TempDir dir;
  compile::ExecuteOptions exec;
  exec.status = &compile::silent_sink();
  auto built = compile::try_execute_plan(plan, dir.path(), exec);
  REQUIRE_FALSE(built);
  CHECK(built.error().kind == compile::CommandFailureKind::kFailed);
  CHECK(built.why().find("NVRTC failed to compile") != std::string::npos);
  CHECK(built.error().record.output.find("undefined_name") != std::string::npos);
  CHECK_FALSE(util::is_regular_file(util::join_path(dir.path(), "k.cubin")));
}

TEST_CASE("an NVRTC name expression naming nothing fails the compile with a log", "[build][nvrtc]") {
  compile::NvrtcRequest r = request(kKernels);
  r.name_expressions = {"no_such_kernel<int>"};
  compile::NvrtcResult result = compile::nvrtc_compile(r);
  CHECK_FALSE(result.ok);
  CHECK(result.log.find("no_such_kernel") != std::string::npos);
}

TEST_CASE("an unknown NVRTC option fails with NVRTC's message", "[build][nvrtc]") {
  compile::NvrtcRequest r = request(kKernels);
  r.options = {"--no-such-option"};
  compile::NvrtcResult result = compile::nvrtc_compile(r);
  CHECK_FALSE(result.ok);
  CHECK(result.log.find("--no-such-option") != std::string::npos);
}

TEST_CASE("NVRTC sees include paths, defines, quote includes next to the source, and CCCL headers",
          "[build][nvrtc]") {
  util::TempDir dir;
  util::make_directories(dir.path() + "/inc");
  util::make_directories(dir.path() + "/src");
  util::write_file(dir.path() + "/inc/from_include_path.cuh", "#define FROM_INCLUDE_PATH 2\n");
  util::write_file(dir.path() + "/src/next_to_source.cuh", "#define NEXT_TO_SOURCE 3\n");
  compile::NvrtcRequest r = request(
      "#include <cuda/std/cstdint>\n"
      "#include <from_include_path.cuh>\n"
      "#include \"next_to_source.cuh\"\n"
      "extern \"C\" __global__ void KERNEL_NAME(cuda::std::int32_t* x) {\n"
      "  x[0] = FROM_INCLUDE_PATH + NEXT_TO_SOURCE;\n"
      "}\n");
  r.source_name = dir.path() + "/src/k.cu";
  r.include_paths = {dir.path() + "/inc", dir.path() + "/inc"};  // listed twice, searched once
  r.options = {"-DKERNEL_NAME=configured_kernel", "-std=c++17"};
  compile::NvrtcResult result = compile::nvrtc_compile(r);
  INFO(result.log);
  REQUIRE(result.ok);
  CHECK(read_cubin(result.binary).kernels == std::set<std::string>{"configured_kernel"});
  // The user's -I comes before the toolkit's, as with nvcc.
  auto user = std::find(result.effective_options.begin(), result.effective_options.end(), "-I" + dir.path() + "/inc");
  REQUIRE(user != result.effective_options.end());
  CHECK(user == result.effective_options.begin() + 1);
  CHECK(std::count(result.effective_options.begin(), result.effective_options.end(), "-I" + dir.path() + "/inc") == 1);
}

TEST_CASE("NVRTC cannot include host C++ headers such as <cstdint>", "[build][nvrtc]") {
  // Documented in docs/nvrtc.md: the CCCL cuda/std headers are the way there.
  compile::NvrtcResult result = compile::nvrtc_compile(request("#include <cstdint>\n__global__ void k() {}\n"));
  CHECK_FALSE(result.ok);
  CHECK(result.log.find("cstdint") != std::string::npos);
}

TEST_CASE("NVRTC is given the real architecture for a cubin and the virtual one for PTX", "[build][nvrtc]") {
  compile::NvrtcRequest r = request(kKernels, {9, 0, 'a'});
  CHECK(compile::nvrtc_architecture(r) == "sm_90a");
  r.output = compile::NvrtcOutput::kPtx;
  CHECK(compile::nvrtc_architecture(r) == "compute_90a");
  r.arch = toolchain::CudaArch{10, 0, 'f', true};  // +PTX changes nothing: NVRTC makes one output
  CHECK(compile::nvrtc_architecture(r) == "compute_100f");
}

TEST_CASE("NVRTC without a target architecture is a usage error", "[build][nvrtc]") {
  try {
    compile::nvrtc_compile(request(kKernels, toolchain::CudaArch{}));
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kUsage);
  }
}

TEST_CASE("NVRTC identity names the loaded library's real path and version", "[build][nvrtc]") {
  std::string identity = compile::nvrtc_identity();
  auto space = identity.rfind(' ');
  REQUIRE(space != std::string::npos);
  std::string path = identity.substr(0, space);
  CHECK(util::is_regular_file(path));
  CHECK(path == util::canonical_path(path));
  CHECK(path.find("libnvrtc.so") != std::string::npos);
  CHECK(identity.substr(space + 1).find('.') != std::string::npos);
}

TEST_CASE("a TVMFFI_JIT_LIBNVRTC that does not exist is a missing tool naming the path", "[build][nvrtc]") {
  ScopedEnv forced("TVMFFI_JIT_LIBNVRTC", "/nonexistent/dir/libnvrtc.so.13");
  try {
    compile::nvrtc_compile(request(kKernels));
    FAIL("compiled without a library");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    CHECK(std::string(e.what()).find("/nonexistent/dir/libnvrtc.so.13") != std::string::npos);
    CHECK(std::string(e.what()).find("TVMFFI_JIT_LIBNVRTC") != std::string::npos);
  }
  CHECK_THROWS_AS(compile::nvrtc_identity(), Error);
}

TEST_CASE("a TVMFFI_JIT_LIBNVRTC that is not NVRTC is refused with the reason", "[build][nvrtc]") {
  util::TempDir dir;
  std::string fake = dir.path() + "/libnvrtc.so.13";
  util::write_file(fake, "not an ELF file\n");
  ScopedEnv forced("TVMFFI_JIT_LIBNVRTC", fake.c_str());
  try {
    compile::nvrtc_identity();
    FAIL("loaded a text file");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    CHECK(std::string(e.what()).find(fake + ":") != std::string::npos);
  }
}

TEST_CASE("the NVRTC search honours CUDA_HOME first and prefers the highest soname", "[toolchain][nvrtc]") {
  util::TempDir home;
  util::make_directories(home.path() + "/lib64");
  for (const char* f : {"libnvrtc.so.12", "libnvrtc.so.13", "libnvrtc.so", "libnvrtc.so.13.0.88",
                        "libnvrtc-builtins.so.13.0", "libnvrtc.alt.so.13"}) {
    util::write_file(home.path() + "/lib64/" + f, "");
  }
  // The variables come from the lookup given, not from the process.
  toolchain::NvrtcSearch search = toolchain::nvrtc_search(toolchain::fixed_environment({{"CUDA_HOME", home.path()}}));
  REQUIRE_FALSE(search.forced);
  REQUIRE(search.candidates.size() >= 3);
  CHECK(search.candidates[0].library == home.path() + "/lib64/libnvrtc.so.13");
  CHECK(search.candidates[1].library == home.path() + "/lib64/libnvrtc.so.12");
  CHECK(search.candidates[2].library == home.path() + "/lib64/libnvrtc.so");
  CHECK(search.candidates[0].origin == "CUDA_HOME");
  CHECK(search.looked_in.front() == home.path() + "/lib64 (CUDA_HOME)");
  // Last resort: the dynamic loader's own search.
  CHECK(search.candidates.back().library == "libnvrtc.so");
}

TEST_CASE("an empty CUDA_HOME falls through to the other toolkits", "[build][nvrtc]") {
  util::TempDir empty_home;
  ScopedEnv unforced("TVMFFI_JIT_LIBNVRTC", nullptr);
  ScopedEnv cuda_home("CUDA_HOME", empty_home.path().c_str());
  // The process's environment, as nvrtc_compile() below searches it (tests/unit/main.cpp).
  toolchain::NvrtcSearch search = toolchain::nvrtc_search(toolchain::process_environment());
  CHECK(search.looked_in.front() == empty_home.path() + "/lib64 (CUDA_HOME)");
  for (const auto& c : search.candidates) CHECK(c.library.rfind(empty_home.path(), 0) != 0);
  CHECK(compile::nvrtc_compile(request(kKernels)).ok);
}

TEST_CASE("toolkit include dirs are found from the library path, with CCCL's own dir", "[toolchain][nvrtc]") {
  util::TempDir home;
  util::make_directories(home.path() + "/lib64");
  util::make_directories(home.path() + "/include/cccl/cuda/std");
  util::write_file(home.path() + "/include/cuda_fp16.h", "");
  util::write_file(home.path() + "/lib64/libnvrtc.so.13", "");
  auto dirs = toolchain::cuda_include_dirs_for_library(home.path() + "/lib64/libnvrtc.so.13");
  CHECK(dirs == std::vector<std::string>{home.path() + "/include", home.path() + "/include/cccl"});
  // A lib dir whose sibling "include" is not a CUDA one contributes nothing.
  util::TempDir other;
  util::make_directories(other.path() + "/lib");
  util::make_directories(other.path() + "/include");
  CHECK(toolchain::cuda_include_dirs_for_library(other.path() + "/lib/libnvrtc.so.13").empty());
}

TEST_CASE("a missing host header in an NVRTC log gets the cuda/std hint, or says it has no device equivalent",
          "[build][nvrtc]") {
  const std::string log =
      "k.cu(1): catastrophic error: cannot open source file \"cstdint\"\n"
      "k.cu(2): catastrophic error: cannot open source file \"vector\"\n"
      "k.cu(3): catastrophic error: cannot open source file \"cstdint\"\n"
      "k.cu(4): catastrophic error: cannot open source file \"my/own.h\"\n";
  CHECK(compile::nvrtc_missing_header_hint(log) ==
        "hint: NVRTC has no host C++ headers: include <cuda/std/cstdint> instead of <cstdint> (CCCL, shipped with "
        "the CUDA toolkit; names in cuda::std)\n"
        "hint: NVRTC has no host C++ headers, and <vector> has no device equivalent: drop it from device code, or "
        "build with nvcc\n");
  CHECK(compile::nvrtc_missing_header_hint("k.cu(1): error: identifier \"x\" is undefined\n").empty());
}
