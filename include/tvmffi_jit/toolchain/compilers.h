// Finding the host compilers and the CUDA toolkit.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/toolchain/environment.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::toolchain {

struct HostCompilers {
  std::string cxx;  // $CXX or "c++", resolved on PATH to an absolute path
  std::string cc;   // $CC or "cc", resolved likewise
  // The words before the compiler in CXX="ccache g++" / CC="sccache gcc"
  // (a compiler launcher, the lowest-precedence way to give one; see
  // compile::PlanOptions). The first word is resolved on PATH.
  std::vector<std::string> cxx_launcher;
  std::vector<std::string> cc_launcher;
};

// A launcher (argv prefix) for compile steps, resolved: the program found on
// PATH (absolute), its arguments as given, and where it came from.
struct Launcher {
  std::vector<std::string> argv;  // empty: none
  std::string source;             // "--cuda-launcher", "manifest", "TVMFFI_JIT_CUDA_LAUNCHER", "CXX", ...
  bool empty() const { return argv.empty(); }
};

// Splits a launcher given as text ("sccache", "ccache --opt") into words
// (whitespace; no shell quoting: a program path with spaces must be given as a
// manifest array). find_launcher resolves the first word on PATH, or says why
// not, naming `source`; resolve_launcher throws that as Error(kMissingTool).
Expected<Launcher> find_launcher(const std::vector<std::string>& words, const std::string& source);
Launcher resolve_launcher(const std::vector<std::string>& words, const std::string& source);
std::vector<std::string> split_launcher_text(const std::string& text);

// Launcher precedence, written once for builds (compile::make_plan) and
// doctor: `given` (a --*-launcher flag or the manifest key; present and empty
// turns launchers off), else the environment variable's text when it is not
// blank, else the launcher words of CXX / CC (find_host_compilers). The words
// chosen (empty: no launcher) and where they came from, for find_launcher.
struct LauncherWords {
  std::vector<std::string> words;
  std::string source;  // given_source, env_name or compiler_variable; empty when nothing gives one
};
LauncherWords choose_launcher(const std::optional<std::vector<std::string>>& given, const std::string& given_source,
                              const std::optional<std::string>& env_value, const std::string& env_name,
                              const std::vector<std::string>& compiler_words, const std::string& compiler_variable);

struct CudaToolkit {
  std::string home;  // the toolkit root, e.g. /usr/local/cuda
  std::string nvcc;  // <home>/bin/nvcc
  std::string found_by;  // "CUDA_HOME", "CUDA_PATH", "PATH", "/usr/local/cuda"
};

// One compiler: $<var> when set and non-empty, else `fallback` ("c++",
// "cc"); a value with a '/' must name an existing file, a bare name is looked
// up on PATH. A value may start with launcher words ("ccache g++",
// "sccache /usr/bin/g++"): the last whitespace-separated word is the
// compiler; flags do not belong there (a last word starting with '-' is a
// reason). The absolute path, or why there is none.
Expected<std::string> find_compiler(const EnvLookup& env, const std::string& var, const std::string& fallback);

// $CXX (find_compiler(env, "CXX", "c++")) and, when `need_c`, $CC likewise,
// with the launcher words of "ccache g++"-style values looked up into
// cxx_launcher / cc_launcher; without `need_c`, `cc` is $CC or "cc" as given.
// The first one missing (compiler or launcher) is the reason when there is no value.
Expected<HostCompilers> find_host_compilers(const EnvLookup& env, bool need_c);

// $CUDA_HOME, then $CUDA_PATH, then the parent of the directory of `nvcc` on
// PATH, then /usr/local/cuda (tvm_ffi's order). A home without bin/nvcc is
// skipped only when it came from the fallback; a home named by a variable
// must hold nvcc.
Expected<CudaToolkit> find_cuda_toolkit(const EnvLookup& env);

// ROCm, for backend hip (tvm_ffi.cpp's layout: <home>/bin/hipcc,
// <home>/include, <home>/lib with libamdhip64).
struct RocmToolkit {
  std::string home;
  std::string hipcc;     // <home>/bin/hipcc
  std::string found_by;  // "ROCM_HOME", "ROCM_PATH", "PATH", "/opt/rocm"
};

// tvm_ffi's order: $ROCM_HOME, then $ROCM_PATH, then hipcc on PATH (symlinks
// resolved; its home is two levels up, or three when it sits in <home>/hip/bin),
// then /opt/rocm. The home must hold bin/hipcc. Debian's hipcc package is
// found as /usr (/usr/bin/hipcc, /usr/include/hip).
Expected<RocmToolkit> find_rocm_toolkit(const EnvLookup& env);

}  // namespace tvmffi_jit::toolchain
