// build's command line: the options `build` binds into a BuildArgs (the
// request is resolved from it in build_request.cpp). Private to the cli layer.
#pragma once

#include <CLI/CLI.hpp>

#include "build_request.h"

namespace tvmffi_jit::cli {

// Adds every option of `build` to its subcommand, bound to `args`.
void add_build_options(CLI::App& build_command, BuildArgs& args);

}  // namespace tvmffi_jit::cli
