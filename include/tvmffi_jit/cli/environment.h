// The environment of one command, read once (ARCHITECTURE.md, "The
// environment is read in one place"). cli::run() resolves it from
// toolchain::process_environment() -- the one getenv() -- before the command
// line is parsed, hands the process-wide parts to the layers that keep them
// (apply_process_settings) and gives the rest to the command through its
// CommandContext. Nothing below the CLI reads a variable: it gets values.
#pragma once

#include <optional>
#include <string>

#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/toolchain/environment.h"
#include "tvmffi_jit/util/progress.h"

namespace tvmffi_jit::cli {

struct CommandEnvironment {
  // The lookup itself, for what a command resolves on its own: the build
  // request (TVMFFI_JIT_REMOTE*, launchers, arch lists, ...), the finders
  // (CXX, CUDA_HOME, TVM_FFI_ROOT, ...), the remote signing keys.
  toolchain::EnvLookup env;
  std::optional<std::string> program_search_path;  // PATH: where programs are looked up
  std::string temp_root;                           // TMPDIR ("" : /tmp)
  util::TerminalEnvironment terminal;              // TERM, NO_COLOR, CLICOLOR_FORCE, FORCE_COLOR
  cache::RootEnvironment cache_root;               // TVMFFI_JIT_CACHE_DIR, XDG_CACHE_HOME, HOME
  std::string libcuda;                             // TVMFFI_JIT_LIBCUDA, else libcuda.so.1
};

// Reads every variable above from `env`; never throws (a variable whose
// value must parse is checked by the command that uses it).
CommandEnvironment resolve_command_environment(toolchain::EnvLookup env);

// The cache root for --cache-dir `cli_value` (cache::resolve_root_path), for
// a command that opens it: refused (exit 5) when it is $HOME, as open_root()
// refuses `/` and the passwd entry's home.
std::string cache_root_to_open(const std::string& cli_value, const cache::RootEnvironment& env);

// The parts of it a resolution that takes only the lookup (the build
// request) reads the same way.
cache::RootEnvironment cache_root_environment(const toolchain::EnvLookup& env);

// Where GCC precompiled headers live (compile/precompiled_headers.h):
// $TVMFFI_JIT_PCH_DIR ("off" or empty: none), else the user's toolchain memo
// folder's pch/ ($XDG_CACHE_HOME/tvmffi-jit-toolchain/pch); "" without a home.
std::string precompiled_header_dir(const toolchain::EnvLookup& env);
std::string libcuda_library(const toolchain::EnvLookup& env);

// Sets what the lower layers keep for the whole process: the temp root
// (util::set_temp_root), the program search path
// (util::set_program_search_path) and NVRTC's search
// (compile::set_nvrtc_environment). The status line is configured once -q
// is known (status_line_options).
void apply_process_settings(const CommandEnvironment& e);

// The status line's options (util::Progress) for -q and the terminal's variables.
util::Progress::Options status_line_options(bool quiet, const CommandEnvironment& e);

}  // namespace tvmffi_jit::cli
