// Build progress on stderr, the way ninja shows it.
//
//   smart terminal (isatty(2) and TERM != dumb): one status line, rewritten in
//                    place with "\r...\x1b[K" and elided in the middle to fit the width;
//   anything else:   one plain line per step ("[3/7] nvcc kernel.cu");
//   -q:              nothing.
//
// stdout is never touched: it carries results only. While a status line is on
// screen, log records (spdlog) are routed through the progress object so they
// erase the status line, print on their own line and redraw it, instead of
// being glued onto the end of "[3/7] nvcc kernel.cu".
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tvmffi_jit::util {

enum class ProgressMode {
  kSilent,    // -q: no progress at all
  kLines,     // stderr is not a smart terminal: one line per step
  kTerminal,  // one status line rewritten in place
};

// How output to one stream should look. Decided from the environment once per
// stream; a pure function of its inputs so it can be tested without a tty.
struct TerminalStyle {
  bool smart = false;  // cursor control is safe: a tty whose TERM is not "dumb"
  bool color = false;  // ANSI colour escapes wanted
};

// The variables terminal_style() reads, as the CLI found them in the
// environment it resolved (cli/environment.h); nullopt: unset.
struct TerminalEnvironment {
  std::optional<std::string> term, no_color, clicolor_force, force_color;
};

// ninja's rules: smart = tty && TERM set and != "dumb";
// colour defaults to `smart`; NO_COLOR (set, non-empty, != "0") disables it;
// CLICOLOR_FORCE (set, != "0") forces it unless NO_COLOR; FORCE_COLOR (set, != "0")
// forces it even over NO_COLOR. Null pointers mean "variable unset".
TerminalStyle terminal_style(bool is_tty, const char* term, const char* no_color,
                             const char* clicolor_force, const char* force_color);
// The same, reading isatty(fd).
TerminalStyle terminal_style_for_fd(int fd, const TerminalEnvironment& env);

// "[3/7] nvcc kernel.cu" shortened to at most `width` columns by replacing its
// middle with "...", as ninja's LinePrinter does. width 0 means unlimited.
std::string elide_middle(std::string_view text, size_t width);

class Progress {
 public:
  struct Options {
    ProgressMode mode = ProgressMode::kLines;
    bool color = false;
    std::FILE* out = stderr;
    size_t width = 0;  // terminal columns; 0: ask the terminal (TIOCGWINSZ), 80 if it will not say
  };

  // Mode and colour for stderr from -q and the terminal's variables (see terminal_style).
  static Options options_for_stderr(bool quiet, const TerminalEnvironment& env);

  // The process-wide instance used by the build executor. cli::run()
  // configures it once -q is known, from the environment it resolved; left
  // unconfigured (a library caller), its first start() takes
  // options_for_stderr(log_quiet(), {}): plain lines, no colour.
  static Progress& global();

  explicit Progress(Options options);
  Progress();  // unconfigured: takes options_for_stderr(log_quiet(), {}) at start()
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void configure(Options options);
  ProgressMode mode() const;

  // A run of `total` steps begins. In terminal mode this also routes spdlog's
  // records through print_above() until finish(). Runs nest: a start() inside
  // a run keeps the outer total and numbering, and only the outermost
  // finish() ends the run, so the caller that knows the whole count sets it.
  void start(size_t total);
  // Shows "[done/total] label". Callable from any thread.
  void step(size_t done, size_t total, std::string_view label);
  // Counts one more step of the current run and shows it; returns its number.
  size_t next(std::string_view label);
  // Ends the run (the outermost one, see start()): a status line on screen is
  // ended with a newline (it stays visible, as ninja leaves its last line) and
  // logging goes back to stderr. Safe to call without start().
  void finish();

  // Writes `text` (one or more lines) to the progress stream on lines of its
  // own; in terminal mode the status line is erased first and redrawn after.
  // Use this for compiler output printed during a run.
  void print_above(std::string_view text);

 private:
  struct LogRoute;
  void ensure_configured_locked();
  void draw_locked();
  void erase_locked();
  size_t width_locked();
  void write_locked(std::string_view bytes);

  mutable std::mutex mutex_;
  bool configured_ = false;
  Options options_;
  bool running_ = false;
  size_t total_ = 0;
  size_t counter_ = 0;
  int depth_ = 0;               // nesting of start()/finish()
  std::string status_;          // last status text (without escapes)
  bool status_visible_ = false; // terminal mode: the status line is on screen
  std::unique_ptr<LogRoute> log_route_;
};

// start() on construction, finish() on destruction (also when a step throws),
// on Progress::global().
class ProgressScope {
 public:
  explicit ProgressScope(size_t total) { Progress::global().start(total); }
  ~ProgressScope() { Progress::global().finish(); }
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;
};

}  // namespace tvmffi_jit::util
