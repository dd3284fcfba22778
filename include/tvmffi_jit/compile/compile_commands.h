// compile_commands.json (the JSON compilation database clangd, clang-tidy
// and IDEs read) for the translation units of a build.
//
// Format: a JSON array of {"directory", "arguments", "file", "output"}
// objects, the form CMake and Bear write (arguments as an argv array, never a
// shell string, so nothing needs re-quoting).
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::compile {

struct CompileCommand {
  std::string directory;               // working directory of the compiler (absolute)
  std::vector<std::string> arguments;  // the full argv, compiler first
  std::string file;                    // the translation unit (absolute)
  std::string output;                  // the object it produces (absolute); may be empty
};

// The database text for `commands`, in order, pretty-printed.
std::string format_compile_commands(const std::vector<CompileCommand>& commands);

// Parses a database (either form: "arguments" or a "command" string split on
// blanks with shell-style quotes). Throws Error(kIo) naming `origin` when the
// text is not a JSON array of objects with "directory" and "file".
std::vector<CompileCommand> parse_compile_commands(const std::string& text, const std::string& origin);

// Writes `commands` into the database at `path`, atomically. Entries already
// there for other translation units are kept (so several modules can share
// one database, as they share one clangd); entries for the same file are
// replaced. An existing file that is not a database is an error (exit 5)
// rather than something to overwrite.
void update_compile_commands(const std::string& path, const std::vector<CompileCommand>& commands);

// The database entries of a plan: one per translation unit that is a file of
// the user's (inline sources only exist in a build directory that is gone
// after a cached build, so they are left out). A unit compiled through the
// export wrapper (wrapper.h: `#include "<file>"`) is listed under the user's
// file with the wrapper's input replaced by it: same flags, the file clangd
// opens. `directory` is the working directory recorded (the plan's commands
// name only their outputs relatively).
std::vector<CompileCommand> plan_compile_commands(const BuildPlan& plan, const Manifest& manifest,
                                                  const std::string& directory);

}  // namespace tvmffi_jit::compile
