// The one place that starts processes: posix_spawn with an argv, never a shell.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::util {

struct ProcessOptions {
  std::string cwd;                                       // empty: inherit
  std::vector<std::pair<std::string, std::string>> env;  // set (or override) these variables
  std::vector<std::string> unset_env;                    // remove these variables
  bool merge_stderr = false;                             // stderr into `out`, in order
  std::optional<double> timeout_seconds;                 // kill the process group after this
  std::string stdin_data;                                // fed to the child's stdin (else /dev/null)
};

struct ProcessResult {
  int exit_code = -1;    // valid when exited normally
  int term_signal = 0;   // non-zero when killed by a signal
  bool timed_out = false;
  std::string out;
  std::string err;
  double seconds = 0;
  double cpu_seconds = 0;      // user + system of the child and the descendants it waited for
  uint64_t max_rss_bytes = 0;  // the largest resident set among them (not their sum)
  bool ok() const { return term_signal == 0 && !timed_out && exit_code == 0; }
  // "exit status 1", "killed by signal SIGSEGV", "timed out after 60 s"
  std::string status_text() const;
};

// Runs argv[0] (searched on PATH when it has no '/') and waits for it. The
// child runs in its own process group, with default signal dispositions, so a
// timeout kills the compiler and everything it started. Throws Error(kMissingTool)
// if the program cannot be started, and the termination error (below) when a
// termination signal arrives before or while it runs.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// Termination signals: SIGINT, SIGTERM, SIGHUP.
//
// Children run in process groups of their own (a timeout must reach the whole
// tree), so a terminal's Ctrl-C reaches only this process: without help the
// compilers would run on after it died. install_termination_handlers() (once,
// at start-up) makes each of these signals
//   * forward itself to the process group of every running child (a second
//     signal forwards SIGKILL), and
//   * end this process: at once, by the signal's default action, unless an
//     UnwindOnTermination is alive; then run_process() stops its child (the
//     signal, SIGKILL to the group after kTerminationGraceSeconds, SIGKILL to
//     whatever of the group is left once the child is reaped) and throws
//     termination_error(), so destructors remove staging and temp dirs on the
//     way out, and cli::run() exits 128 + the signal (130, 143, 129).
// It also ignores SIGPIPE: a write to a closed socket or pipe fails with
// EPIPE, which the writer reports, instead of killing the process.
void install_termination_handlers();

// While one is alive, a termination signal unwinds (see above) instead of
// ending the process at once. For commands whose callers check
// termination_signal() or call run_process() often enough.
class UnwindOnTermination {
 public:
  UnwindOnTermination();
  ~UnwindOnTermination();
  UnwindOnTermination(const UnwindOnTermination&) = delete;
  UnwindOnTermination& operator=(const UnwindOnTermination&) = delete;
};

inline constexpr double kTerminationGraceSeconds = 2;

// The first termination signal received, or 0.
int termination_signal();
// Error with exit code 128 + termination_signal() ("interrupted by SIGINT").
Error termination_error();
// Throws termination_error() if a termination signal has arrived.
void check_termination();
// A descriptor that becomes readable (and stays so) at the first termination
// signal, for loops that wait in poll() on something else (network
// transfers): poll it too, then check_termination(). -1 before
// install_termination_handlers().
int termination_wake_fd();

// PATH lookup (like execvp) in the search path set below; nullopt if not
// found or not executable.
std::optional<std::string> find_program(const std::string& name);

// The directories find_program() and run_process() search, as PATH spells
// them ("/usr/local/bin:/usr/bin"). The CLI sets it once from the
// environment it resolved (cli/environment.h) before any command runs;
// nullopt (PATH unset, and the value before it is set) searches
// /usr/bin:/bin, as execvp does. Children still inherit this process's own
// environment, PATH included: this is only where programs are looked up.
void set_program_search_path(std::optional<std::string> path);

// Bytes this process's environment takes in a child's (its strings, their
// NULs and the pointers): the part of ARG_MAX a command line cannot use.
uint64_t child_environment_bytes();

std::string signal_name(int sig);

}  // namespace tvmffi_jit::util
