// Subcommand registration. One file per subcommand: src/cli/cmd_<name>.cpp
// defines register_<name>_command(), which adds a CLI11 subcommand whose
// callback runs the command and stores its exit code in ctx.exit_code.
#pragma once

#include <CLI/CLI.hpp>

#include "tvmffi_jit/cli/environment.h"

namespace tvmffi_jit::cli {

struct GlobalOptions {
  int verbosity = 0;   // -v, -vv
  int quiet = 0;       // -q 1 (no progress), -qq 2 (no warnings either)
};

struct CommandContext {
  GlobalOptions global;
  CommandEnvironment environment;  // read once by cli::run(), before the command line is parsed
  bool embedded = false;  // a call of the engine library (cli::run_embedded), in a longer-lived process
  int exit_code = 0;
};

using RegisterCommand = void (*)(CLI::App& app, CommandContext& ctx);

void register_build_command(CLI::App& app, CommandContext& ctx);
void register_inspect_command(CLI::App& app, CommandContext& ctx);
void register_cache_command(CLI::App& app, CommandContext& ctx);
void register_doctor_command(CLI::App& app, CommandContext& ctx);
void register_driver_probe_command(CLI::App& app, CommandContext& ctx);  // hidden: driver validation child

}  // namespace tvmffi_jit::cli
