#include "tvmffi_jit/toolchain/compilers.h"

#include <unistd.h>

#include <tuple>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::toolchain {

namespace {

bool has_nvcc(const std::string& home) { return util::is_regular_file(util::join_path(home, "bin/nvcc")); }

// $<var> = "[launcher words...] compiler": the compiler found, the launcher
// words (not yet looked up) in *launcher.
Expected<std::string> find_compiler_and_launcher(const EnvLookup& env, const std::string& var, const std::string& fallback,
                                                 std::vector<std::string>* launcher) {
  std::optional<std::string> configured = non_empty(env, var);
  std::string program = fallback;
  if (configured) {
    std::vector<std::string> words = split_launcher_text(*configured);
    program = words.empty() ? *configured : words.back();
    if (words.size() > 1) {
      if (words.back()[0] == '-')
        return Unexpected{var + "=" + *configured +
                          ": the last word must be the compiler (\"ccache g++\" form); put flags in "
                          "extra_cflags / --cflag instead"};
      if (launcher) launcher->assign(words.begin(), words.end() - 1);
    }
  }
  if (program.find('/') != std::string::npos) {
    if (util::is_regular_file(program)) return util::absolute_path(program);
  } else if (auto found = util::find_program(program)) {
    return *found;
  }
  if (configured)
    return Unexpected{var + "=" + program + ": compiler not found (set " + var +
                      " to an installed compiler, or unset it to use " + fallback + ")"};
  return Unexpected{"no " + fallback + " on PATH: install a C/C++ compiler (e.g. apt-get install g++) or set " + var};
}

}  // namespace

Expected<Launcher> find_launcher(const std::vector<std::string>& words, const std::string& source) {
  Launcher l;
  l.source = source;
  if (words.empty()) return l;
  const std::string& program = words[0];
  std::optional<std::string> found;
  if (program.find('/') != std::string::npos) {
    if (util::is_regular_file(program) && ::access(program.c_str(), X_OK) == 0) found = util::absolute_path(program);
  } else {
    found = util::find_program(program);
  }
  if (!found)
    return Unexpected{"compiler launcher \"" + program + "\" (from " + source +
                      ") not found: install it (scripts/setup.sh installs sccache and ccache), "
                      "fix the value, or give an empty launcher to build without one"};
  l.argv = words;
  l.argv[0] = *found;
  return l;
}

std::vector<std::string> split_launcher_text(const std::string& text) { return util::split_any(text, " \t\n"); }

Launcher resolve_launcher(const std::vector<std::string>& words, const std::string& source) {
  return find_launcher(words, source).value_or_throw(missing_tool_error);
}

Expected<std::string> find_compiler(const EnvLookup& env, const std::string& var, const std::string& fallback) {
  return find_compiler_and_launcher(env, var, fallback, nullptr);
}

Expected<HostCompilers> find_host_compilers(const EnvLookup& env, bool need_c) {
  HostCompilers c;
  std::vector<std::string> cxx_launcher, cc_launcher;
  auto cxx = find_compiler_and_launcher(env, "CXX", "c++", &cxx_launcher);
  if (!cxx) return Unexpected{cxx.error()};
  c.cxx = *cxx;
  if (need_c) {
    auto cc = find_compiler_and_launcher(env, "CC", "cc", &cc_launcher);
    if (!cc) return Unexpected{cc.error()};
    c.cc = *cc;
  } else {
    c.cc = non_empty(env, "CC").value_or("cc");
  }
  for (auto [words, var, out] : {std::tuple{&cxx_launcher, "CXX", &c.cxx_launcher}, std::tuple{&cc_launcher, "CC", &c.cc_launcher}}) {
    if (words->empty()) continue;
    auto l = find_launcher(*words, var);
    if (!l) return Unexpected{l.error()};
    *out = l->argv;
  }
  return c;
}

Expected<CudaToolkit> find_cuda_toolkit(const EnvLookup& env) {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (auto home = non_empty(env, var)) {
      if (has_nvcc(*home)) return CudaToolkit{*home, util::join_path(*home, "bin/nvcc"), var};
      return Unexpected{std::string(var) + "=" + *home + " has no bin/nvcc"};
    }
  }
  if (auto nvcc = util::find_program("nvcc")) {
    std::string home = util::parent_path(util::parent_path(*nvcc));
    return CudaToolkit{home, *nvcc, "PATH"};
  }
  if (has_nvcc("/usr/local/cuda")) return CudaToolkit{"/usr/local/cuda", "/usr/local/cuda/bin/nvcc", "/usr/local/cuda"};
  return Unexpected{
      "no CUDA toolkit: CUDA_HOME and CUDA_PATH are unset, nvcc is not on PATH and /usr/local/cuda/bin/nvcc "
      "does not exist (install the CUDA toolkit or set CUDA_HOME)"};
}

Expected<RocmToolkit> find_rocm_toolkit(const EnvLookup& env) {
  auto has_hipcc = [](const std::string& home) { return util::is_regular_file(util::join_path(home, "bin/hipcc")); };
  for (const char* var : {"ROCM_HOME", "ROCM_PATH"}) {
    if (auto home = non_empty(env, var)) {
      if (has_hipcc(*home)) return RocmToolkit{*home, util::join_path(*home, "bin/hipcc"), var};
      return Unexpected{std::string(var) + "=" + *home + " has no bin/hipcc"};
    }
  }
  if (auto hipcc = util::find_program("hipcc")) {
    std::string resolved = util::real_path(*hipcc).value_or(*hipcc);
    std::string home = util::parent_path(util::parent_path(resolved));
    if (util::file_name(home) == "hip") home = util::parent_path(home);
    if (has_hipcc(home)) return RocmToolkit{home, util::join_path(home, "bin/hipcc"), "PATH"};
    return RocmToolkit{util::parent_path(util::parent_path(*hipcc)), *hipcc, "PATH"};
  }
  if (has_hipcc("/opt/rocm")) return RocmToolkit{"/opt/rocm", "/opt/rocm/bin/hipcc", "/opt/rocm"};
  return Unexpected{
      "no ROCm: ROCM_HOME and ROCM_PATH are unset, hipcc is not on PATH and /opt/rocm/bin/hipcc does not exist "
      "(install ROCm, or on Debian 12 `apt-get install hipcc`, or set ROCM_HOME)"};
}

}  // namespace tvmffi_jit::toolchain
