#include "tvmffi_jit/cache/maintenance.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>

#include "cache/store/temporaries.h"
#include "tvmffi_jit/cache/results.h"
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

// Whether entry.json says this directory is an entry tvmffi-jit wrote (of
// any format version): maintenance removes nothing else.
bool written_by_us(const nlohmann::json& j, const std::string& dir_name, bool is_object) {
  if (!j.is_object()) return false;
  auto version = j.find("format_version");
  auto kind = j.find("kind");
  auto key = j.find("key");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() < 1) return false;
  if (kind == j.end() || !kind->is_string() || *kind != (is_object ? "object" : "module")) return false;
  if (key == j.end() || !key->is_string()) return false;
  const std::string k = key->get<std::string>();
  if (k.size() != 64 || !is_lower_hex(k)) return false;
  if (is_object) return dir_name == k;
  // A result: "<name>_<key16>/<result16>"; the old layout: "<name>_<key16>".
  const size_t slash = dir_name.find('/');
  const std::string key_dir_name = dir_name.substr(0, slash);
  if (slash != std::string::npos && !is_result_dir_name(std::string_view(dir_name).substr(slash + 1))) return false;
  return util::ends_with(key_dir_name, "_" + k.substr(0, 16));
}

EntryInfo describe(const std::string& dir, const std::string& dir_name, bool is_object, const std::string& key_dir = "") {
  EntryInfo info;
  info.dir = dir;
  info.dir_name = dir_name;
  info.key_dir = key_dir;
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
  for (const auto& f : util::list_directory(dir)) {
    struct stat fst;
    if (::lstat(util::join_path(dir, f).c_str(), &fst) == 0 && S_ISREG(fst.st_mode))
      info.bytes += static_cast<uint64_t>(fst.st_size);
  }
  Expected<nlohmann::json> j = read_entry_json(dir);
  if (!j) {
    info.problem = j.why();
    return info;
  }
  info.ours = written_by_us(*j, dir_name, is_object);
  if (auto entry = entry_from_json(*j))
    info.entry = std::move(*entry);
  else
    info.problem = entry.why();
  return info;
}

size_t remove_temporaries(const Store& store, int64_t max_age) {
  size_t removed = 0;
  int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const auto& n : util::list_directory(store.tmp_dir())) {
    std::string p = util::join_path(store.tmp_dir(), n);
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
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

}  // namespace

namespace {

// Removes the file digest memo (headers.cpp: "digests/<32 hex>"); nothing
// else in digests/.
void remove_digest_memos(const Store& store) {
  const std::string dir = store.digest_memo(false).dir;
  for (const auto& n : util::list_directory(dir)) {
    if (n.size() != 32 || !is_lower_hex(n)) continue;
    std::string p = util::join_path(dir, n);
    struct stat st;
    if (::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(p.c_str());
  }
}

// Removes lock files of entries that no longer exist and that nobody holds;
// only "<entry dir name>.lock" files (Store::lock) are considered.
void remove_orphan_locks(const Store& store) {
  for (const auto& n : util::list_directory(store.locks_dir())) {
    if (!util::ends_with(n, ".lock")) continue;
    std::string entry = n.substr(0, n.size() - 5);
    if (!is_module_entry_dir_name(entry) && !(entry.size() == 64 && is_lower_hex(entry))) continue;
    if (util::path_exists(util::join_path(store.root(), entry))) continue;
    if (entry.size() == 64 && util::path_exists(store.object_entry_dir(entry))) continue;
    std::string p = util::join_path(store.locks_dir(), n);
    util::FileLock l = util::FileLock::try_acquire(p, "cache gc");
    struct stat st;
    if (l.locked() && ::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      ::unlink(p.c_str());  // a racing opener only duplicates work
  }
}

// Module key directories left without results (and not an old-layout
// entry): rmdir() removes only an empty one, so a result renamed in
// meanwhile keeps it (a publisher that finds it gone creates it again).
void remove_empty_key_dirs(const Store& store) {
  for (const auto& n : util::list_directory(store.root()))
    if (is_module_entry_dir_name(n)) ::rmdir(util::join_path(store.root(), n).c_str());
}

}  // namespace

std::vector<EntryInfo> list_entries(const std::string& root, bool include_objects) {
  std::vector<EntryInfo> out;
  for (const auto& n : util::list_directory(root)) {
    if (!is_module_entry_dir_name(n)) continue;
    const std::string key_dir = util::join_path(root, n);
    struct stat st;
    if (::lstat(key_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        ::lstat(util::join_path(key_dir, kEntryFileName).c_str(), &st) == 0) {
      // Not a directory (reported, never followed), or an entry of the layout before results.
      out.push_back(describe(key_dir, n, false));
      continue;
    }
    std::vector<EntryInfo> results;
    const std::vector<std::string> names = util::list_directory(key_dir);
    for (const auto& r : names)
      if (is_result_dir_name(r)) results.push_back(describe(util::join_path(key_dir, r), n + "/" + r, false, key_dir));
    // Something else there and no result: listed (and reported by verify) as it is.
    if (results.empty() && !names.empty()) out.push_back(describe(key_dir, n, false));
    std::stable_sort(results.begin(), results.end(),
                     [](const EntryInfo& a, const EntryInfo& b) { return a.last_used > b.last_used; });
    for (auto& r : results) out.push_back(std::move(r));
  }
  if (!include_objects) return out;
  std::string objects = util::join_path(root, "objects");
  for (const auto& shard : util::list_directory(objects)) {
    if (shard.size() != 2 || !is_lower_hex(shard)) continue;
    std::string sd = util::join_path(objects, shard);
    struct stat st;
    if (::lstat(sd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    for (const auto& k : util::list_directory(sd)) {
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
  std::string last_key_dir;
  for (const auto& e : list_entries(root, true)) {
    if (!e.is_object && e.key_dir != last_key_dir) ++s.module_keys;
    if (!e.is_object) last_key_dir = e.key_dir;
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
    // A key's directory name selects all of its results.
    bool match = e.dir_name == name_or_key ||
                 (!e.key_dir.empty() && (util::file_name(e.key_dir) == name_or_key || util::file_name(e.dir) == q));
    if (e.entry) {
      if (!e.is_object && e.entry->name == name_or_key) match = true;
      if (key_like && util::starts_with(e.entry->key, q)) match = true;
    }
    if (match) out.push_back(std::move(e));
  }
  return out;
}

VerifyReport verify_cache(const Store& store, bool remove, const TrustPolicy* policy) {
  VerifyReport report;
  std::vector<EntryInfo> entries = list_entries(store.root(), true);
  std::vector<std::string> problems(entries.size());
  // Bad objects by key: the digests a module may have linked them with.
  std::map<std::string, std::pair<std::string, std::string>> bad_objects;  // key -> (recorded, current)
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryInfo& info = entries[i];
    std::string& problem = problems[i];
    problem = info.problem;
    if (!problem.empty() || !info.entry) continue;
    const EntryRecord& e = *info.entry;
    std::string expected_dir = info.is_object ? e.key
                               : module_entry_dir_name(e.name, e.key) +
                                     (info.key_dir.empty() ? "" : "/" + result_dir_name(result_id(e)));
    if (expected_dir != info.dir_name) problem = "entry.json belongs in " + expected_dir;
    if (e.kind != (info.is_object ? "object" : "module")) problem = "entry kind '" + e.kind + "' in the wrong place";
    for (const auto& a : e.artifacts) {
      if (!problem.empty()) break;
      if (auto intact = check_artifact(info.dir, a, true); !intact) problem = intact.why();
    }
    if (problem.empty() && policy && !info.is_object)
      if (auto why = policy->refuses(e)) problem = "not trusted: " + *why;
    if (!problem.empty() && info.is_object && e.artifacts.size() == 1) {
      std::string current;
      try {
        current = util::sha256_file_hex(util::join_path(info.dir, e.artifacts[0].file));
      } catch (const Error&) {
      }
      bad_objects[e.key] = {e.artifacts[0].sha256, current};
    }
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryInfo& info = entries[i];
    if (!problems[i].empty() || info.is_object || !info.entry) continue;
    for (const auto& o : info.entry->objects) {
      auto it = bad_objects.find(o.key);
      if (it == bad_objects.end()) continue;
      if (o.sha256 == it->second.first || o.sha256 == it->second.second) {
        problems[i] = "linked from the bad object " + o.key.substr(0, 16) + " (" + store.object_entry_dir(o.key) + ")";
        break;
      }
    }
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryInfo& info = entries[i];
    ++report.checked;
    if (problems[i].empty()) continue;
    VerifyProblem vp{info.dir, problems[i], false, ""};
    if (remove && !info.ours) {
      vp.kept_why = info.is_symlink ? "a symlink tvmffi-jit did not create"
                                    : "not removed: no entry.json written by tvmffi-jit names this directory";
    } else if (remove) {
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
    if (!info.ours) continue;  // not an entry tvmffi-jit wrote: never deleted
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
  remove_empty_key_dirs(store);
  if (!older_than_seconds) remove_digest_memos(store);
  report.temporaries_removed =
      remove_temporaries(store, older_than_seconds ? std::min(*older_than_seconds, kAbandonedAfterSeconds)
                                                   : kAbandonedAfterSeconds);
  remove_orphan_locks(store);
  return report;
}

CleanReport gc_cache(const Store& store, uint64_t max_bytes) {
  CleanReport report;
  report.temporaries_removed = remove_temporaries(store, kAbandonedAfterSeconds);
  std::vector<EntryInfo> entries;
  for (auto& e : list_entries(store.root(), true))
    if (e.ours) entries.push_back(std::move(e));  // the size limit covers what gc may remove
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
  remove_empty_key_dirs(store);
  remove_orphan_locks(store);
  return report;
}

}  // namespace tvmffi_jit::cache
