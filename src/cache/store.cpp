#include "tvmffi_jit/cache/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <random>

#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/key.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::cache {

namespace {

std::string unique_suffix() {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(::getpid()));
  static const char* chars = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s(8, 'x');
  for (char& c : s) c = chars[rng() % 36];
  return s;
}

void move_file(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) == 0) return;
  int e = errno;
  if (e != EXDEV) throw io_error(errno_message("cannot move " + from + " to " + to, e));
  // The build ran on another filesystem (a caller-chosen build dir): copy.
  util::write_file(to, util::read_file(from));
}

}  // namespace

std::string LookupResult::artifact_path(size_t i) const {
  if (!entry || i >= entry->artifacts.size()) return "";
  return util::join_path(entry_dir, entry->artifacts[i].file);
}

std::string Staging::build_dir() const { return util::join_path(path(), "build"); }
std::string Staging::entry_dir() const { return util::join_path(path(), "entry"); }

Store::Store(CacheRoot root) : root_(std::move(root)) {}

bool Store::check_writable() {
  if (!root_.write_probed) probe_root_writable(root_);
  return root_.writable;
}

std::string Store::module_entry_dir(const std::string& name, const std::string& key_hex) const {
  check_entry_name(name);
  return util::join_path(root_.path, name + "_" + key_hex.substr(0, 16));
}

std::string Store::object_entry_dir(const std::string& key_hex) const {
  return util::join_path(util::join_path(util::join_path(root_.path, "objects"), key_hex.substr(0, 2)), key_hex);
}

std::string Store::compilers_dir() const { return util::join_path(root_.path, "compilers"); }
std::string Store::tmp_dir() const { return util::join_path(root_.path, "tmp"); }
std::string Store::locks_dir() const { return util::join_path(root_.path, "locks"); }

LookupResult Store::lookup(const std::string& entry_dir, const std::string& key_hex) const {
  LookupResult r;
  r.entry_dir = entry_dir;
  struct stat st;
  if (::lstat(entry_dir.c_str(), &st) != 0) {
    r.miss_reason = "absent";
    return r;
  }
  if (!S_ISDIR(st.st_mode)) {
    // A symlink or file where an entry should be: never followed, replaced on publish.
    r.miss_reason = "not a directory";
    r.corrupt = true;
    return r;
  }
  std::string why;
  r.entry = read_entry(entry_dir, &why);
  if (!r.entry) {
    r.miss_reason = why;
    r.corrupt = true;
    return r;
  }
  if (r.entry->key != key_hex) {
    r.miss_reason = "entry holds key " + r.entry->key.substr(0, 16) + "... (prefix collision or foreign entry)";
    r.corrupt = true;
    return r;
  }
  for (const auto& a : r.entry->artifacts) {
    std::string p = util::join_path(entry_dir, a.file);
    struct stat ast;
    if (::lstat(p.c_str(), &ast) != 0 || !S_ISREG(ast.st_mode)) {
      r.miss_reason = "artifact " + a.file + " is missing";
      r.corrupt = true;
      return r;
    }
    if (static_cast<uint64_t>(ast.st_size) != a.size) {
      r.miss_reason = "artifact " + a.file + " has " + std::to_string(ast.st_size) + " bytes, entry.json says " +
                      std::to_string(a.size);
      r.corrupt = true;
      return r;
    }
  }
  if (auto changed = check_headers(r.entry->headers)) {
    r.miss_reason = "header " + *changed;
    return r;
  }
  r.hit = true;
  r.miss_reason.clear();
  // Last-use time for gc ordering; a read-only root simply keeps the old one.
  ::utimensat(AT_FDCWD, entry_dir.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
  return r;
}

util::FileLock Store::lock(const std::string& entry_dir, const std::string& what, double timeout_seconds) const {
  std::string path = util::join_path(locks_dir(), util::file_name(entry_dir) + ".lock");
  try {
    util::make_directories(locks_dir(), 0700);
  } catch (const Error&) {
    return util::FileLock{};  // unavailable: proceed without it
  }
  util::LockOptions lo;
  lo.timeout_seconds = timeout_seconds;
  lo.note = what;
  lo.on_wait = [&](const util::LockHolder& h) {
    if (h.pid)
      spdlog::warn("waiting for pid {}{} which is building {} (lock {})", h.pid,
                   h.host.empty() || h.host == util::host_name() ? "" : " on " + h.host,
                   h.note.empty() ? util::file_name(entry_dir) : h.note, path);
    else
      spdlog::warn("waiting for another process building {} (lock {})", util::file_name(entry_dir), path);
  };
  util::FileLock l = util::FileLock::acquire(path, lo);
  if (l.status() == util::LockStatus::kTimedOut) {
    const auto& h = l.last_holder();
    spdlog::warn("gave up waiting after {:.0f} s for {} (held by {}); building anyway", timeout_seconds, path,
                 h && h->pid ? "pid " + std::to_string(h->pid) : std::string("another process"));
  }
  return l;
}

Staging Store::stage() const {
  util::make_directories(tmp_dir(), 0700);
  util::TempDir dir(tmp_dir(), "stage." + util::host_name() + "." + std::to_string(::getpid()) + ".");
  Staging s(std::move(dir));
  if (::mkdir(s.build_dir().c_str(), 0700) != 0 || ::mkdir(s.entry_dir().c_str(), 0700) != 0)
    throw io_error(errno_message("cannot create the staging directory " + s.path(), errno));
  return s;
}

PublishResult Store::publish(Staging& staging, const std::string& entry_dir, EntryRecord record,
                             const std::vector<std::pair<std::string, std::string>>& files) const {
  record.format_version = kCacheFormatVersion;
  if (record.tool_version.empty()) record.tool_version = TVMFFI_JIT_VERSION;
  record.created = static_cast<int64_t>(std::time(nullptr));
  record.artifacts.clear();
  for (const auto& [from, name] : files) {
    if (!is_valid_entry_name(name)) throw io_error("internal: artifact name '" + name + "' is not a plain file name");
    std::string to = util::join_path(staging.entry_dir(), name);
    move_file(from, to);
    ArtifactRecord a;
    a.file = name;
    auto stamp = util::file_stamp(to);
    if (!stamp) throw io_error("cannot stat " + to);
    a.size = stamp->size;
    a.sha256 = util::sha256_file_hex(to);
    record.artifacts.push_back(std::move(a));
  }
  util::write_file(util::join_path(staging.entry_dir(), kEntryFileName), entry_to_json(record).dump(2) + "\n");
  return commit(staging, entry_dir, std::move(record));
}

PublishResult Store::publish_prepared(Staging& staging, const std::string& entry_dir, EntryRecord record) const {
  return commit(staging, entry_dir, std::move(record));
}

PublishResult Store::commit(Staging& staging, const std::string& entry_dir, EntryRecord record) const {
  util::make_directories(util::parent_path(entry_dir), 0700);

  // A few rounds: each either publishes, finds a valid winner, or clears a
  // broken occupant. Repeated losses mean several processes keep replacing
  // each other's entries (different headers); the last one wins, ours stays usable.
  for (int attempt = 0; attempt < 4; ++attempt) {
    if (::rename(staging.entry_dir().c_str(), entry_dir.c_str()) == 0) {
      PublishResult p;
      p.entry_dir = entry_dir;
      p.entry = std::move(record);
      p.ours = true;
      return p;
    }
    int e = errno;
    if (e != ENOTEMPTY && e != EEXIST && e != ENOTDIR && e != EISDIR)
      throw io_error(errno_message("cannot publish " + entry_dir, e));
    LookupResult existing = lookup(entry_dir, record.key);
    if (existing.hit) {
      PublishResult p;
      p.entry_dir = entry_dir;
      p.entry = std::move(*existing.entry);
      p.ours = false;
      return p;
    }
    spdlog::debug("replacing cache entry {}: {}", entry_dir, existing.miss_reason);
    remove_entry(entry_dir);
  }
  throw io_error("cannot publish " + entry_dir + ": other processes keep replacing it");
}

bool Store::remove_entry(const std::string& entry_dir) const {
  struct stat st;
  if (::lstat(entry_dir.c_str(), &st) != 0) return false;
  util::make_directories(tmp_dir(), 0700);
  std::string trash = util::join_path(tmp_dir(), "trash." + std::to_string(::getpid()) + "." + unique_suffix());
  if (::rename(entry_dir.c_str(), trash.c_str()) != 0) {
    int e = errno;
    if (e == ENOENT) return false;  // someone else removed it first
    throw io_error(errno_message("cannot remove cache entry " + entry_dir, e));
  }
  util::remove_all(trash);  // std::filesystem::remove_all never follows symlinks
  return true;
}

void Store::count(const StatsCounters& delta) const {
  if (root_.writable) add_stats(root_.path, delta);
}

}  // namespace tvmffi_jit::cache
