// The one place that starts processes: posix_spawn with an argv, never a shell.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

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
  bool ok() const { return term_signal == 0 && !timed_out && exit_code == 0; }
  // "exit status 1", "killed by signal SIGSEGV", "timed out after 60 s"
  std::string status_text() const;
};

// Runs argv[0] (searched on PATH when it has no '/') and waits for it. The
// child runs in its own process group, with default signal dispositions, so a
// timeout kills the compiler and everything it started. Throws Error(kMissingTool)
// if the program cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

// PATH lookup (like execvp); nullopt if not found or not executable.
std::optional<std::string> find_program(const std::string& name);

std::string signal_name(int sig);

}  // namespace tvmffi_jit::util
