#include "tvmffi_jit/cache/maintenance.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

constexpr int64_t kAbandonedAfterSeconds = 24 * 3600;

bool is_lower_hex(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return !s.empty();
}

// Plain names in `dir` (no "." / ".."); empty when the directory is missing.
std::vector<std::string> read_names(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// "<name>_<16 hex>" where <name> is a valid entry name.
bool is_module_dir_name(const std::string& n) {
  if (n.size() < 18 || n[n.size() - 17] != '_') return false;
  return is_lower_hex(n.substr(n.size() - 16)) && is_valid_entry_name(n.substr(0, n.size() - 17));
}

EntryInfo describe(const std::string& dir, const std::string& dir_name, bool is_object) {
  EntryInfo info;
  info.dir = dir;
  info.dir_name = dir_name;
  info.is_object = is_object;
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    info.problem = "vanished";
    return info;
  }
  info.last_used = static_cast<int64_t>(st.st_mtim.tv_sec);
  if (S_ISLNK(st.st_mode)) {
    info.is_symlink = true;
    info.problem = "is a symlink (never followed)";
    return info;
  }
  if (!S_ISDIR(st.st_mode)) {
    info.problem = "is not a directory";
    return info;
  }
  for (const auto& f : read_names(dir)) {
    struct stat fst;
    if (::lstat(util::join_path(dir, f).c_str(), &fst) == 0 && S_ISREG(fst.st_mode))
      info.bytes += static_cast<uint64_t>(fst.st_size);
  }
  info.entry = read_entry(dir, &info.problem);
  if (info.entry) info.problem.clear();
  return info;
}

// Staging and trash directories nobody will finish: the owning process on
// this host is gone, or they are older than `max_age` seconds.
bool is_abandoned_temporary(const std::string& name, int64_t age_seconds, int64_t max_age) {
  if (age_seconds > max_age) return true;
  // stage.<host>.<pid>.<random>  /  trash.<pid>.<random> (trash is always abandoned once its remover is gone)
  std::vector<std::string> parts = util::split_any(name, ".");
  std::string host;
  long pid = 0;
  if (parts.size() >= 4 && parts[0] == "stage") {
    pid = std::strtol(parts[parts.size() - 2].c_str(), nullptr, 10);
    // Host names may contain dots: the pid is always second to last.
    host = util::join(std::vector<std::string>(parts.begin() + 1, parts.end() - 2), ".");
  } else if (parts.size() >= 3 && parts[0] == "trash") {
    host = util::host_name();
    pid = std::strtol(parts[1].c_str(), nullptr, 10);
  } else {
    return false;  // not ours (or a write-probe in flight): leave it
  }
  if (host != util::host_name() || pid <= 0) return false;  // another host's: only age decides
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

size_t remove_temporaries(const Store& store, int64_t max_age) {
  size_t removed = 0;
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const auto& n : read_names(store.tmp_dir())) {
    std::string p = util::join_path(store.tmp_dir(), n);
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) continue;
    if (!is_abandoned_temporary(n, now - static_cast<int64_t>(st.st_mtim.tv_sec), max_age)) continue;
    try {
      util::remove_all(p);
      ++removed;
    } catch (const Error& e) {
      spdlog::warn("{}", e.what());
    }
  }
  return removed;
}

// Removes lock files of entries that no longer exist and that nobody holds.
void remove_orphan_locks(const Store& store) {
  for (const auto& n : read_names(store.locks_dir())) {
    if (!util::ends_with(n, ".lock")) continue;
    std::string entry = n.substr(0, n.size() - 5);
    if (util::path_exists(util::join_path(store.root(), entry))) continue;
    if (entry.size() == 64 && util::path_exists(store.object_entry_dir(entry))) continue;
    std::string p = util::join_path(store.locks_dir(), n);
    util::FileLock l = util::FileLock::try_acquire(p, "cache gc");
    if (l.locked()) ::unlink(p.c_str());  // a racing opener only duplicates work
  }
}

}  // namespace

std::vector<EntryInfo> list_entries(const std::string& root, bool include_objects) {
  std::vector<EntryInfo> out;
  for (const auto& n : read_names(root)) {
    if (!is_module_dir_name(n)) continue;
    out.push_back(describe(util::join_path(root, n), n, false));
  }
  if (!include_objects) return out;
  std::string objects = util::join_path(root, "objects");
  for (const auto& shard : read_names(objects)) {
    if (shard.size() != 2 || !is_lower_hex(shard)) continue;
    std::string sd = util::join_path(objects, shard);
    struct stat st;
    if (::lstat(sd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    for (const auto& k : read_names(sd)) {
      if (k.size() != 64 || !is_lower_hex(k) || k.compare(0, 2, shard) != 0) continue;
      out.push_back(describe(util::join_path(sd, k), k, true));
    }
  }
  return out;
}

namespace {

void add_tree_bytes(int dir_fd, int depth, CacheSummary& s) {
  DIR* dir = ::fdopendir(dir_fd);
  if (!dir) {
    ::close(dir_fd);
    return;
  }
  while (struct dirent* e = ::readdir(dir)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    struct stat st;
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISREG(st.st_mode)) {
      s.total_bytes += static_cast<uint64_t>(st.st_size);
      ++s.total_files;
    } else if (S_ISDIR(st.st_mode) && depth < 16) {
      int child = ::openat(::dirfd(dir), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child >= 0) add_tree_bytes(child, depth + 1, s);
    }
  }
  ::closedir(dir);
}

}  // namespace

CacheSummary summarize_cache(const std::string& root) {
  CacheSummary s;
  for (const auto& e : list_entries(root, true)) {
    (e.is_object ? s.object_entries : s.module_entries) += 1;
    (e.is_object ? s.object_bytes : s.module_bytes) += e.bytes;
  }
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) add_tree_bytes(fd, 0, s);
  return s;
}

std::vector<EntryInfo> find_entries(const std::string& root, const std::string& name_or_key) {
  std::vector<EntryInfo> out;
  std::string q = util::to_lower(name_or_key);
  bool key_like = q.size() >= 4 && is_lower_hex(q);
  for (auto& e : list_entries(root, true)) {
    bool match = e.dir_name == name_or_key;
    if (e.entry) {
      if (!e.is_object && e.entry->name == name_or_key) match = true;
      if (key_like && util::starts_with(e.entry->key, q)) match = true;
    }
    if (match) out.push_back(std::move(e));
  }
  return out;
}

VerifyReport verify_cache(const Store& store, bool remove) {
  VerifyReport report;
  for (const auto& info : list_entries(store.root(), true)) {
    ++report.checked;
    std::string problem = info.problem;
    if (problem.empty() && info.entry) {
      const EntryRecord& e = *info.entry;
      std::string expected_dir = info.is_object ? e.key : e.name + "_" + e.key.substr(0, 16);
      if (expected_dir != info.dir_name) problem = "entry.json belongs in " + expected_dir;
      if (e.kind != (info.is_object ? "object" : "module")) problem = "entry kind '" + e.kind + "' in the wrong place";
      for (const auto& a : e.artifacts) {
        if (!problem.empty()) break;
        std::string p = util::join_path(info.dir, a.file);
        struct stat st;
        if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) problem = "artifact " + a.file + " is missing";
        else if (static_cast<uint64_t>(st.st_size) != a.size)
          problem = "artifact " + a.file + " has " + std::to_string(st.st_size) + " bytes, expected " +
                    std::to_string(a.size);
        else if (util::sha256_file_hex(p) != a.sha256)
          problem = "artifact " + a.file + " does not match its SHA-256";
      }
    }
    if (problem.empty()) continue;
    VerifyProblem vp{info.dir, problem, false};
    if (remove) {
      try {
        vp.removed = store.remove_entry(info.dir);
      } catch (const Error& e) {
        spdlog::warn("{}", e.what());
      }
    }
    report.problems.push_back(std::move(vp));
  }
  return report;
}

CleanReport clean_cache(const Store& store, std::optional<int64_t> older_than_seconds) {
  CleanReport report;
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const auto& info : list_entries(store.root(), true)) {
    bool old = !older_than_seconds || now - info.last_used > *older_than_seconds;
    if (!old) {
      report.bytes_kept += info.bytes;
      continue;
    }
    if (store.remove_entry(info.dir)) {
      ++report.entries_removed;
      report.bytes_removed += info.bytes;
    }
  }
  if (!older_than_seconds) util::remove_all(store.compilers_dir());
  report.temporaries_removed =
      remove_temporaries(store, older_than_seconds ? std::min(*older_than_seconds, kAbandonedAfterSeconds)
                                                   : kAbandonedAfterSeconds);
  remove_orphan_locks(store);
  return report;
}

CleanReport gc_cache(const Store& store, uint64_t max_bytes) {
  CleanReport report;
  report.temporaries_removed = remove_temporaries(store, kAbandonedAfterSeconds);
  std::vector<EntryInfo> entries = list_entries(store.root(), true);
  uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  std::stable_sort(entries.begin(), entries.end(),
                   [](const EntryInfo& a, const EntryInfo& b) { return a.last_used < b.last_used; });
  for (const auto& e : entries) {
    if (total <= max_bytes) break;
    if (store.remove_entry(e.dir)) {
      ++report.entries_removed;
      report.bytes_removed += e.bytes;
    }
    total -= std::min(total, e.bytes);
  }
  report.bytes_kept = total;
  remove_orphan_locks(store);
  return report;
}

}  // namespace tvmffi_jit::cache
