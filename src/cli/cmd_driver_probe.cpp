// `tvmffi-jit __driver-probe`: hidden subcommand, the child process of
// driver validation (src/driver/probe.cpp). Not for users: the request
// arrives as JSON on stdin from driver::validate_files in the parent.
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/driver/validate.h"

namespace tvmffi_jit::cli {

void register_driver_probe_command(CLI::App& app, CommandContext& ctx) {
  CLI::App* cmd = app.add_subcommand("__driver-probe", "internal: load device code in a child process");
  cmd->group("");  // hidden from --help
  // The child's own environment (inherited from the parent) names the driver library.
  cmd->callback([&ctx] { ctx.exit_code = driver::run_driver_probe(ctx.environment.libcuda); });
}

}  // namespace tvmffi_jit::cli
