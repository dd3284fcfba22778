// What `build` writes besides the artifact, for build systems: --output /
// --link-to (a stable path), --depfile (Make-style dependencies) and
// --compile-commands (clangd). Private to the cli layer.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tvmffi_jit/build/executor.h"
#include "tvmffi_jit/build/manifest.h"
#include "tvmffi_jit/build/plan.h"

namespace tvmffi_jit::cli {

struct BuildOutputOptions {
  std::string output;            // -o/--output PATH: atomic copy of the artifact
  std::string link_to;           // --link-to PATH: symlink to the artifact
  std::string depfile;           // --depfile FILE
  std::string compile_commands;  // --compile-commands FILE
};

void add_build_output_options(CLI::App& build_command, BuildOutputOptions& options);

// Runs after a successful build (or cache hit): places the artifact, writes
// the depfile and the compilation database, and returns the path to print
// (--output's path when given, else the artifact's). `recorded_headers` are
// the cache entry's headers on a hit (empty otherwise). Throws Error(kIo).
std::string write_build_outputs(const BuildOutputOptions& options, const build::Manifest& manifest,
                                const build::BuildPlan& plan, const build::BuildResult& result,
                                const std::string& artifact_path, const std::vector<std::string>& recorded_headers);

}  // namespace tvmffi_jit::cli
