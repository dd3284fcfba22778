#include "tvmffi_jit/cli/environment.h"

#include "tvmffi_jit/compile/nvrtc.h"
#include "tvmffi_jit/driver/devices.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"

namespace tvmffi_jit::cli {

cache::RootEnvironment cache_root_environment(const toolchain::EnvLookup& env) {
  return {env("TVMFFI_JIT_CACHE_DIR"), env("XDG_CACHE_HOME"), env("HOME")};
}

std::string cache_root_to_open(const std::string& cli_value, const cache::RootEnvironment& env) {
  std::string root = cache::resolve_root_path(cli_value, env);
  cache::refuse_home_directory(root, env.home.value_or(""));
  return root;
}

std::string precompiled_header_dir(const toolchain::EnvLookup& env) {
  if (auto dir = env("TVMFFI_JIT_PCH_DIR")) return *dir == "off" ? "" : *dir;
  try {
    return util::join_path(cache::user_toolchain_memo_dir(cache_root_environment(env)), "pch");
  } catch (const Error& e) {
    spdlog::debug("no precompiled headers: {}", e.what());  // no home directory: a build without them
    return "";
  }
}

std::string libcuda_library(const toolchain::EnvLookup& env) {
  return toolchain::non_empty(env, "TVMFFI_JIT_LIBCUDA").value_or(driver::kDefaultLibcuda);
}

CommandEnvironment resolve_command_environment(toolchain::EnvLookup env) {
  CommandEnvironment e;
  e.program_search_path = env("PATH");
  e.temp_root = env("TMPDIR").value_or("");
  e.terminal = {env("TERM"), env("NO_COLOR"), env("CLICOLOR_FORCE"), env("FORCE_COLOR")};
  e.cache_root = cache_root_environment(env);
  e.libcuda = libcuda_library(env);
  e.env = std::move(env);
  return e;
}

void apply_process_settings(const CommandEnvironment& e) {
  util::set_temp_root(e.temp_root);
  util::set_program_search_path(e.program_search_path);
  compile::set_nvrtc_environment(e.env);
}

util::Progress::Options status_line_options(bool quiet, const CommandEnvironment& e) {
  return util::Progress::options_for_stderr(quiet, e.terminal);
}

}  // namespace tvmffi_jit::cli
