// The compiled half of fmt and spdlog, built once here.
//
// Used header-only, both libraries compile their whole implementation (float
// and integer formatting, the pattern formatter, the logger registry) again
// in every file that formats or logs; at -O2 -g that was most of the time of
// a small file (devcode/ptx.cpp: 8.1 s header-only, 1.9 s without). Debian
// ships no libfmt.a or libspdlog.a, and the release binary links its
// dependencies statically (TVMFFI_JIT_STATIC_DEPS), so the implementation
// headers Debian does ship are compiled in this one file instead. Every other
// file sees declarations only: the util layer exports SPDLOG_COMPILED_LIB and
// SPDLOG_FMT_EXTERNAL and leaves FMT_HEADER_ONLY unset (CMakeLists.txt).
//
// What is instantiated below is what the tool and its tests use; a missing
// one shows up as an undefined fmt::/spdlog:: symbol at link time.
#if !defined(SPDLOG_COMPILED_LIB) || defined(FMT_HEADER_ONLY)
#error "fmt_spdlog.cpp is the compiled fmt/spdlog: build it with SPDLOG_COMPILED_LIB and without FMT_HEADER_ONLY"
#endif

#include <fmt/format-inl.h>

#include <locale>
#include <mutex>

#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/details/periodic_worker-inl.h>
#include <spdlog/details/registry-inl.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/ansicolor_sink-inl.h>
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>
#include <spdlog/sinks/stdout_sinks-inl.h>
#include <spdlog/spdlog-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
// Declared extern in util/log.h.
template void vformat_to<char>(buffer<char>&, basic_string_view<char>, basic_format_args<FMT_BUFFER_CONTEXT(char)>,
                               locale_ref);
}  // namespace detail
FMT_END_NAMESPACE

// Sinks with a lock (the tool's stderr logger) and without one (the tests'
// ostream sink, which only one thread writes).
template class spdlog::sinks::base_sink<std::mutex>;
template class spdlog::sinks::base_sink<spdlog::details::null_mutex>;
template class spdlog::sinks::stderr_sink<spdlog::details::console_mutex>;
// spdlog's own default logger, in use until init_logging() replaces it.
template class spdlog::sinks::ansicolor_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_stdout_sink<spdlog::details::console_mutex>;
template std::shared_ptr<spdlog::logger> spdlog::stderr_logger_mt<spdlog::synchronous_factory>(
    const std::string& logger_name);
