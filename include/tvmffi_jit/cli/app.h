#pragma once

namespace tvmffi_jit::cli {

// The whole program: parses argv, runs one subcommand, and turns every
// tvmffi_jit::Error into its message on stderr and its exit code.
int run(int argc, char** argv);

}  // namespace tvmffi_jit::cli
