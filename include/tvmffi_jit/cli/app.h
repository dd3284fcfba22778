#pragma once

#include <string>
#include <vector>

namespace tvmffi_jit::cli {

// The whole program: parses argv, runs one subcommand, and turns every
// tvmffi_jit::Error into its message on stderr and its exit code.
int run(int argc, char** argv);

// The same program inside another one (the engine library, engine.cpp): `args`
// without argv[0]; stdout, diagnostics and log lines are captured instead of
// written, and no signal handler is installed. One call at a time per
// process: the logger and the capture are process-wide.
struct EmbeddedResult {
  int exit_code = 0;
  std::string out;
  std::string err;
};
EmbeddedResult run_embedded(const std::vector<std::string>& args);

}  // namespace tvmffi_jit::cli
