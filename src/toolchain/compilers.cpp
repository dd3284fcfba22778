#include "tvmffi_jit/toolchain/compilers.h"

#include <unistd.h>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::toolchain {

namespace {

// "ccache g++" -> launcher {"ccache"}, compiler "g++".
std::string split_compiler_variable(const std::string& var, const std::string& value, std::vector<std::string>* launcher) {
  std::vector<std::string> words = split_launcher_text(value);
  if (words.size() <= 1) return words.empty() ? value : words[0];
  if (words.back()[0] == '-')
    throw missing_tool_error(var + "=" + value + ": the last word must be the compiler (\"ccache g++\" form); put flags in "
                             "extra_cflags / --cflag instead");
  launcher->assign(words.begin(), words.end() - 1);
  return words.back();
}

std::string resolve_compiler(const EnvLookup& env, const std::string& var, const std::string& fallback,
                             std::vector<std::string>* launcher) {
  std::optional<std::string> configured = non_empty(env, var);
  std::string program = configured ? split_compiler_variable(var, *configured, launcher) : fallback;
  if (program.find('/') != std::string::npos) {
    if (util::is_regular_file(program)) return util::absolute_path(program);
  } else if (auto found = util::find_program(program)) {
    return *found;
  }
  if (configured)
    throw missing_tool_error(var + "=" + program + ": compiler not found (set " + var +
                             " to an installed compiler, or unset it to use " + fallback + ")");
  throw missing_tool_error("no " + fallback + " on PATH: install a C/C++ compiler (e.g. apt-get install g++) or set " + var);
}

bool has_nvcc(const std::string& home) { return util::is_regular_file(util::join_path(home, "bin/nvcc")); }

}  // namespace

std::vector<std::string> split_launcher_text(const std::string& text) { return util::split_any(text, " \t\n"); }

Launcher resolve_launcher(const std::vector<std::string>& words, const std::string& source) {
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
    throw missing_tool_error("compiler launcher \"" + program + "\" (from " + source +
                             ") not found: install it (scripts/setup.sh installs sccache and ccache), "
                             "fix the value, or give an empty launcher to build without one");
  l.argv = words;
  l.argv[0] = *found;
  return l;
}

HostCompilers find_host_compilers(const EnvLookup& env, bool need_c) {
  HostCompilers c;
  std::vector<std::string> cxx_launcher, cc_launcher;
  c.cxx = resolve_compiler(env, "CXX", "c++", &cxx_launcher);
  if (need_c) c.cc = resolve_compiler(env, "CC", "cc", &cc_launcher);
  else c.cc = non_empty(env, "CC").value_or("cc");
  if (!cxx_launcher.empty()) c.cxx_launcher = resolve_launcher(cxx_launcher, "CXX").argv;
  if (!cc_launcher.empty()) c.cc_launcher = resolve_launcher(cc_launcher, "CC").argv;
  return c;
}

std::optional<CudaToolkit> find_cuda_toolkit(const EnvLookup& env, std::string* why) {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (auto home = non_empty(env, var)) {
      if (has_nvcc(*home)) return CudaToolkit{*home, util::join_path(*home, "bin/nvcc"), var};
      if (why) *why = std::string(var) + "=" + *home + " has no bin/nvcc";
      return std::nullopt;
    }
  }
  if (auto nvcc = util::find_program("nvcc")) {
    std::string home = util::parent_path(util::parent_path(*nvcc));
    return CudaToolkit{home, *nvcc, "PATH"};
  }
  if (has_nvcc("/usr/local/cuda")) return CudaToolkit{"/usr/local/cuda", "/usr/local/cuda/bin/nvcc", "/usr/local/cuda"};
  if (why)
    *why = "no CUDA toolkit: CUDA_HOME and CUDA_PATH are unset, nvcc is not on PATH and /usr/local/cuda/bin/nvcc "
           "does not exist (install the CUDA toolkit or set CUDA_HOME)";
  return std::nullopt;
}

}  // namespace tvmffi_jit::toolchain
