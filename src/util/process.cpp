#include "tvmffi_jit/util/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/strings.h"

extern char** environ;

namespace tvmffi_jit::util {

namespace {

using Clock = std::chrono::steady_clock;

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fd, O_CLOEXEC) != 0) {
      int e = errno;
      throw io_error(errno_message("pipe", e));
    }
  }
  ~Pipe() {
    close_read();
    close_write();
  }
  void close_read() {
    if (fd[0] >= 0) ::close(fd[0]);
    fd[0] = -1;
  }
  void close_write() {
    if (fd[1] >= 0) ::close(fd[1]);
    fd[1] = -1;
  }
};

std::vector<std::string> build_environment(const ProcessOptions& o) {
  std::map<std::string, std::string> env;
  std::vector<std::string> order;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string k = kv.substr(0, eq);
    if (!env.count(k)) order.push_back(k);
    env[k] = kv.substr(eq + 1);
  }
  for (const auto& k : o.unset_env) env.erase(k);
  for (const auto& [k, v] : o.env) {
    if (!env.count(k)) order.push_back(k);
    env[k] = v;
  }
  std::vector<std::string> out;
  for (const auto& k : order) {
    auto it = env.find(k);
    if (it != env.end()) out.push_back(k + "=" + it->second);
  }
  return out;
}

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    default: return "signal " + std::to_string(sig);
  }
}

std::string ProcessResult::status_text() const {
  if (timed_out) return "timed out after " + std::to_string(static_cast<long>(seconds)) + " s";
  if (term_signal) return "killed by " + signal_name(term_signal);
  return "exit status " + std::to_string(exit_code);
}

std::optional<std::string> find_program(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  for (const auto& dir : split_any(path ? path : "/usr/bin:/bin", ":")) {
    std::string cand = dir + "/" + name;
    struct stat st;
    if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0) return cand;
  }
  return std::nullopt;
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw usage_error("internal: empty command");
  auto resolved = find_program(argv[0]);
  if (!resolved) throw missing_tool_error("cannot run '" + argv[0] + "': not found (looked on PATH)");

  Pipe out_pipe, err_pipe, in_pipe;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe.fd[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe.fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa, options.merge_stderr ? out_pipe.fd[1] : err_pipe.fd[1], 2);
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, options.cwd.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);  // own group: a timeout kills the whole tree
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<std::string> envs = build_environment(options);
  std::vector<char*> cenv;
  for (auto& e : envs) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  auto start = Clock::now();
  pid_t pid = -1;
  int rc = posix_spawn(&pid, resolved->c_str(), &fa, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  // E2BIG is the command line's fault (too many or too long flags), not a missing tool.
  if (rc == E2BIG)
    throw usage_error(errno_message("cannot run " + *resolved, rc) +
                      ": the command line is longer than the system allows; put flags in a response file (@file)");
  if (rc != 0) throw missing_tool_error(errno_message("cannot run " + *resolved, rc));

  in_pipe.close_read();
  out_pipe.close_write();
  err_pipe.close_write();
  if (options.merge_stderr) err_pipe.close_read();

  ProcessResult result;
  size_t stdin_written = 0;
  if (options.stdin_data.empty()) in_pipe.close_write();
  else ::fcntl(in_pipe.fd[1], F_SETFL, O_NONBLOCK);

  bool killed_for_timeout = false;
  char buf[65536];
  while (out_pipe.fd[0] >= 0 || err_pipe.fd[0] >= 0 || in_pipe.fd[1] >= 0) {
    pollfd fds[3];
    int n = 0;
    int out_i = -1, err_i = -1, in_i = -1;
    if (out_pipe.fd[0] >= 0) { fds[n] = {out_pipe.fd[0], POLLIN, 0}; out_i = n++; }
    if (err_pipe.fd[0] >= 0) { fds[n] = {err_pipe.fd[0], POLLIN, 0}; err_i = n++; }
    if (in_pipe.fd[1] >= 0) { fds[n] = {in_pipe.fd[1], POLLOUT, 0}; in_i = n++; }
    int wait_ms = -1;
    if (options.timeout_seconds && !killed_for_timeout) {
      double left = *options.timeout_seconds - std::chrono::duration<double>(Clock::now() - start).count();
      if (left <= 0) {
        ::kill(-pid, SIGKILL);
        killed_for_timeout = true;
        result.timed_out = true;
        continue;
      }
      wait_ms = static_cast<int>(left * 1000) + 1;
    }
    int pr = ::poll(fds, static_cast<nfds_t>(n), wait_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      break;
    }
    auto drain = [&](int idx, Pipe& p, std::string& sink) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
      ssize_t r = ::read(p.fd[0], buf, sizeof buf);
      if (r > 0) sink.append(buf, static_cast<size_t>(r));
      else if (r == 0 || (errno != EINTR && errno != EAGAIN)) p.close_read();
    };
    drain(out_i, out_pipe, result.out);
    drain(err_i, err_pipe, result.err);
    if (in_i >= 0 && (fds[in_i].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w = ::write(in_pipe.fd[1], options.stdin_data.data() + stdin_written,
                          options.stdin_data.size() - stdin_written);
      if (w > 0) stdin_written += static_cast<size_t>(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) in_pipe.close_write();
      if (stdin_written >= options.stdin_data.size()) in_pipe.close_write();
    }
  }

  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, 0);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  if (result.timed_out) result.term_signal = 0;
  return result;
}

}  // namespace tvmffi_jit::util
