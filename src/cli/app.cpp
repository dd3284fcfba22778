#include "tvmffi_jit/cli/app.h"

#include <cstdio>
#include <exception>
#include <vector>

#include "doctor.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"

namespace tvmffi_jit::cli {

namespace {

// The subcommand table: one row per src/cli/cmd_<name>.cpp.
const std::vector<RegisterCommand> kCommands = {
    register_driver_probe_command,
    register_inspect_command,
    register_cache_command,
    register_build_command,
    register_doctor_command,
};

const char* kExitCodeHelp =
    "Exit codes: 0 ok; 1 compile or link failed; 2 bad usage or manifest; 3 validation failed\n"
    "(invalid file); 4 missing toolchain, tvm-ffi or driver; 5 I/O or cache failure.";

}  // namespace

int run(int argc, char** argv) {
  CommandContext ctx;
  CLI::App app{"tvmffi-jit: build C++/CUDA sources into cached Apache TVM FFI modules, emit and\n"
               "inspect cubin/fatbin/PTX, and validate GPU code through the CUDA driver."};
  app.name("tvmffi-jit");
  app.footer(kExitCodeHelp);
  app.require_subcommand(1);
  app.fallthrough();
  app.add_flag("-v,--verbose", ctx.global.verbosity, "Show every command (-vv: debug log)");
  app.add_flag("-q,--quiet", ctx.global.quiet, "No progress or log messages on stderr: errors and compiler warnings only");
  app.set_version_flag("--version", version_report, "Print the versions of tvmffi-jit, tvm-ffi, nvcc and the CUDA driver");
  util::install_termination_handlers();  // children never outlive a Ctrl-C (util/process.h)
  util::init_logging(0, false);
  // Re-initialise once -v/-q are known; this runs before any subcommand callback.
  app.parse_complete_callback([&] { util::init_logging(ctx.global.verbosity, ctx.global.quiet); });
  for (RegisterCommand reg : kCommands) reg(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return static_cast<int>(ExitCode::kUsage);
  } catch (const Error& e) {
    std::fprintf(stderr, "tvmffi-jit: error: %s\n", e.what());
    // Stopped by a signal: 128 + its number, whichever error the unwinding raised first.
    if (int sig = util::termination_signal()) return 128 + sig;
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tvmffi-jit: internal error: %s\n", e.what());
    return static_cast<int>(ExitCode::kIo);
  }
  return ctx.exit_code;
}

}  // namespace tvmffi_jit::cli
