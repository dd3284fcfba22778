// Logging: spdlog to stderr. stdout is reserved for results.
#pragma once

#include <spdlog/spdlog.h>

#include <string>
#include <vector>

namespace tvmffi_jit::util {

// verbosity: 0 = warnings and errors + short progress, 1 = -v (every command),
// 2 = -vv (debug). quiet: errors only.
void init_logging(int verbosity, bool quiet);
int log_verbosity();
// Log lines go to *to instead of stderr from the next init_logging() on (the
// engine library, which runs the CLI inside a Python process, captures them);
// null: stderr again.
void redirect_logging(std::string* to);
// The text of every warning logged since init_logging(), also under -q (at
// most 100): `build --json` lists them, so a quiet caller still learns of an
// unwritable cache or a remote that failed.
std::vector<std::string> logged_warnings();
bool log_quiet();

}  // namespace tvmffi_jit::util
