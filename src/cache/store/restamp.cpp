#include "cache/store/restamp.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <unordered_map>
#include <vector>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fork_safe.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/scoped_fd.h"
#include "tvmffi_jit/util/stamp.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {


// Entries whose rewrite failed (a read-only root, a full disk), at the
// stamp entry.json had then: not tried again by this process until that
// file changes. Fork-safe; bounded.
class FailedRewrites {
 public:
  bool failed_before(const std::string& entry_dir, const util::FullStamp& stamp) {
    std::lock_guard<util::ForkSafeMutex> g(mutex_);
    auto it = failed_.find(entry_dir);
    return it != failed_.end() && it->second == stamp;
  }
  void note(const std::string& entry_dir, const util::FullStamp& stamp) {
    std::lock_guard<util::ForkSafeMutex> g(mutex_);
    if (failed_.size() >= 1024) failed_.clear();
    failed_[entry_dir] = stamp;
  }

 private:
  util::ForkSafeMutex mutex_;
  std::unordered_map<std::string, util::FullStamp> failed_;
};

FailedRewrites& failed_rewrites() {
  static FailedRewrites* f = new FailedRewrites;  // never destroyed: used until exit
  return *f;
}

std::string record_path(const nlohmann::json& h) {
  if (h.contains("path") && h["path"].is_string()) return h["path"].get<std::string>();
  if (h.contains("path_hex") && h["path_hex"].is_string())
    if (auto bytes = util::hex_decode(h["path_hex"].get<std::string>())) return *bytes;
  return "";
}

// Sets "stat" of every record in `records` whose name (by `name_of`) has a
// stamp in `stamps`; the count of records changed.
template <class NameOf>
size_t restamp(nlohmann::json& records, const std::unordered_map<std::string, std::string>& stamps, NameOf name_of) {
  size_t changed = 0;
  if (!records.is_array()) return 0;
  for (auto& r : records) {
    if (!r.is_object()) continue;
    auto it = stamps.find(name_of(r));
    if (it == stamps.end() || it->second.empty()) continue;
    if (r.contains("stat") && r["stat"].is_string() && r["stat"].get<std::string>() == it->second) continue;
    r["stat"] = it->second;
    ++changed;
  }
  return changed;
}

}  // namespace

bool record_stamps(const std::string& locks_dir, const std::string& tmp_dir, const std::string& entry_dir,
                   const EntryRecord& checked, const util::FullStamp& read_stamp, util::FullStamp* written) {
  if (read_stamp.inode == 0 || failed_rewrites().failed_before(entry_dir, read_stamp)) return false;
  auto fail = [&](const std::string& why) {
    spdlog::debug("cache: not recording new stamps in {}/{}: {}", entry_dir, kEntryFileName, why);
    failed_rewrites().note(entry_dir, read_stamp);
    return false;
  };
  // The lock builders and publishers of this entry hold: tried once, a busy
  // one means someone is replacing the entry, and these stamps can wait.
  util::FileLock lock;
  try {
    lock = util::FileLock::try_acquire(util::join_path(locks_dir, util::file_name(entry_dir) + ".lock"),
                                       "recording stamps");
  } catch (const Error& e) {
    return fail(e.what());
  }
  if (lock.status() == util::LockStatus::kTimedOut) return false;  // busy: not a failure, try on a later hit
  if (!lock.locked()) return fail("its lock cannot be taken");

  // The directory by descriptor: if the entry is renamed away (gc, a
  // publish replacing it) the new entry.json lands in the old directory,
  // never in a new entry at the same path.
  util::ScopedFd dir;
  dir.fd = ::open(entry_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dir.fd < 0) return fail(errno_message("cannot open", errno));
  util::ScopedFd file;
  file.fd = ::openat(dir.fd, kEntryFileName, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (file.fd < 0) return fail(errno_message("cannot open", errno));
  struct stat st;
  if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) return fail("not a regular file");
  if (util::full_stamp_of(st) != read_stamp) return false;  // rewritten since it was read: its writer's stamps win
  if (static_cast<uint64_t>(st.st_size) > kMaxEntryFileBytes) return fail("too big");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    auto n = util::read_some(file.fd, text.data() + got, text.size() - got);
    if (!n) return fail(n.why());
    if (*n == 0) break;
    got += *n;
  }
  if (got != text.size()) return fail("shorter than its stat says");
  // The file as it is, fields this version does not know included: only
  // the "stat" of records this lookup proved changes.
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("not a JSON object");
  std::unordered_map<std::string, std::string> artifact_stamps, header_stamps;
  for (const auto& a : checked.artifacts) artifact_stamps.emplace(a.file, a.stat);
  for (const auto& h : checked.headers) header_stamps.emplace(h.path, h.stat);
  size_t changed = 0;
  if (j.contains("artifacts"))
    changed += restamp(j["artifacts"], artifact_stamps, [](const nlohmann::json& a) {
      return a.contains("file") && a["file"].is_string() ? a["file"].get<std::string>() : std::string();
    });
  if (j.contains("headers")) changed += restamp(j["headers"], header_stamps, record_path);
  if (changed == 0) return false;

  // A temp file in <root>/tmp (gc removes one left by a crash), renamed over
  // entry.json through the directory's descriptor.
  std::string tmp;
  ino_t written_inode = 0;
  try {
    util::make_directories(tmp_dir, 0700);
    tmp = util::join_path(tmp_dir, "stamps." + util::unique_name_suffix());
    auto created = util::create_new_file(tmp, 0600);
    if (!created) return fail("cannot create " + tmp + ": " + created.why());
    util::FileWriter w = std::move(created).value();
    w.write(util::dump_json(j, 2) + "\n");
    struct stat written;
    if (::fstat(w.fd(), &written) == 0) written_inode = written.st_ino;
    w.close();
  } catch (const Error& e) {  // FileWriter's write/close failures, worded with the path
    if (!tmp.empty()) ::unlink(tmp.c_str());
    return fail(e.what());
  }
  // Still the file that was read? (A writer that skipped the lock, e.g. on
  // a filesystem without flock.)
  struct stat again;
  if (::fstatat(dir.fd, kEntryFileName, &again, AT_SYMLINK_NOFOLLOW) != 0 ||
      util::full_stamp_of(again) != read_stamp) {
    ::unlink(tmp.c_str());
    return false;
  }
  if (::renameat(AT_FDCWD, tmp.c_str(), dir.fd, kEntryFileName) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return fail(errno_message("cannot rename " + tmp + " over it", e));
  }
  // The next read of this process need not parse what it just wrote: the
  // record under the new file's own stamp (taken after the rename, which
  // moves ctime), if the name still holds it.
  struct stat now;
  if (written_inode != 0 && ::fstatat(dir.fd, kEntryFileName, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
      now.st_ino == written_inode) {
    remember_entry(entry_dir, util::full_stamp_of(now), checked);
    if (written) *written = util::full_stamp_of(now);
  }
  spdlog::debug("cache: recorded {} new stamp(s) in {}/{}", changed, entry_dir, kEntryFileName);
  return true;
}

}  // namespace tvmffi_jit::cache
