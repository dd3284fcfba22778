// Logging: spdlog to stderr. stdout is reserved for results.
#pragma once

#include <spdlog/spdlog.h>

#include <string>
#include <vector>
// Every log call formats through fmt::detail::vformat_to<char>, a template fmt
// 9 defines in its header without an extern declaration, so each file that
// logged compiled fmt's whole formatting engine again (~70 KB of code, seconds
// at -O2 -g). It is instantiated once, in src/util/fmt_spdlog.cpp.
#if FMT_VERSION < 100000
FMT_BEGIN_NAMESPACE
namespace detail {
extern template void vformat_to<char>(buffer<char>&, basic_string_view<char>,
                                      basic_format_args<FMT_BUFFER_CONTEXT(char)>, locale_ref);
}  // namespace detail
FMT_END_NAMESPACE
#endif

namespace tvmffi_jit::util {

// verbosity: 0 = warnings and errors + short progress, 1 = -v (every command),
// 2 = -vv (debug). quiet: 1 = -q (no progress or info: warnings and errors),
// 2 = -qq (errors only), as pip's -q/-qq.
void init_logging(int verbosity, int quiet);
int log_verbosity();
// Log lines go to *to instead of stderr from the next init_logging() on (the
// engine library, which runs the CLI inside a Python process, captures them);
// null: stderr again.
void redirect_logging(std::string* to);
// The text of every warning logged since init_logging(), also under -q (at
// most 100): `build --json` lists them, so a quiet caller still learns of an
// unwritable cache or a remote that failed.
std::vector<std::string> logged_warnings();
bool log_quiet();        // -q or -qq: no progress
int log_quiet_level();  // 0, 1 (-q), 2 (-qq)

}  // namespace tvmffi_jit::util
