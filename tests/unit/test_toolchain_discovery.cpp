// Finding tvm-ffi, the host compilers and the CUDA toolkit.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"

using namespace tvmffi_jit;
using namespace tvmffi_jit::toolchain;

namespace {

// A fake installed prefix: include/tvm/ffi/function.h, include/dlpack/dlpack.h, lib/libtvm_ffi.so.
std::string make_prefix(const std::string& root) {
  util::make_directories(root + "/include/tvm/ffi");
  util::make_directories(root + "/include/dlpack");
  util::make_directories(root + "/lib");
  util::write_file(root + "/include/tvm/ffi/function.h", "");
  util::write_file(root + "/include/dlpack/dlpack.h", "");
  util::write_file(root + "/lib/libtvm_ffi.so", "");
  return root;
}

std::string make_script(const std::string& path, const std::string& body) {
  util::write_file(path, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0755);
  return path;
}

}  // namespace

TEST_CASE("a prefix or wheel layout is recognised from its root", "[toolchain][tvm_ffi]") {
  util::TempDir t;
  std::string root = make_prefix(t.path() + "/prefix");
  std::string why;
  auto loc = tvm_ffi_from_root(root, &why);
  REQUIRE(loc);
  CHECK(loc->include_dir == root + "/include");
  CHECK(loc->dlpack_include_dir == root + "/include");
  CHECK(loc->lib_dir == root + "/lib");
}

TEST_CASE("a source checkout layout (3rdparty dlpack, build/lib) is recognised", "[toolchain][tvm_ffi]") {
  util::TempDir t;
  std::string root = t.path();
  util::make_directories(root + "/include/tvm/ffi");
  util::write_file(root + "/include/tvm/ffi/function.h", "");
  util::make_directories(root + "/3rdparty/dlpack/include/dlpack");
  util::write_file(root + "/3rdparty/dlpack/include/dlpack/dlpack.h", "");
  util::make_directories(root + "/build/lib");
  util::write_file(root + "/build/lib/libtvm_ffi.so", "");
  std::string why;
  auto loc = tvm_ffi_from_root(root, &why);
  REQUIRE(loc);
  CHECK(loc->dlpack_include_dir == root + "/3rdparty/dlpack/include");
  CHECK(loc->lib_dir == root + "/build/lib");
}

TEST_CASE("an explicit --tvm-ffi-root wins over TVM_FFI_ROOT, and a bad one is exit 4", "[toolchain][tvm_ffi]") {
  util::TempDir t;
  std::string good = make_prefix(t.path() + "/good");
  TvmFfiSearch s;
  s.root = good;
  s.env = fixed_environment({{"TVM_FFI_ROOT", "/nonexistent"}});
  CHECK(find_tvm_ffi(s).found_by == "--tvm-ffi-root");
  s.root.reset();
  try {
    find_tvm_ffi(s);
    FAIL("a bad TVM_FFI_ROOT was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    CHECK(std::string(e.what()).find("TVM_FFI_ROOT=/nonexistent") != std::string::npos);
  }
  s.env = fixed_environment({{"TVM_FFI_ROOT", good}});
  CHECK(find_tvm_ffi(s).found_by == "TVM_FFI_ROOT");
}

TEST_CASE("tvm-ffi-config's three directories are used when no root is given", "[toolchain][tvm_ffi]") {
  util::TempDir t;
  std::string p = make_prefix(t.path() + "/p");
  TvmFfiSearch s;
  s.env = fixed_environment({});
  s.config_program = make_script(t.path() + "/tvm-ffi-config", "echo " + p + "/include; echo " + p +
                                                                    "/include; echo " + p + "/lib\n");
  s.python_program = t.path() + "/no-python";
  TvmFfiLocation loc = find_tvm_ffi(s);
  CHECK(loc.found_by == "tvm-ffi-config");
  CHECK(loc.lib_dir == p + "/lib");
}

TEST_CASE("nothing found is exit 4 with the install hint and what was tried", "[toolchain][tvm_ffi]") {
  util::TempDir t;
  TvmFfiSearch s;
  s.env = fixed_environment({});
  s.config_program = make_script(t.path() + "/tvm-ffi-config", "echo /nowhere; echo /nowhere; echo /nowhere\n");
  s.python_program = make_script(t.path() + "/python3", "echo 'ModuleNotFoundError: No module named tvm_ffi' >&2; exit 1\n");
  try {
    find_tvm_ffi(s);
    FAIL("found");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    std::string w = e.what();
    CHECK(w.find("pip install apache-tvm-ffi") != std::string::npos);
    CHECK(w.find("tvm-ffi-config: no tvm/ffi/function.h in /nowhere") != std::string::npos);
    CHECK(w.find("ModuleNotFoundError") != std::string::npos);
  }
}

TEST_CASE("CUDA_HOME names the toolkit; a CUDA_HOME without nvcc is reported", "[toolchain][compilers]") {
  util::TempDir t;
  util::make_directories(t.path() + "/cuda/bin");
  make_script(t.path() + "/cuda/bin/nvcc", "exit 0\n");
  std::string why;
  auto tk = find_cuda_toolkit(fixed_environment({{"CUDA_HOME", t.path() + "/cuda"}}), &why);
  REQUIRE(tk);
  CHECK(tk->nvcc == t.path() + "/cuda/bin/nvcc");
  CHECK(tk->found_by == "CUDA_HOME");
  auto none = find_cuda_toolkit(fixed_environment({{"CUDA_PATH", t.path()}}), &why);
  CHECK_FALSE(none);
  CHECK(why.find("CUDA_PATH=" + t.path() + " has no bin/nvcc") != std::string::npos);
}

TEST_CASE("CXX names the C++ compiler; an unknown CXX is exit 4", "[toolchain][compilers]") {
  util::TempDir t;
  std::string fake = make_script(t.path() + "/my-c++", "exit 0\n");
  auto c = find_host_compilers(fixed_environment({{"CXX", fake}}), false);
  CHECK(c.cxx == fake);
  try {
    find_host_compilers(fixed_environment({{"CXX", "no-such-compiler-xyz"}}), false);
    FAIL("found");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    CHECK(std::string(e.what()).find("CXX=no-such-compiler-xyz") != std::string::npos);
  }
}

TEST_CASE("CXX=\"launcher compiler\" splits into a launcher and the compiler", "[toolchain][compilers][launcher]") {
  util::TempDir t;
  std::string compiler = make_script(t.path() + "/my-c++", "exit 0\n");
  std::string launcher = make_script(t.path() + "/my-cache", "exec \"$@\"\n");
  auto c = find_host_compilers(fixed_environment({{"CXX", launcher + " " + compiler}}), false);
  CHECK(c.cxx == compiler);
  CHECK(c.cxx_launcher == std::vector<std::string>{launcher});
  auto plain = find_host_compilers(fixed_environment({{"CXX", compiler}}), false);
  CHECK(plain.cxx_launcher.empty());
  // Flags are not a compiler.
  try {
    find_host_compilers(fixed_environment({{"CXX", compiler + " -m32"}}), false);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    CHECK(std::string(e.what()).find("extra_cflags") != std::string::npos);
  }
  // A launcher that is not installed is named.
  try {
    find_host_compilers(fixed_environment({{"CXX", "no-such-cache-xyz " + compiler}}), false);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ExitCode::kMissingTool);
    CHECK(std::string(e.what()).find("no-such-cache-xyz") != std::string::npos);
  }
}
