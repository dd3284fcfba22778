#include "tvmffi_jit/util/change_watch.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <mutex>

#include "tvmffi_jit/util/stamp.h"

namespace tvmffi_jit::util {

namespace {

// Directories: names only (see the header). Files: content and metadata.
constexpr uint32_t kDirectoryMask =
    IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW;
constexpr uint32_t kFileMask = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW;

std::string parent_of(const std::string& real_dir) {
  const auto slash = real_dir.find_last_of('/');
  return slash == 0 || slash == std::string::npos ? "/" : real_dir.substr(0, slash);
}

// A symlink's target (at most PATH_MAX bytes), or nullopt.
std::optional<std::string> read_link(const std::string& path) {
  char buf[4096];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

std::deque<std::string> components(const std::string& path) {
  std::deque<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

ChangeWatch& ChangeWatch::global() {
  static ChangeWatch* watch = new ChangeWatch;  // never destroyed: used until exit
  return *watch;
}

ChangeWatch::~ChangeWatch() {
  if (fd_ >= 0) ::close(fd_);
}

void ChangeWatch::enable(bool on) {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  enabled_ = on;
}

bool ChangeWatch::enabled() const {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  return enabled_;
}

size_t ChangeWatch::watch_count() {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  return last_event_.size();
}

void ChangeWatch::reset_locked() {
  // In a forked child this closes only the child's copy of the descriptor:
  // the parent's instance and its queue are untouched.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  last_event_.clear();
  last_named_.clear();
  named_count_ = 0;
  resolved_.clear();
  overflow_seq_ = 0;
  last_any_seq_ = 0;
  out_of_watches_ = false;
  ++instance_;
}

bool ChangeWatch::usable_locked() {
  if (fd_ >= 0 && pid_ != ::getpid()) reset_locked();
  if (fd_ < 0) {
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ < 0) return false;  // out of instances: prove with stats
    pid_ = ::getpid();
    ++instance_;
  }
  return true;
}

void ChangeWatch::drain_locked() {
  alignas(struct inotify_event) char buf[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;  // EAGAIN: the queue is empty
    }
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(struct inotify_event)) <= n;) {
      const auto* ev = reinterpret_cast<const struct inotify_event*>(buf + at);
      const uint64_t seq = ++seq_;
      last_any_seq_ = seq;
      if (ev->mask & IN_Q_OVERFLOW) {
        overflow_seq_ = seq;  // events were lost: nothing can be vouched for
      } else if (ev->len > 0 && ev->name[0] != '\0') {
        if (named_count_ >= kMaxNamedEvents) {  // a busy folder (/tmp): start over
          last_named_.clear();
          named_count_ = 0;
          overflow_seq_ = seq;
        }
        auto [it, added] = last_named_[ev->wd].insert_or_assign(std::string(ev->name), seq);
        (void)it;
        if (added) ++named_count_;
      } else {
        last_event_[ev->wd] = seq;  // IN_IGNORED too: the watch is gone
      }
      at += static_cast<ssize_t>(sizeof(struct inotify_event) + ev->len);
    }
  }
}

bool ChangeWatch::changed_since_locked(const std::vector<Dependency>& depends, uint64_t epoch) const {
  if (last_any_seq_ <= epoch) return false;  // no event at all since: the usual repeated hit, in O(1)
  if (overflow_seq_ > epoch) return true;
  for (const auto& d : depends) {
    auto it = last_event_.find(d.watch);
    if (it == last_event_.end() || it->second > epoch) return true;
    if (d.name.empty()) continue;
    auto in_folder = last_named_.find(d.watch);
    if (in_folder == last_named_.end()) continue;
    auto named = in_folder->second.find(d.name);
    if (named != in_folder->second.end() && named->second > epoch) return true;
  }
  return false;
}

int ChangeWatch::add_locked(const std::string& path, bool directory) {
  if (last_event_.size() >= max_watches_) {
    out_of_watches_ = true;
    return -1;
  }
  const int wd = ::inotify_add_watch(fd_, path.c_str(), directory ? kDirectoryMask : kFileMask);
  if (wd >= 0) {
    last_event_.emplace(wd, 0);  // an existing watch keeps its last event
  } else if (errno == ENOSPC || errno == ENOMEM) {
    // The user's watch limit (many processes watching): asking again on
    // every hit would cost more than the stats it saves.
    out_of_watches_ = true;
  }
  return wd;
}

const ChangeWatch::Resolved* ChangeWatch::resolve_dir_locked(const std::string& dir, std::vector<Dependency>& depends,
                                                             bool& failed) {
  if (auto it = resolved_.find(dir); it != resolved_.end()) {
    if (!changed_since_locked(it->second.depends, it->second.epoch)) {
      depends.insert(depends.end(), it->second.depends.begin(), it->second.depends.end());
      return &it->second;
    }
    resolved_.erase(it);
  }
  Resolved r;
  r.epoch = seq_;
  int cur_wd = -1;
  auto watch_dir = [&](const std::string& d) {
    struct stat st;
    if (::stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !stamps_are_trusted(st, d)) return false;
    cur_wd = add_locked(d, true);
    if (cur_wd < 0) return false;
    r.depends.push_back({cur_wd, ""});
    return true;
  };
  std::string cur = "/";
  if (!watch_dir(cur)) {
    failed = true;
    return nullptr;
  }
  const int root_wd = cur_wd;
  std::deque<std::string> todo = components(dir);
  int links = 0;
  bool complete = true;
  while (!todo.empty()) {
    std::string c = std::move(todo.front());
    todo.pop_front();
    if (c == ".") continue;
    if (c == "..") {
      cur = parent_of(cur);
      if (!watch_dir(cur)) {
        failed = true;
        return nullptr;
      }
      continue;
    }
    const std::string next = cur == "/" ? "/" + c : cur + "/" + c;
    r.depends.push_back({cur_wd, c});  // the name looked up in `cur`
    struct stat st;
    if (::lstat(next.c_str(), &st) != 0 || !(S_ISLNK(st.st_mode) || S_ISDIR(st.st_mode))) {
      complete = false;  // a lookup under `cur` fails: its watch sees the name appear
      break;
    }
    if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxSymlinks) {
        failed = true;
        return nullptr;
      }
      auto target = read_link(next);
      if (!target || target->empty()) {
        complete = false;
        break;
      }
      std::deque<std::string> more = components(*target);
      todo.insert(todo.begin(), more.begin(), more.end());
      if ((*target)[0] == '/') {
        cur = "/";  // the root is watched already
        cur_wd = root_wd;
      }
      continue;
    }
    cur = next;
    if (!watch_dir(cur)) {
      failed = true;
      return nullptr;
    }
  }
  depends.insert(depends.end(), r.depends.begin(), r.depends.end());
  if (!complete) return nullptr;
  r.real_dir = cur;
  r.real_watch = cur_wd;
  Resolved& kept = resolved_[dir];
  kept = std::move(r);
  return &kept;
}

bool ChangeWatch::watch_path_locked(const std::string& path, bool must_exist, std::vector<Dependency>& depends) {
  std::string p = path;
  for (int links = 0; links <= kMaxSymlinks; ++links) {
    if (p.empty() || p[0] != '/') return false;
    const auto slash = p.find_last_of('/');
    const std::string dir = slash == 0 ? "/" : p.substr(0, slash);
    const std::string name = p.substr(slash + 1);
    bool failed = false;
    const Resolved* resolved = resolve_dir_locked(dir, depends, failed);
    if (failed) return false;
    if (!resolved) return !must_exist;  // an absent path stays watched where its lookup stops
    const std::string real = resolved->real_dir;
    depends.push_back({resolved->real_watch, name});  // its name in the real folder
    const std::string at = real == "/" ? "/" + name : real + "/" + name;
    struct stat st;
    if (::lstat(at.c_str(), &st) != 0) return !must_exist;
    if (S_ISLNK(st.st_mode)) {
      auto target = read_link(at);
      if (!target || target->empty()) return !must_exist;
      p = (*target)[0] == '/' ? *target : real + "/" + *target;
      continue;
    }
    if (!must_exist) return true;  // present where it must not be: the lookup's own check says so
    if (!S_ISREG(st.st_mode) || !stamps_are_trusted(st, at)) return false;
    const int wd = add_locked(at, false);
    if (wd < 0) return false;
    depends.push_back({wd, ""});
    return true;
  }
  return false;
}

std::optional<ChangeWatch::Proof> ChangeWatch::watch(const std::vector<std::string>& present,
                                                     const std::vector<std::string>& absent) {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  if (!enabled_ || !usable_locked() || out_of_watches_) return std::nullopt;
  drain_locked();
  Proof proof;
  proof.instance = instance_;
  proof.epoch = ++seq_;
  for (const auto& p : present)
    if (!watch_path_locked(p, true, proof.depends)) return std::nullopt;
  for (const auto& p : absent)
    if (!watch_path_locked(p, false, proof.depends)) return std::nullopt;
  std::sort(proof.depends.begin(), proof.depends.end());
  proof.depends.erase(std::unique(proof.depends.begin(), proof.depends.end()), proof.depends.end());
  return proof;
}

bool ChangeWatch::unchanged(Proof& proof) {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  if (!enabled_ || !usable_locked() || proof.instance != instance_) return false;
  drain_locked();
  if (changed_since_locked(proof.depends, proof.epoch)) return false;
  // Nothing it depends on changed up to the last event read: it now vouches
  // from there, so unrelated events read today are not looked at again.
  proof.epoch = seq_;
  return true;
}

}  // namespace tvmffi_jit::util
