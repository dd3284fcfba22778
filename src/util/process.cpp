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
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <mutex>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/expected.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/strings.h"
#include "util/child_slot.h"

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

namespace {

// The child's three pipes; the parent keeps the ends it reads and writes.
struct ChildPipes {
  Pipe out, err, in;

  void close_child_ends(const ProcessOptions& options) {
    in.close_read();
    out.close_write();
    err.close_write();
    if (options.merge_stderr) err.close_read();
    if (options.stdin_data.empty()) in.close_write();
    else ::fcntl(in.fd[1], F_SETFL, O_NONBLOCK);
  }
  bool open() const { return out.fd[0] >= 0 || err.fd[0] >= 0 || in.fd[1] >= 0; }
};

// posix_spawn's file actions and attributes for one child, destroyed with it:
// the pipes on fds 0-2, the working directory, an empty signal mask, default
// dispositions and a process group of its own.
class SpawnSetup {
 public:
  SpawnSetup(ChildPipes& pipes, const ProcessOptions& options) {
    posix_spawn_file_actions_init(&actions_);
    posix_spawn_file_actions_adddup2(&actions_, pipes.in.fd[0], 0);
    posix_spawn_file_actions_adddup2(&actions_, pipes.out.fd[1], 1);
    posix_spawn_file_actions_adddup2(&actions_, options.merge_stderr ? pipes.out.fd[1] : pipes.err.fd[1], 2);
    if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions_, options.cwd.c_str());

    posix_spawnattr_init(&attr_);
    sigset_t empty, all;
    sigemptyset(&empty);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setsigmask(&attr_, &empty);
    posix_spawnattr_setsigdefault(&attr_, &all);
    posix_spawnattr_setpgroup(&attr_, 0);  // own group: a timeout kills the whole tree
    posix_spawnattr_setflags(&attr_, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions_);
    posix_spawnattr_destroy(&attr_);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;
  const posix_spawn_file_actions_t* actions() const { return &actions_; }
  const posix_spawnattr_t* attr() const { return &attr_; }

 private:
  posix_spawn_file_actions_t actions_;
  posix_spawnattr_t attr_;
};

ProcessResult not_started(std::string why) {
  ProcessResult r;
  r.not_started = std::move(why);
  return r;
}

// Starts `program` with argv and the environment the options ask for. A
// failure is returned only when the options make it a result; else thrown.
Expected<pid_t> spawn_child(const std::string& program, const std::vector<std::string>& argv,
                            const ProcessOptions& options, ChildPipes& pipes) {
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<std::string> envs = build_environment(options);
  std::vector<char*> cenv;
  for (auto& e : envs) cenv.push_back(e.data());
  cenv.push_back(nullptr);

  pid_t pid = -1;
  int rc;
  {
    SpawnSetup setup(pipes, options);
    rc = posix_spawn(&pid, program.c_str(), setup.actions(), setup.attr(), cargv.data(), cenv.data());
  }
  // E2BIG is the command line's fault (too many or too long flags), not a missing tool.
  if (rc == E2BIG)
    throw usage_error(errno_message("cannot run " + program, rc) +
                      ": the command line is longer than the system allows; put flags in a response file (@file)");
  if (rc != 0 && options.not_started_is_result) return Unexpected{errno_message("cannot run " + program, rc)};
  if (rc != 0) throw missing_tool_error(errno_message("cannot run " + program, rc));
  return pid;
}

// A running child as its waits see it: its pid, a pidfd readable when it
// exits (Linux >= 5.3; without one the reaper polls with a short backoff, so
// reaping never sleeps on a guess), and how a termination signal stops it:
// the signal went (or goes, in notice_termination) to the child's group;
// after the grace period the group gets SIGKILL.
class WatchedChild {
 public:
  explicit WatchedChild(pid_t pid) : pid_(pid), pidfd_(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))) {}
  ~WatchedChild() {
    if (pidfd_ >= 0) ::close(pidfd_);
  }
  WatchedChild(const WatchedChild&) = delete;
  WatchedChild& operator=(const WatchedChild&) = delete;

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_; }

  // Both steps of a termination signal's stop, as each wait comes round.
  void stop_if_terminating() {
    notice_termination();
    kill_group_when_due();
  }
  // Milliseconds until the group must be killed, capping a poll timeout.
  int cap_wait(int wait_ms) const {
    if (!stopping_ || group_killed_) return wait_ms;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kill_group_at_ - Clock::now()).count();
    int due = static_cast<int>(std::max<long long>(0, left)) + 1;
    return wait_ms < 0 ? due : std::min(wait_ms, due);
  }
  // Whether a wait should also wake on the wake pipe (no signal seen yet).
  bool wants_wake_pipe() const { return !stopping_ && termination_wake_fd() >= 0; }

 private:
  void notice_termination() {
    if (stopping_ || termination_signal() == 0) return;
    ::kill(-pid_, termination_signal());  // again, in case the handler ran before slot.set()
    stopping_ = true;
    kill_group_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(kTerminationGraceSeconds));
  }
  void kill_group_when_due() {
    if (stopping_ && !group_killed_ && Clock::now() >= kill_group_at_) {
      ::kill(-pid_, SIGKILL);
      group_killed_ = true;
    }
  }

  pid_t pid_;
  int pidfd_;
  bool stopping_ = false;              // a termination signal was noticed
  Clock::time_point kill_group_at_{};  // when stopping_: the end of the grace period
  bool group_killed_ = false;
};

// One round of poll over the open pipes (and the wake pipe): which slot each is in.
struct PipePoll {
  pollfd fds[4];
  int n = 0;
  int out = -1, err = -1, in = -1;

  PipePoll(const ChildPipes& pipes, const WatchedChild& child) {
    if (pipes.out.fd[0] >= 0) { fds[n] = {pipes.out.fd[0], POLLIN, 0}; out = n++; }
    if (pipes.err.fd[0] >= 0) { fds[n] = {pipes.err.fd[0], POLLIN, 0}; err = n++; }
    if (pipes.in.fd[1] >= 0) { fds[n] = {pipes.in.fd[1], POLLOUT, 0}; in = n++; }
    if (child.wants_wake_pipe()) fds[n++] = {termination_wake_fd(), POLLIN, 0};
  }
  bool ready(int idx, short events) const { return idx >= 0 && (fds[idx].revents & events); }
};

// Appends what the pipe has to `sink`; closes it at EOF or when it broke.
void drain_pipe(Pipe& p, std::string& sink) {
  char buf[65536];
  auto r = read_some(p.fd[0], buf, sizeof buf);
  if (r && *r > 0) sink.append(buf, *r);
  else if (r || r.error().kind != std::errc::resource_unavailable_try_again) p.close_read();  // EOF or broken
}

// Writes what the pipe takes of the rest of stdin_data; closes it when done or broken.
void feed_stdin(Pipe& in, const std::string& data, size_t& written) {
  // Not write_all: the pipe is non-blocking, a short write is the normal
  // case and the rest goes when poll says there is room.
  ssize_t w = ::write(in.fd[1], data.data() + written, data.size() - written);
  if (w > 0) written += static_cast<size_t>(w);
  if (w < 0 && errno != EAGAIN && errno != EINTR) in.close_write();
  if (written >= data.size()) in.close_write();
}

// Feeds the child's stdin and reads its stdout and stderr until every pipe
// is closed, killing its group when the timeout passes (result.timed_out).
void exchange_with_child(WatchedChild& child, ChildPipes& pipes, const ProcessOptions& options,
                         Clock::time_point start, ProcessResult& result) {
  size_t stdin_written = 0;
  bool killed_for_timeout = false;
  while (pipes.open()) {
    child.stop_if_terminating();
    PipePoll polled(pipes, child);
    int wait_ms = -1;
    if (options.timeout_seconds && !killed_for_timeout) {
      double left = *options.timeout_seconds - std::chrono::duration<double>(Clock::now() - start).count();
      if (left <= 0) {
        ::kill(-child.pid(), SIGKILL);
        killed_for_timeout = true;
        result.timed_out = true;
        continue;
      }
      wait_ms = static_cast<int>(left * 1000) + 1;
    }
    int pr = ::poll(polled.fds, static_cast<nfds_t>(polled.n), child.cap_wait(wait_ms));
    if (pr < 0) {
      if (errno == EINTR) continue;
      break;
    }
    constexpr short kReadable = POLLIN | POLLHUP | POLLERR;
    if (polled.ready(polled.out, kReadable)) drain_pipe(pipes.out, result.out);
    if (polled.ready(polled.err, kReadable)) drain_pipe(pipes.err, result.err);
    if (polled.ready(polled.in, POLLOUT | POLLERR | POLLHUP)) feed_stdin(pipes.in, options.stdin_data, stdin_written);
  }
}

struct Reaped {
  int status = 0;
  // wait4: the child's CPU time and peak RSS (its waited-for descendants
  // included) come with its status, for the job trace and the memory gate.
  struct rusage usage {};
};

// The pipes are closed; the child is exiting (or closed them and runs on).
// Waits for its exit together with the wake pipe rather than block in
// waitpid, so a termination signal still gets its grace period and SIGKILL.
Reaped reap_child(WatchedChild& child) {
  Reaped reaped;
  for (int backoff_ms = 1;; backoff_ms = std::min(backoff_ms * 2, 50)) {
    pid_t w = ::wait4(child.pid(), &reaped.status, WNOHANG, &reaped.usage);
    if (w == child.pid()) break;
    if (w < 0 && errno != EINTR) break;
    child.stop_if_terminating();
    pollfd fds[2];
    int n = 0;
    if (child.pidfd() >= 0) fds[n++] = {child.pidfd(), POLLIN, 0};
    if (child.wants_wake_pipe()) fds[n++] = {termination_wake_fd(), POLLIN, 0};
    ::poll(fds, static_cast<nfds_t>(n), child.cap_wait(child.pidfd() >= 0 ? -1 : backoff_ms));
  }
  return reaped;
}

void record_exit(const Reaped& reaped, Clock::time_point start, ProcessResult& result) {
  const struct rusage& usage = reaped.usage;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  result.max_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
  if (WIFEXITED(reaped.status)) result.exit_code = WEXITSTATUS(reaped.status);
  if (WIFSIGNALED(reaped.status)) result.term_signal = WTERMSIG(reaped.status);
  if (result.timed_out) result.term_signal = 0;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw usage_error("internal: empty command");
  check_termination();
  auto resolved = find_program(argv[0]);
  if (!resolved) {
    std::string why = "cannot run '" + argv[0] + "': not found (looked on PATH)";
    if (!options.not_started_is_result) throw missing_tool_error(why);
    return not_started(std::move(why));
  }
  ChildPipes pipes;
  ChildSlot slot;
  const auto start = Clock::now();
  auto pid = spawn_child(*resolved, argv, options, pipes);
  if (!pid) return not_started(pid.why());
  slot.set(*pid);  // posix_spawn returns after the child's setpgid: the group exists
  WatchedChild child(*pid);
  pipes.close_child_ends(options);

  ProcessResult result;
  exchange_with_child(child, pipes, options, start, result);
  const Reaped reaped = reap_child(child);
  if (termination_signal() != 0) {
    ::kill(-child.pid(), SIGKILL);  // whatever of its group survived the child (a grandchild that closed its pipes)
    throw termination_error();
  }
  record_exit(reaped, start, result);
  return result;
}

}  // namespace tvmffi_jit::util
