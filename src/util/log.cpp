#include "tvmffi_jit/util/log.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace tvmffi_jit::util {

namespace {
int g_verbosity = 0;
bool g_quiet = false;
}  // namespace

void init_logging(int verbosity, bool quiet) {
  g_verbosity = verbosity;
  g_quiet = quiet;
  spdlog::drop("tvmffi-jit");
  auto logger = spdlog::stderr_logger_mt("tvmffi-jit");
  spdlog::set_default_logger(logger);
  // Plain "tvmffi-jit: warning: ..." lines, like a compiler, not timestamped log records.
  spdlog::set_pattern("tvmffi-jit: %^%l%$: %v");
  if (quiet) spdlog::set_level(spdlog::level::err);
  else if (verbosity >= 2) spdlog::set_level(spdlog::level::debug);
  else spdlog::set_level(spdlog::level::info);
  spdlog::flush_on(spdlog::level::trace);
}

int log_verbosity() { return g_verbosity; }
bool log_quiet() { return g_quiet; }

}  // namespace tvmffi_jit::util
