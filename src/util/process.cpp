#include "tvmffi_jit/util/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <mutex>
#include <thread>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
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

// --- termination signals ---------------------------------------------------
// Everything the handler touches is a lock-free atomic or a plain fd, and it
// calls only async-signal-safe functions (kill, write, sigaction, raise).

// Process groups of running children (a child's pgid is its pid): 0 free,
// -1 reserved by a run_process() about to spawn. Fixed size: the handler
// cannot allocate or lock.
constexpr size_t kMaxChildren = 1024;
std::atomic<pid_t> g_children[kMaxChildren];
std::atomic<int> g_signal{0};      // the first termination signal
std::atomic<int> g_unwinders{0};   // live UnwindOnTermination objects
// Written once per signal, never drained: readable from the first signal on,
// so every run_process() waiting in poll() wakes up, on whatever thread.
int g_wake_pipe[2] = {-1, -1};
constexpr int kTerminationSignals[] = {SIGINT, SIGTERM, SIGHUP};

void on_termination(int sig) {
  const int saved_errno = errno;
  int expected = 0;
  const bool first = g_signal.compare_exchange_strong(expected, sig);
  const int forward = first ? sig : SIGKILL;  // asked twice: no more patience
  for (auto& slot : g_children) {
    pid_t group = slot.load();
    if (group > 0) ::kill(-group, forward);
  }
  if (g_wake_pipe[1] >= 0) {
    char byte = 1;
    ssize_t ignored = ::write(g_wake_pipe[1], &byte, 1);
    (void)ignored;
  }
  if (g_unwinders.load() == 0) {
    // Nobody will unwind: end now, as the default action would have.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(sig, &dfl, nullptr);
    ::raise(sig);  // delivered when this handler returns
  }
  errno = saved_errno;
}

// One slot of g_children for the life of one child.
class ChildSlot {
 public:
  ChildSlot() {
    for (;;) {
      for (auto& slot : g_children) {
        pid_t free = 0;
        if (slot.compare_exchange_strong(free, -1)) {
          slot_ = &slot;
          return;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // > kMaxChildren at once: wait for one to end
    }
  }
  ~ChildSlot() { slot_->store(0); }
  ChildSlot(const ChildSlot&) = delete;
  ChildSlot& operator=(const ChildSlot&) = delete;
  // From here on a termination signal is forwarded to `group`. A signal that
  // arrived before this store was not: the caller checks g_signal after it.
  void set(pid_t group) { slot_->store(group); }

 private:
  std::atomic<pid_t>* slot_ = nullptr;
};

}  // namespace

void install_termination_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (::pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_wake_pipe[0] = g_wake_pipe[1] = -1;
    struct sigaction sa {};
    sa.sa_handler = on_termination;
    sa.sa_flags = SA_RESTART;  // the wake pipe interrupts the waits that matter
    sigemptyset(&sa.sa_mask);
    for (int sig : kTerminationSignals) sigaddset(&sa.sa_mask, sig);
    for (int sig : kTerminationSignals) {
      struct sigaction old {};
      ::sigaction(sig, nullptr, &old);
      if (old.sa_handler == SIG_IGN) continue;  // nohup, or a background job's SIGINT: stay ignored
      ::sigaction(sig, &sa, nullptr);
    }
    // A peer that goes away (a Redis server killed mid-upload, a probe child
    // that died before reading its stdin, a closed stdout) is an EPIPE for the
    // code that wrote, which reports it; by default it would kill the whole
    // build, module published or not, with nothing printed. Children get the
    // default back (run_process resets every disposition).
    ::signal(SIGPIPE, SIG_IGN);
  });
}

int termination_wake_fd() { return g_wake_pipe[0]; }

UnwindOnTermination::UnwindOnTermination() { g_unwinders.fetch_add(1); }
UnwindOnTermination::~UnwindOnTermination() { g_unwinders.fetch_sub(1); }

int termination_signal() { return g_signal.load(); }

Error termination_error() {
  const int sig = g_signal.load();
  return Error(static_cast<ExitCode>(128 + sig), "interrupted by " + signal_name(sig));
}

void check_termination() {
  if (g_signal.load() != 0) throw termination_error();
}

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
    case SIGHUP: return "SIGHUP";
    case SIGPIPE: return "SIGPIPE";
    case SIGTRAP: return "SIGTRAP";
    default: return "signal " + std::to_string(sig);
  }
}

std::string ProcessResult::status_text() const {
  if (!not_started.empty()) return not_started;
  if (timed_out) return "timed out after " + std::to_string(static_cast<long>(seconds)) + " s";
  if (term_signal) return "killed by " + signal_name(term_signal);
  return "exit status " + std::to_string(exit_code);
}

namespace {
// Set once by the CLI before any command runs; read by every thread that spawns.
std::mutex search_path_mutex;
std::optional<std::string> search_path;

std::string program_search_path() {
  std::lock_guard<std::mutex> lock(search_path_mutex);
  return search_path.value_or("/usr/bin:/bin");
}
}  // namespace

void set_program_search_path(std::optional<std::string> path) {
  std::lock_guard<std::mutex> lock(search_path_mutex);
  search_path = std::move(path);
}

uint64_t child_environment_bytes() {
  uint64_t n = 0;
  for (char** e = environ; e && *e; ++e) n += std::strlen(*e) + 1 + sizeof(char*);
  return n;
}

std::optional<std::string> find_program(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    return std::nullopt;
  }
  for (const auto& dir : split_any(program_search_path(), ":")) {
    std::string cand = dir + "/" + name;
    struct stat st;
    if (::stat(cand.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(cand.c_str(), X_OK) == 0) return cand;
  }
  return std::nullopt;
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw usage_error("internal: empty command");
  check_termination();
  auto resolved = find_program(argv[0]);
  if (!resolved) {
    std::string why = "cannot run '" + argv[0] + "': not found (looked on PATH)";
    if (!options.not_started_is_result) throw missing_tool_error(why);
    ProcessResult r;
    r.not_started = std::move(why);
    return r;
  }

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

  ChildSlot slot;
  auto start = Clock::now();
  pid_t pid = -1;
  int rc = posix_spawn(&pid, resolved->c_str(), &fa, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  // E2BIG is the command line's fault (too many or too long flags), not a missing tool.
  if (rc == E2BIG)
    throw usage_error(errno_message("cannot run " + *resolved, rc) +
                      ": the command line is longer than the system allows; put flags in a response file (@file)");
  if (rc != 0 && options.not_started_is_result) {
    ProcessResult r;
    r.not_started = errno_message("cannot run " + *resolved, rc);
    return r;
  }
  if (rc != 0) throw missing_tool_error(errno_message("cannot run " + *resolved, rc));
  slot.set(pid);  // posix_spawn returns after the child's setpgid: the group exists
  // Readable when the child exits, so reaping never sleeps on a guess
  // (Linux >= 5.3; without it the reaper polls with a short backoff).
  struct PidFd {
    int fd;
    ~PidFd() {
      if (fd >= 0) ::close(fd);
    }
  } pidfd{static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))};

  // Termination: the signal went (or goes, below) to the child's group; after
  // the grace period the group gets SIGKILL.
  std::optional<Clock::time_point> kill_group_at;
  bool group_killed = false;
  auto notice_termination = [&] {
    if (kill_group_at || g_signal.load() == 0) return;
    ::kill(-pid, g_signal.load());  // again, in case the handler ran before slot.set()
    kill_group_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(kTerminationGraceSeconds));
  };
  auto kill_group_when_due = [&] {
    if (kill_group_at && !group_killed && Clock::now() >= *kill_group_at) {
      ::kill(-pid, SIGKILL);
      group_killed = true;
    }
  };
  // Milliseconds until the group must be killed, capping a poll timeout.
  auto cap_wait = [&](int wait_ms) {
    if (!kill_group_at || group_killed) return wait_ms;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*kill_group_at - Clock::now()).count();
    int due = static_cast<int>(std::max<long long>(0, left)) + 1;
    return wait_ms < 0 ? due : std::min(wait_ms, due);
  };

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
    notice_termination();
    kill_group_when_due();
    pollfd fds[4];
    int n = 0;
    int out_i = -1, err_i = -1, in_i = -1;
    if (out_pipe.fd[0] >= 0) { fds[n] = {out_pipe.fd[0], POLLIN, 0}; out_i = n++; }
    if (err_pipe.fd[0] >= 0) { fds[n] = {err_pipe.fd[0], POLLIN, 0}; err_i = n++; }
    if (in_pipe.fd[1] >= 0) { fds[n] = {in_pipe.fd[1], POLLOUT, 0}; in_i = n++; }
    if (!kill_group_at && g_wake_pipe[0] >= 0) fds[n++] = {g_wake_pipe[0], POLLIN, 0};
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
    int pr = ::poll(fds, static_cast<nfds_t>(n), cap_wait(wait_ms));
    if (pr < 0) {
      if (errno == EINTR) continue;
      break;
    }
    auto drain = [&](int idx, Pipe& p, std::string& sink) {
      if (idx < 0 || !(fds[idx].revents & (POLLIN | POLLHUP | POLLERR))) return;
      auto r = read_some(p.fd[0], buf, sizeof buf);
      if (r && *r > 0) sink.append(buf, *r);
      else if (r || r.error().kind != std::errc::resource_unavailable_try_again) p.close_read();  // EOF or broken
    };
    drain(out_i, out_pipe, result.out);
    drain(err_i, err_pipe, result.err);
    if (in_i >= 0 && (fds[in_i].revents & (POLLOUT | POLLERR | POLLHUP))) {
      // Not write_all: the pipe is non-blocking, a short write is the normal
      // case and the rest goes when poll says there is room.
      ssize_t w = ::write(in_pipe.fd[1], options.stdin_data.data() + stdin_written,
                          options.stdin_data.size() - stdin_written);
      if (w > 0) stdin_written += static_cast<size_t>(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) in_pipe.close_write();
      if (stdin_written >= options.stdin_data.size()) in_pipe.close_write();
    }
  }

  // The pipes are closed; the child is exiting (or closed them and runs on).
  // Wait for its exit together with the wake pipe rather than block in
  // waitpid, so a termination signal still gets its grace period and SIGKILL.
  int status = 0;
  // wait4: the child's CPU time and peak RSS (its waited-for descendants
  // included) come with its status, for the job trace and the memory gate.
  struct rusage usage {};
  for (int backoff_ms = 1;; backoff_ms = std::min(backoff_ms * 2, 50)) {
    pid_t w = ::wait4(pid, &status, WNOHANG, &usage);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    notice_termination();
    kill_group_when_due();
    pollfd fds[2];
    int n = 0;
    if (pidfd.fd >= 0) fds[n++] = {pidfd.fd, POLLIN, 0};
    if (!kill_group_at && g_wake_pipe[0] >= 0) fds[n++] = {g_wake_pipe[0], POLLIN, 0};
    ::poll(fds, static_cast<nfds_t>(n), cap_wait(pidfd.fd >= 0 ? -1 : backoff_ms));
  }
  if (g_signal.load() != 0) {
    ::kill(-pid, SIGKILL);  // whatever of its group survived the child (a grandchild that closed its pipes)
    throw termination_error();
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  result.max_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  if (result.timed_out) result.term_signal = 0;
  return result;
}

}  // namespace tvmffi_jit::util
