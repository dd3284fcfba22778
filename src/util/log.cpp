#include "tvmffi_jit/util/log.h"

#include <mutex>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace tvmffi_jit::util {

namespace {
int g_verbosity = 0;
int g_quiet = 0;
std::string* g_redirect = nullptr;

// Appends formatted lines to a string (the engine library's captured stderr).
class StringSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit StringSink(std::string* to) : to_(to) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    to_->append(formatted.data(), formatted.size());
  }
  void flush_() override {}

 private:
  std::string* to_;
};

// Keeps the text of every warning, -q or not: a --json result lists them, so
// a caller that runs the CLI quietly (the Python package) still sees an
// unwritable cache or a failed remote.
class WarningSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> taken() {
    std::lock_guard<std::mutex> lock(mutex_);
    return warnings_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level == spdlog::level::warn && warnings_.size() < kMaxKept)
      warnings_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  static constexpr size_t kMaxKept = 100;  // a flood of warnings does not grow the result without bound
  std::vector<std::string> warnings_;
};

std::shared_ptr<WarningSink> g_warnings;
}  // namespace

void redirect_logging(std::string* to) { g_redirect = to; }

void init_logging(int verbosity, int quiet) {
  g_verbosity = verbosity;
  g_quiet = quiet;
  spdlog::drop("tvmffi-jit");
  spdlog::sink_ptr out;
  if (g_redirect) out = std::make_shared<StringSink>(g_redirect);
  else out = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  g_warnings = std::make_shared<WarningSink>();
  g_warnings->set_level(spdlog::level::warn);
  auto logger = std::make_shared<spdlog::logger>("tvmffi-jit", spdlog::sinks_init_list{out, g_warnings});
  spdlog::set_default_logger(logger);
  // Plain "tvmffi-jit: warning: ..." lines, like a compiler, not timestamped log records.
  spdlog::set_pattern("tvmffi-jit: %^%l%$: %v");
  if (quiet > 0) {
    // -q hides progress, not problems: a remote that failed, a cache that
    // cannot store are still one warning line each. -qq: errors only on
    // stderr. The logger passes warnings on for the --json list either way.
    out->set_level(quiet >= 2 ? spdlog::level::err : spdlog::level::warn);
    spdlog::set_level(spdlog::level::warn);
  } else if (verbosity >= 2) {
    spdlog::set_level(spdlog::level::debug);
  } else {
    spdlog::set_level(spdlog::level::info);
  }
  spdlog::flush_on(spdlog::level::trace);
}

int log_verbosity() { return g_verbosity; }
bool log_quiet() { return g_quiet > 0; }
int log_quiet_level() { return g_quiet; }

std::vector<std::string> logged_warnings() { return g_warnings ? g_warnings->taken() : std::vector<std::string>{}; }

}  // namespace tvmffi_jit::util
