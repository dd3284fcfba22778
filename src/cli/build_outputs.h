// What `build` writes besides the artifact, for build systems: --output /
// --link-to (a stable path), --depfile (Make-style dependencies) and
// --compile-commands (clangd). Private to the cli layer.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::cli {

struct BuildOutputOptions {
  std::string output;            // -o/--output PATH: atomic copy of the artifact
  std::string link_to;           // --link-to PATH: symlink to the artifact
  std::string depfile;           // --depfile FILE
  std::string compile_commands;  // --compile-commands FILE
};

void add_build_output_options(CLI::App& build_command, BuildOutputOptions& options);

// Runs after a successful build (or cache hit): places result.artifact_path,
// writes the depfile and the compilation database, and returns the path to
// print (--output's path when given, else the artifact's). `cache_entry_dir`
// is the cache entry holding the artifact (empty for an uncached build): its
// entry.json records the headers every compiler read, which is all there is
// to know about them after a hit. Throws Error(kIo).
std::string write_build_outputs(const BuildOutputOptions& options, const compile::Manifest& manifest,
                                const compile::BuildPlan& plan, const compile::BuildResult& result,
                                const std::string& cache_entry_dir);

}  // namespace tvmffi_jit::cli
