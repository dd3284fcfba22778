#include "tvmffi_jit/util/change_watch.h"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <ctime>
#include <mutex>

#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/stamp.h"
#include "tvmffi_jit/util/strings.h"

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

int64_t monotonic_now_ns() {
  struct timespec now;
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// A sysctl holding one number (a few bytes: the read is capped).
std::optional<uint64_t> read_limit(const std::string& path) {
  auto text = read_small_file(path, 64);
  if (!text) return std::nullopt;
  return parse_size(trim(*text));
}

Failure<WatchRefusal> refusal(WatchRefusal kind) {
  switch (kind) {
    case WatchRefusal::kOff: return {kind, "change watches are off"};
    case WatchRefusal::kNotWatchable:
      return {kind, "a path cannot be watched (relative, not a regular file, or on a filesystem whose stamps are "
                    "not trusted)"};
    case WatchRefusal::kBudget: return {kind, "this process's share of the user's inotify watches is in use"};
    case WatchRefusal::kUserLimit: return {kind, "the kernel refused an inotify watch (the user's limit is reached)"};
  }
  return {kind, "refused"};
}

}  // namespace

size_t ChangeWatch::default_watch_budget() {
  std::optional<uint64_t> limit = read_limit("/proc/sys/fs/inotify/max_user_watches");
  // In a user namespace the user's limit there may be lower (ucounts).
  if (auto in_namespace = read_limit("/proc/sys/user/max_inotify_watches"))
    limit = limit ? std::min(*limit, *in_namespace) : *in_namespace;
  if (!limit) return 512;  // /proc not mounted: 1/16 of the old default
  return static_cast<size_t>(std::min<uint64_t>(kMaxWatches, *limit / kShareOfUserLimit));
}

ChangeWatch::ChangeWatch(size_t max_watches)
    : drop_in_child_([this] {
        // Inside fork(), single-threaded: fd_ is still the descriptor this
        // process opened, so closing the child's copy of it is safe now (and
        // only now), and leaves the parent's instance and queue untouched.
        reset_locked(true);
      }),
      max_watches_(max_watches) {}

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
  // Read when first enabled: a process that never watches (the command-line
  // tool) reads no sysctl.
  if (on && max_watches_ == 0) max_watches_ = default_watch_budget();
}

size_t ChangeWatch::budget() const {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  return max_watches_;
}

bool ChangeWatch::enabled() const {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  return enabled_;
}

size_t ChangeWatch::watch_count() {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  return watches_.size();
}

void ChangeWatch::reset_locked(bool close_descriptor) {
  if (fd_ >= 0 && close_descriptor) ::close(fd_);
  fd_ = -1;
  watches_.clear();
  added_.clear();
  last_named_.clear();
  named_count_ = 0;
  resolved_.clear();
  overflow_seq_ = 0;
  last_any_seq_ = 0;
  refuse_until_ns_ = 0;
  ++instance_;
}

bool ChangeWatch::usable_locked() {
  // Another pid without the fork hook having run (a raw clone): the number
  // may name anything by now, so it is forgotten, never closed.
  if (fd_ >= 0 && pid_ != ::getpid()) reset_locked(false);
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
        if (watches_.count(ev->wd)) {  // not one removed since
          auto [it, added] = last_named_[ev->wd].insert_or_assign(std::string(ev->name), seq);
          (void)it;
          if (added) ++named_count_;
        }
      } else if (auto w = watches_.find(ev->wd); w != watches_.end()) {
        w->second.last_event = seq;  // IN_IGNORED too: the watch is gone
      }
      at += static_cast<ssize_t>(sizeof(struct inotify_event) + ev->len);
    }
  }
}

bool ChangeWatch::changed_since_locked(const std::vector<Dependency>& depends, uint64_t epoch) const {
  if (last_any_seq_ <= epoch) return false;  // no event at all since: the usual repeated hit, in O(1)
  if (overflow_seq_ > epoch) return true;
  for (const auto& d : depends) {
    auto it = watches_.find(d.watch);
    if (it == watches_.end() || it->second.last_event > epoch) return true;
    if (d.name.empty()) continue;
    auto in_folder = last_named_.find(d.watch);
    if (in_folder == last_named_.end()) continue;
    auto named = in_folder->second.find(d.name);
    if (named != in_folder->second.end() && named->second > epoch) return true;
  }
  return false;
}

int ChangeWatch::add_locked(const std::string& path, bool directory, WatchRefusal& refused) {
  if (watches_.size() >= max_watches_) {
    refused = WatchRefusal::kBudget;
    return -1;
  }
  const int wd = ::inotify_add_watch(fd_, path.c_str(), directory ? kDirectoryMask : kFileMask);
  if (wd >= 0) {
    // An inode already watched gives its existing watch, which keeps its last event.
    if (watches_.emplace(wd, WatchState{}).second) added_.push_back(wd);
    return wd;
  }
  if (errno == ENOSPC || errno == ENOMEM) {
    // The user's limit (other processes watching): asking again on every
    // hit would cost more than the stats it saves, and would take the last
    // watches from the user's other programs.
    refuse_until_ns_ = monotonic_now_ns() + kUserLimitBackoffNs;
    refused = WatchRefusal::kUserLimit;
  } else {
    refused = WatchRefusal::kNotWatchable;
  }
  return -1;
}

void ChangeWatch::remove_unreferenced_locked(const std::vector<int>& candidates) {
  bool removed = false;
  for (int wd : candidates) {
    auto it = watches_.find(wd);
    if (it == watches_.end() || it->second.refs > 0) continue;
    ::inotify_rm_watch(fd_, wd);  // its IN_IGNORED is dropped when read: the watch is unknown by then
    watches_.erase(it);
    if (auto named = last_named_.find(wd); named != last_named_.end()) {
      named_count_ -= std::min(named_count_, named->second.size());
      last_named_.erase(named);
    }
    removed = true;
  }
  if (!removed) return;
  // A resolved folder that depended on a removed watch is resolved again when asked.
  for (auto it = resolved_.begin(); it != resolved_.end();) {
    const bool stale = std::any_of(it->second.depends.begin(), it->second.depends.end(),
                                   [&](const Dependency& d) { return !watches_.count(d.watch); });
    it = stale ? resolved_.erase(it) : std::next(it);
  }
}

const ChangeWatch::Resolved* ChangeWatch::resolve_dir_locked(const std::string& dir, std::vector<Dependency>& depends,
                                                             std::optional<WatchRefusal>& refused) {
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
    if (::stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || !stamps_are_trusted(st, d)) {
      refused = WatchRefusal::kNotWatchable;
      return false;
    }
    WatchRefusal why = WatchRefusal::kNotWatchable;
    cur_wd = add_locked(d, true, why);
    if (cur_wd < 0) {
      refused = why;
      return false;
    }
    r.depends.push_back({cur_wd, ""});
    return true;
  };
  std::string cur = "/";
  if (!watch_dir(cur)) return nullptr;
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
      if (!watch_dir(cur)) return nullptr;
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
        refused = WatchRefusal::kNotWatchable;
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
    if (!watch_dir(cur)) return nullptr;
  }
  depends.insert(depends.end(), r.depends.begin(), r.depends.end());
  if (!complete) return nullptr;
  r.real_dir = cur;
  r.real_watch = cur_wd;
  Resolved& kept = resolved_[dir];
  kept = std::move(r);
  return &kept;
}

std::optional<WatchRefusal> ChangeWatch::watch_path_locked(const std::string& path, bool must_exist,
                                                           std::vector<Dependency>& depends) {
  const std::optional<WatchRefusal> watched;  // nothing refused
  const auto absent = [&]() -> std::optional<WatchRefusal> {
    return must_exist ? std::optional<WatchRefusal>(WatchRefusal::kNotWatchable) : watched;
  };
  std::string p = path;
  for (int links = 0; links <= kMaxSymlinks; ++links) {
    if (p.empty() || p[0] != '/') return WatchRefusal::kNotWatchable;
    const auto slash = p.find_last_of('/');
    const std::string dir = slash == 0 ? "/" : p.substr(0, slash);
    const std::string name = p.substr(slash + 1);
    std::optional<WatchRefusal> refused;
    const Resolved* resolved = resolve_dir_locked(dir, depends, refused);
    if (refused) return refused;
    if (!resolved) return absent();  // an absent path stays watched where its lookup stops
    const std::string real = resolved->real_dir;
    depends.push_back({resolved->real_watch, name});  // its name in the real folder
    const std::string at = real == "/" ? "/" + name : real + "/" + name;
    struct stat st;
    if (::lstat(at.c_str(), &st) != 0) return absent();
    if (S_ISLNK(st.st_mode)) {
      auto target = read_link(at);
      if (!target || target->empty()) return absent();
      p = (*target)[0] == '/' ? *target : real + "/" + *target;
      continue;
    }
    if (!must_exist) return watched;  // present where it must not be: the lookup's own check says so
    if (!S_ISREG(st.st_mode) || !stamps_are_trusted(st, at)) return WatchRefusal::kNotWatchable;
    WatchRefusal why = WatchRefusal::kNotWatchable;
    const int wd = add_locked(at, false, why);
    if (wd < 0) return why;
    depends.push_back({wd, ""});
    return watched;
  }
  return WatchRefusal::kNotWatchable;
}

Expected<ChangeWatch::Proof, Failure<WatchRefusal>> ChangeWatch::watch(const std::vector<std::string>& present,
                                                                      const std::vector<std::string>& absent) {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  if (!enabled_ || !usable_locked()) return Unexpected{refusal(WatchRefusal::kOff)};
  if (refuse_until_ns_ != 0 && monotonic_now_ns() < refuse_until_ns_) return Unexpected{refusal(WatchRefusal::kUserLimit)};
  // Each present file takes a watch of its own: a proof that cannot fit is
  // refused before any watch is asked for (it would be refused on every hit).
  if (present.size() >= max_watches_) return Unexpected{refusal(WatchRefusal::kBudget)};
  drain_locked();
  Proof proof;
  proof.instance = instance_;
  proof.epoch = ++seq_;
  added_.clear();
  std::optional<WatchRefusal> refused;
  for (size_t i = 0; !refused && i < present.size(); ++i) refused = watch_path_locked(present[i], true, proof.depends);
  for (size_t i = 0; !refused && i < absent.size(); ++i) refused = watch_path_locked(absent[i], false, proof.depends);
  if (refused) {
    remove_unreferenced_locked(added_);  // what no kept proof holds goes back at once
    added_.clear();
    return Unexpected{refusal(*refused)};
  }
  added_.clear();
  std::sort(proof.depends.begin(), proof.depends.end());
  proof.depends.erase(std::unique(proof.depends.begin(), proof.depends.end()), proof.depends.end());
  for (size_t i = 0; i < proof.depends.size(); ++i)  // sorted: one reference per watch
    if (i == 0 || proof.depends[i].watch != proof.depends[i - 1].watch) ++watches_[proof.depends[i].watch].refs;
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

void ChangeWatch::release(const Proof& proof) {
  std::lock_guard<ForkSafeMutex> g(mutex_);
  if (fd_ < 0 || pid_ != ::getpid() || proof.instance != instance_) return;
  std::vector<int> unreferenced;
  for (size_t i = 0; i < proof.depends.size(); ++i) {
    const int wd = proof.depends[i].watch;
    if (i > 0 && proof.depends[i - 1].watch == wd) continue;
    auto it = watches_.find(wd);
    if (it == watches_.end() || it->second.refs == 0) continue;
    if (--it->second.refs == 0) unreferenced.push_back(wd);
  }
  remove_unreferenced_locked(unreferenced);
}

}  // namespace tvmffi_jit::util
