// Termination signals (SIGINT, SIGTERM, SIGHUP): forwarded to every running
// child's process group, then the end of this process or, under an
// UnwindOnTermination, an Error thrown by the waits (util/process.h).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/process.h"
#include "util/child_slot.h"

namespace tvmffi_jit::util {

namespace {

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

}  // namespace

ChildSlot::ChildSlot() {
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

ChildSlot::~ChildSlot() { slot_->store(0); }

void ChildSlot::set(pid_t group) { slot_->store(group); }


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

}  // namespace tvmffi_jit::util
