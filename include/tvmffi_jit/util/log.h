// Logging: spdlog to stderr. stdout is reserved for results.
#pragma once

#include <spdlog/spdlog.h>

namespace tvmffi_jit::util {

// verbosity: 0 = warnings and errors + short progress, 1 = -v (every command),
// 2 = -vv (debug). quiet: errors only.
void init_logging(int verbosity, bool quiet);
int log_verbosity();
bool log_quiet();

}  // namespace tvmffi_jit::util
