#include "tvmffi_jit/util/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>

#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::util {

namespace {

// "Set and not '0'" is how ninja, CMake and the clicolors convention read these flags.
bool flag_set(const char* value) { return value != nullptr && value[0] != '\0' && std::strcmp(value, "0") != 0; }

constexpr std::string_view kEraseLine = "\r\x1b[K";
constexpr std::string_view kCounterColor = "\x1b[1;32m";
constexpr std::string_view kResetColor = "\x1b[0m";

}  // namespace

TerminalStyle terminal_style(bool is_tty, const char* term, const char* no_color,
                             const char* clicolor_force, const char* force_color) {
  TerminalStyle style;
  style.smart = is_tty && term != nullptr && term[0] != '\0' && std::strcmp(term, "dumb") != 0;
  style.color = style.smart;
  if (flag_set(no_color)) style.color = false;
  else if (flag_set(clicolor_force)) style.color = true;
  if (flag_set(force_color)) style.color = true;
  return style;
}

TerminalStyle terminal_style_for_fd(int fd, const TerminalEnvironment& env) {
  auto c_str = [](const std::optional<std::string>& v) { return v ? v->c_str() : nullptr; };
  return terminal_style(::isatty(fd) == 1, c_str(env.term), c_str(env.no_color), c_str(env.clicolor_force),
                        c_str(env.force_color));
}

std::string elide_middle(std::string_view text, size_t width) {
  if (width == 0 || text.size() <= width) return std::string(text);
  constexpr std::string_view kEllipsis = "...";
  if (width <= kEllipsis.size()) return std::string(kEllipsis.substr(0, width));
  const size_t keep = width - kEllipsis.size();
  const size_t head = keep / 2 + keep % 2;
  const size_t tail = keep / 2;
  std::string out;
  out.reserve(width);
  out.append(text.substr(0, head));
  out.append(kEllipsis);
  out.append(text.substr(text.size() - tail));
  return out;
}

// While a status line is on screen, the default logger's sinks are swapped for
// this one. It forwards each record to the original sinks (so the format set
// by init_logging is kept) between erasing and redrawing the status line, all
// under the progress mutex, so a warning never lands in the middle of the line.
struct Progress::LogRoute : spdlog::sinks::sink {
  LogRoute(Progress& owner, std::shared_ptr<spdlog::logger> logger)
      : owner_(owner), logger_(std::move(logger)), original_(logger_->sinks()) {
    logger_->sinks() = {std::shared_ptr<spdlog::sinks::sink>(this, [](spdlog::sinks::sink*) {})};
  }
  // Called with owner_.mutex_ held. Put the original sinks back. Records logged
  // concurrently with finish() are the caller's problem: the executor stops its
  // workers before it ends the run.
  void restore() { logger_->sinks() = original_; }

  void log(const spdlog::details::log_msg& msg) override {
    std::lock_guard<std::mutex> lock(owner_.mutex_);
    owner_.erase_locked();
    for (auto& sink : original_) {
      if (sink->should_log(msg.level)) sink->log(msg);
    }
    for (auto& sink : original_) sink->flush();
    owner_.draw_locked();
  }
  void flush() override {}
  void set_pattern(const std::string& pattern) override {
    for (auto& sink : original_) sink->set_pattern(pattern);
  }
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
    for (auto& sink : original_) sink->set_formatter(formatter->clone());
  }

 private:
  Progress& owner_;
  std::shared_ptr<spdlog::logger> logger_;
  std::vector<spdlog::sink_ptr> original_;
};

Progress::Options Progress::options_for_stderr(bool quiet, const TerminalEnvironment& env) {
  Options options;
  const TerminalStyle style = terminal_style_for_fd(STDERR_FILENO, env);
  options.mode = quiet ? ProgressMode::kSilent : style.smart ? ProgressMode::kTerminal : ProgressMode::kLines;
  options.color = style.color;
  options.out = stderr;
  return options;
}

Progress& Progress::global() {
  static Progress instance;
  return instance;
}

Progress::Progress(Options options) : configured_(true), options_(options) {}
Progress::Progress() = default;

Progress::~Progress() { finish(); }

void Progress::configure(Options options) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_) return;  // never switch modes under a visible status line
  options_ = options;
  configured_ = true;
}

ProgressMode Progress::mode() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return options_.mode;
}

void Progress::ensure_configured_locked() {
  if (configured_) return;
  options_ = options_for_stderr(log_quiet(), TerminalEnvironment{});
  configured_ = true;
}

void Progress::start(size_t total) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensure_configured_locked();
  if (depth_++ > 0) return;  // nested: the outer run's total and numbering stand
  running_ = true;
  total_ = total;
  counter_ = 0;
  if (options_.mode == ProgressMode::kTerminal && !log_route_ && options_.out == stderr) {
    if (auto logger = spdlog::default_logger()) log_route_ = std::make_unique<LogRoute>(*this, logger);
  }
}

void Progress::step(size_t done, size_t total, std::string_view label) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensure_configured_locked();
  if (options_.mode == ProgressMode::kSilent) return;
  status_ = "[" + std::to_string(done) + "/" + std::to_string(total) + "] ";
  status_.append(label);
  if (options_.mode == ProgressMode::kTerminal) {
    draw_locked();
  } else {
    std::string line;
    const size_t counter_end = status_.find(' ');
    if (options_.color) {
      line.append(kCounterColor).append(status_, 0, counter_end).append(kResetColor).append(status_, counter_end);
    } else {
      line = status_;
    }
    line.push_back('\n');
    write_locked(line);
  }
}

size_t Progress::next(std::string_view label) {
  size_t number;
  size_t total;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    number = ++counter_;
    if (total_ < counter_) total_ = counter_;
    total = total_;
  }
  step(number, total, label);
  return number;
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (depth_ > 1) {
    --depth_;
    return;
  }
  depth_ = 0;
  if (status_visible_) {
    write_locked("\n");
    status_visible_ = false;
  }
  if (log_route_) {
    log_route_->restore();
    log_route_.reset();
  }
  running_ = false;
  total_ = 0;
  counter_ = 0;
  status_.clear();
}

void Progress::print_above(std::string_view text) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensure_configured_locked();
  erase_locked();
  std::string block(text);
  if (!block.empty() && block.back() != '\n') block.push_back('\n');
  write_locked(block);
  draw_locked();
}

size_t Progress::width_locked() {
  if (options_.width != 0) return options_.width;
  struct winsize size {};
  if (::ioctl(fileno(options_.out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

void Progress::draw_locked() {
  if (options_.mode != ProgressMode::kTerminal || status_.empty()) return;
  // Writing into the last column makes some terminals wrap, which would turn
  // every redraw into a new line; stay one column short.
  const size_t width = width_locked();
  const std::string shown = elide_middle(status_, width > 1 ? width - 1 : width);
  std::string bytes(kEraseLine);
  const size_t counter_end = shown.find(' ');
  if (options_.color && counter_end != std::string::npos && shown[0] == '[') {
    bytes.append(kCounterColor).append(shown, 0, counter_end).append(kResetColor).append(shown, counter_end);
  } else {
    bytes.append(shown);
  }
  write_locked(bytes);
  status_visible_ = true;
}

void Progress::erase_locked() {
  if (!status_visible_) return;
  write_locked(kEraseLine);
  status_visible_ = false;
}

void Progress::write_locked(std::string_view bytes) {
  std::fwrite(bytes.data(), 1, bytes.size(), options_.out);
  std::fflush(options_.out);
}

}  // namespace tvmffi_jit::util
