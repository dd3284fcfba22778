// The unit tests' main: the process is set up the way cli::run() sets up
// every command (the temp root, the program search path and NVRTC's search
// from the environment, read once), so a test of a lower layer runs with
// the settings the tool gives it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tvmffi_jit/cli/environment.h"

int main(int argc, char* argv[]) {
  tvmffi_jit::cli::apply_process_settings(
      tvmffi_jit::cli::resolve_command_environment(tvmffi_jit::toolchain::process_environment()));
  return Catch::Session().run(argc, argv);
}
