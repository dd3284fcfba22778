// Writing Make-style dependency files ("depfiles").
//
// Written for build systems that call tvmffi-jit (`build --depfile FILE`): the
// artifact is the target, every input the build read (manifest, sources,
// embedded binaries, headers the compilers reported) a prerequisite, so Make,
// Ninja and CMake's add_custom_command(DEPFILE) rebuild exactly when one of
// them changes. (Reading the depfiles compilers write is parse_depfile, below.)
//
// Format (the subset GNU make, ninja's depfile parser and CMake's
// cmGccDepfileReader agree on):
//   depfile := rule+
//   rule    := targets ':' prerequisites '\n'
//   lines may be continued with a backslash before the newline; in a path,
//   ' ' is written "\ ", '#' "\#", '$' "$$", and a backslash is written as is
//   unless it precedes a space or '#' or ends the path (then doubled, as gcc does).
// Every prerequisite also gets an empty rule of its own ("header.h:"), as
// `gcc -MP` writes, so deleting a header does not break Make
// ("No rule to make target").
//
// Read: the depfiles compilers write (parse_depfile), which also reads
// everything this writer produces.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/manifest.h"

namespace tvmffi_jit::compile {

// One path escaped for a depfile (see the format above). Newlines cannot be
// represented; the writer rejects them with Error(kUsage).
std::string escape_depfile_path(std::string_view path);

// The text of a depfile for `targets` depending on `prerequisites`
// (de-duplicated, first occurrence kept; targets are never listed as their own
// prerequisites). One prerequisite per continued line, so diffs stay readable.
std::string format_depfile(const std::vector<std::string>& targets, const std::vector<std::string>& prerequisites);

// Writes format_depfile() to `path` atomically (creating its directory), so a
// build system never reads half a depfile.
void write_depfile(const std::string& path, const std::vector<std::string>& targets,
                   const std::vector<std::string>& prerequisites);

// Every file a build read, in a stable order: the manifest, the sources, the
// embedded binaries, then each header the compilers reported (`result.units`
// and `result.device_units` after a compile) and each file the linker read
// (`result.link_dependencies`; after a hit both come from the cache entry's
// `recorded_headers`), without duplicates. Files under the build directory are
// left out: they are generated, and naming a file that will not exist would
// make Make rebuild every time.
std::vector<std::string> build_inputs(const Manifest& manifest, const BuildResult& result,
                                      const std::vector<std::string>& recorded_headers);

// The prerequisites of a Make-style depfile as gcc/clang (-MD -MF) and nvcc
// (-MD -MF / --generate-dependencies-with-compile --dependency-output) write
// it: every target's dependency list, with backslash-newline continuations,
// `\ ` escaped spaces and `$$` unescaped, in order, without duplicates.
std::vector<std::string> parse_depfile(std::string_view text);

}  // namespace tvmffi_jit::compile
