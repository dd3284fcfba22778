// Finding tvm-ffi, the host compilers and the CUDA toolkit.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/toolchain/tvm_ffi_memo.h"
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
  auto loc = tvm_ffi_from_root(root);
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
  auto loc = tvm_ffi_from_root(root);
  REQUIRE(loc);
  CHECK(loc->dlpack_include_dir == root + "/3rdparty/dlpack/include");
  CHECK(loc->lib_dir == root + "/build/lib");
}

TEST_CASE("an explicit --tvm-ffi-root wins over TVM_FFI_ROOT, and a bad one is the answer, not a reason to look on",
          "[toolchain][tvm_ffi]") {
  util::TempDir t;
  std::string good = make_prefix(t.path() + "/good");
  TvmFfiSearch s;
  s.root = good;
  s.env = fixed_environment({{"TVM_FFI_ROOT", "/nonexistent"}});
  CHECK(find_tvm_ffi(s)->found_by == "--tvm-ffi-root");
  s.root.reset();
  auto bad = find_tvm_ffi(s);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("TVM_FFI_ROOT=/nonexistent") != std::string::npos);
  s.env = fixed_environment({{"TVM_FFI_ROOT", good}});
  CHECK(find_tvm_ffi(s)->found_by == "TVM_FFI_ROOT");
}

TEST_CASE("tvm-ffi-config's three directories are used when no root is given", "[toolchain][tvm_ffi]") {
  util::TempDir t;
  std::string p = make_prefix(t.path() + "/p");
  TvmFfiSearch s;
  s.env = fixed_environment({});
  s.config_program = make_script(t.path() + "/tvm-ffi-config", "echo " + p + "/include; echo " + p +
                                                                    "/include; echo " + p + "/lib\n");
  s.python_program = t.path() + "/no-python";
  auto loc = find_tvm_ffi(s);
  REQUIRE(loc);
  CHECK(loc->found_by == "tvm-ffi-config");
  CHECK(loc->lib_dir == p + "/lib");
}

TEST_CASE("nothing found says what was tried and how to install it", "[toolchain][tvm_ffi]") {
  util::TempDir t;
  TvmFfiSearch s;
  s.env = fixed_environment({});
  s.config_program = make_script(t.path() + "/tvm-ffi-config", "echo /nowhere; echo /nowhere; echo /nowhere\n");
  s.python_program = make_script(t.path() + "/python3", "echo 'ModuleNotFoundError: No module named tvm_ffi' >&2; exit 1\n");
  auto loc = find_tvm_ffi(s);
  REQUIRE_FALSE(loc);
  const std::string& w = loc.error();
  CHECK(w.find("pip install apache-tvm-ffi") != std::string::npos);
  CHECK(w.find("tvm-ffi-config: no tvm/ffi/function.h in /nowhere") != std::string::npos);
  CHECK(w.find("ModuleNotFoundError") != std::string::npos);
}

TEST_CASE("CUDA_HOME names the toolkit; a CUDA_HOME without nvcc is reported", "[toolchain][compilers]") {
  util::TempDir t;
  util::make_directories(t.path() + "/cuda/bin");
  make_script(t.path() + "/cuda/bin/nvcc", "exit 0\n");
  auto tk = find_cuda_toolkit(fixed_environment({{"CUDA_HOME", t.path() + "/cuda"}}));
  REQUIRE(tk);
  CHECK(tk->nvcc == t.path() + "/cuda/bin/nvcc");
  CHECK(tk->found_by == "CUDA_HOME");
  auto none = find_cuda_toolkit(fixed_environment({{"CUDA_PATH", t.path()}}));
  CHECK_FALSE(none);
  CHECK(none.error().find("CUDA_PATH=" + t.path() + " has no bin/nvcc") != std::string::npos);
}

TEST_CASE("CXX names the C++ compiler; an unknown CXX says which variable is wrong", "[toolchain][compilers]") {
  util::TempDir t;
  std::string fake = make_script(t.path() + "/my-c++", "exit 0\n");
  auto c = find_host_compilers(fixed_environment({{"CXX", fake}}), false);
  REQUIRE(c);
  CHECK(c->cxx == fake);
  auto missing = find_host_compilers(fixed_environment({{"CXX", "no-such-compiler-xyz"}}), false);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().find("CXX=no-such-compiler-xyz") != std::string::npos);
  // A broken CC is blamed on CC only when C is needed.
  auto no_c = find_host_compilers(fixed_environment({{"CXX", fake}, {"CC", t.path() + "/no-cc"}}), true);
  REQUIRE_FALSE(no_c);
  CHECK(no_c.error().find("CC=" + t.path() + "/no-cc") != std::string::npos);
  CHECK(find_host_compilers(fixed_environment({{"CXX", fake}, {"CC", t.path() + "/no-cc"}}), false));
}

TEST_CASE("the tvm-ffi header version is read from c_api.h's macros, patch optional", "[toolchain][tvm_ffi]") {
  util::TempDir t;
  util::make_directories(t.path() + "/tvm/ffi");
  util::write_file(t.path() + "/tvm/ffi/c_api.h",
                   "#ifndef X\n#define TVM_FFI_VERSION_MAJOR 0\n#define  TVM_FFI_VERSION_MINOR\t1\n"
                   "#define TVM_FFI_VERSION_PATCH 16\n#define TVM_FFI_VERSION_MAJORX 9\n#endif\n");
  auto v = tvm_ffi_header_version(t.path());
  REQUIRE(v);
  CHECK(*v == "0.1.16");
  util::write_file(t.path() + "/tvm/ffi/c_api.h", "#define TVM_FFI_VERSION_MAJOR 1\n#define TVM_FFI_VERSION_MINOR 2\n");
  CHECK(tvm_ffi_header_version(t.path()).value_or("") == "1.2");
  util::write_file(t.path() + "/tvm/ffi/c_api.h", "#define TVM_FFI_VERSION_MAJOR 1\n");
  auto no_minor = tvm_ffi_header_version(t.path());
  REQUIRE_FALSE(no_minor);
  CHECK(no_minor.error().find("TVM_FFI_VERSION_MAJOR/MINOR") != std::string::npos);
  CHECK_FALSE(tvm_ffi_header_version(t.path() + "/nowhere"));
}

TEST_CASE("the tvm-ffi package version comes from the wheel's dist-info, apart from the header version",
          "[toolchain][tvm_ffi]") {
  util::TempDir t;
  const std::string site = t.path() + "/site-packages";
  TvmFfiLocation loc{site + "/tvm_ffi/include", site + "/tvm_ffi/include", site + "/tvm_ffi/lib", "python3"};
  util::make_directories(loc.include_dir);
  auto none = tvm_ffi_package_version(loc);
  REQUIRE_FALSE(none);
  CHECK(none.error().find("no apache_tvm_ffi-*.dist-info in " + site) != std::string::npos);
  util::make_directories(site + "/apache_tvm_ffi-0.1.15.post2.dist-info");
  CHECK(tvm_ffi_package_version(loc).value_or("") == "0.1.15.post2");  // from the folder name
  util::write_file(site + "/apache_tvm_ffi-0.1.15.post2.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: apache-tvm-ffi\nVersion: 0.1.15.post2\n");
  CHECK(tvm_ffi_package_version(loc).value_or("") == "0.1.15.post2");
}

TEST_CASE("CXX=\"launcher compiler\" splits into a launcher and the compiler", "[toolchain][compilers][launcher]") {
  util::TempDir t;
  std::string compiler = make_script(t.path() + "/my-c++", "exit 0\n");
  std::string launcher = make_script(t.path() + "/my-cache", "exec \"$@\"\n");
  auto c = find_host_compilers(fixed_environment({{"CXX", launcher + " " + compiler}}), false);
  REQUIRE(c);
  CHECK(c->cxx == compiler);
  CHECK(c->cxx_launcher == std::vector<std::string>{launcher});
  auto plain = find_host_compilers(fixed_environment({{"CXX", compiler}}), false);
  REQUIRE(plain);
  CHECK(plain->cxx_launcher.empty());
  // Flags are not a compiler.
  auto flags = find_host_compilers(fixed_environment({{"CXX", compiler + " -m32"}}), false);
  REQUIRE_FALSE(flags);
  CHECK(flags.error().find("extra_cflags") != std::string::npos);
  // A launcher that is not installed is named.
  auto missing = find_host_compilers(fixed_environment({{"CXX", "no-such-cache-xyz " + compiler}}), false);
  REQUIRE_FALSE(missing);
  CHECK(missing.error().find("no-such-cache-xyz") != std::string::npos);
}

TEST_CASE("the tvm-ffi memo lives in the directories the caller names; a hit runs nothing and writes nothing",
          "[toolchain][tvm_ffi][memo]") {
  util::TempDir t;
  std::string p = make_prefix(t.path() + "/p");
  std::string log = t.path() + "/config.log";
  TvmFfiSearch s;
  s.env = fixed_environment({{"PATH", "/usr/bin:/bin"}});
  s.config_program = make_script(t.path() + "/tvm-ffi-config", "echo run >> '" + log + "'\necho " + p +
                                                                    "/include; echo " + p + "/include; echo " + p +
                                                                    "/lib\n");
  s.python_program = t.path() + "/no-python";
  TvmFfiMemoDirs dirs;
  dirs.root_dir = t.path() + "/root/toolchain";
  dirs.user_dir = t.path() + "/user";
  int asked = 0;
  dirs.root_writable = [&] {
    ++asked;
    return true;
  };
  REQUIRE(find_tvm_ffi_memoized(s, dirs)->lib_dir == p + "/lib");
  CHECK(util::read_file(log) == "run\n");
  CHECK(asked == 1);
  CHECK(util::is_regular_file(dirs.root_dir + "/tvm-ffi.json"));
  CHECK(util::is_regular_file(dirs.user_dir + "/tvm-ffi.json"));

  // The root's memo answers: nothing runs, and the root is not asked whether it may be written.
  REQUIRE(find_tvm_ffi_memoized(s, dirs)->lib_dir == p + "/lib");
  CHECK(util::read_file(log) == "run\n");
  CHECK(asked == 1);

  // A new root that may not be written reads the user's memo and gets none of its own.
  TvmFfiMemoDirs fresh = dirs;
  fresh.root_dir = t.path() + "/read-only-root/toolchain";
  fresh.root_writable = [] { return false; };
  REQUIRE(find_tvm_ffi_memoized(s, fresh)->found_by == "tvm-ffi-config");
  CHECK(util::read_file(log) == "run\n");
  CHECK_FALSE(util::is_directory(fresh.root_dir));

  // No directories: no memo, tvm-ffi-config is asked.
  REQUIRE(find_tvm_ffi_memoized(s, TvmFfiMemoDirs{}));
  CHECK(util::read_file(log) == "run\nrun\n");
}
