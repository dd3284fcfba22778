#include "tvmffi_jit/toolchain/compilers.h"

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/process.h"

namespace tvmffi_jit::toolchain {

namespace {

bool has_nvcc(const std::string& home) { return util::is_regular_file(util::join_path(home, "bin/nvcc")); }

}  // namespace

Expected<std::string> find_compiler(const EnvLookup& env, const std::string& var, const std::string& fallback) {
  std::optional<std::string> configured = non_empty(env, var);
  std::string program = configured.value_or(fallback);
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

Expected<HostCompilers> find_host_compilers(const EnvLookup& env, bool need_c) {
  HostCompilers c;
  auto cxx = find_compiler(env, "CXX", "c++");
  if (!cxx) return Unexpected{cxx.error()};
  c.cxx = *cxx;
  if (need_c) {
    auto cc = find_compiler(env, "CC", "cc");
    if (!cc) return Unexpected{cc.error()};
    c.cc = *cc;
  } else {
    c.cc = non_empty(env, "CC").value_or("cc");
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

}  // namespace tvmffi_jit::toolchain
