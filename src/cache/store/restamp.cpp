#include "cache/store/restamp.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <unordered_map>
#include <vector>

#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/expected.h"
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

// Why a step of the rewrite stopped it: quietly (busy, or nothing to do: a
// later hit may try again) or for a failure noted against this entry.
enum class Stop { kQuietly, kFailed };
using Stopped = Failure<Stop>;

Unexpected<Stopped> stop_quietly() { return fail(Stop::kQuietly, ""); }
Unexpected<Stopped> stop_failed(std::string why) { return fail(Stop::kFailed, std::move(why)); }

// The lock builders and publishers of this entry hold: tried once, a busy
// one means someone is replacing the entry, and these stamps can wait.
Expected<util::FileLock, Stopped> lock_entry(const std::string& locks_dir, const std::string& entry_dir) {
  util::FileLock lock;
  try {
    lock = util::FileLock::try_acquire(util::join_path(locks_dir, util::file_name(entry_dir) + ".lock"),
                                       "recording stamps");
  } catch (const Error& e) {
    return stop_failed(e.what());
  }
  if (lock.status() == util::LockStatus::kTimedOut) return stop_quietly();  // busy: not a failure
  if (!lock.locked()) return stop_failed("its lock cannot be taken");
  return lock;
}

// entry.json's text, read through the entry's directory descriptor, if it is
// still the file whose stamp was read.
Expected<std::string, Stopped> read_entry_text(int dir_fd, const util::FullStamp& read_stamp) {
  util::ScopedFd file;
  file.fd = ::openat(dir_fd, kEntryFileName, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (file.fd < 0) return stop_failed(errno_message("cannot open", errno));
  struct stat st;
  if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) return stop_failed("not a regular file");
  if (util::full_stamp_of(st) != read_stamp) return stop_quietly();  // rewritten since it was read: its writer's stamps win
  if (static_cast<uint64_t>(st.st_size) > kMaxEntryFileBytes) return stop_failed("too big");
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < text.size()) {
    auto n = util::read_some(file.fd, text.data() + got, text.size() - got);
    if (!n) return stop_failed(n.why());
    if (*n == 0) break;
    got += *n;
  }
  if (got != text.size()) return stop_failed("shorter than its stat says");
  return text;
}

// The "stat" of every artifact and header record that `checked` proved
// changes; the count of records changed.
size_t restamp_records(nlohmann::json& j, const EntryRecord& checked) {
  std::unordered_map<std::string, std::string> artifact_stamps, header_stamps;
  for (const auto& a : checked.artifacts) artifact_stamps.emplace(a.file, a.stat);
  for (const auto& h : checked.headers) header_stamps.emplace(h.path, h.stat);
  size_t changed = 0;
  if (j.contains("artifacts"))
    changed += restamp(j["artifacts"], artifact_stamps, [](const nlohmann::json& a) {
      return a.contains("file") && a["file"].is_string() ? a["file"].get<std::string>() : std::string();
    });
  if (j.contains("headers")) changed += restamp(j["headers"], header_stamps, record_path);
  return changed;
}

struct WrittenTemp {
  std::string path;
  ino_t inode = 0;  // 0: unknown
};

// The new entry.json as a temp file in <root>/tmp (gc removes one left by a crash).
Expected<WrittenTemp, Stopped> write_temp_entry(const std::string& tmp_dir, const nlohmann::json& j) {
  WrittenTemp temp;
  try {
    util::make_directories(tmp_dir, 0700);
    temp.path = util::join_path(tmp_dir, "stamps." + util::unique_name_suffix());
    auto created = util::create_new_file(temp.path, 0600);
    if (!created) return stop_failed("cannot create " + temp.path + ": " + created.why());
    util::FileWriter w = std::move(created).value();
    w.write(util::dump_json(j, 2) + "\n");
    struct stat written;
    if (::fstat(w.fd(), &written) == 0) temp.inode = written.st_ino;
    w.close();
  } catch (const Error& e) {  // FileWriter's write/close failures, worded with the path
    if (!temp.path.empty()) ::unlink(temp.path.c_str());
    return stop_failed(e.what());
  }
  return temp;
}

// Renames the temp file over entry.json through the directory's descriptor,
// if the name still holds the file that was read (a writer that skipped the
// lock, e.g. on a filesystem without flock, wins).
Expected<void, Stopped> rename_over_entry(int dir_fd, const std::string& tmp, const util::FullStamp& read_stamp) {
  struct stat again;
  if (::fstatat(dir_fd, kEntryFileName, &again, AT_SYMLINK_NOFOLLOW) != 0 ||
      util::full_stamp_of(again) != read_stamp) {
    ::unlink(tmp.c_str());
    return stop_quietly();
  }
  if (::renameat(AT_FDCWD, tmp.c_str(), dir_fd, kEntryFileName) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return stop_failed(errno_message("cannot rename " + tmp + " over it", e));
  }
  return {};
}

// The next read of this process need not parse what it just wrote: the
// record under the new file's own stamp (taken after the rename, which
// moves ctime), if the name still holds it.
void remember_rewritten(int dir_fd, const std::string& entry_dir, ino_t written_inode, const EntryRecord& checked,
                        util::FullStamp* written) {
  struct stat now;
  if (written_inode != 0 && ::fstatat(dir_fd, kEntryFileName, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
      now.st_ino == written_inode) {
    remember_entry(entry_dir, util::full_stamp_of(now), checked);
    if (written) *written = util::full_stamp_of(now);
  }
}

// Lock, read, restamp, write, rename: the count of records changed.
Expected<size_t, Stopped> rewrite_with_new_stamps(const std::string& locks_dir, const std::string& tmp_dir,
                                                  const std::string& entry_dir, const EntryRecord& checked,
                                                  const util::FullStamp& read_stamp, util::FullStamp* written) {
  auto lock = lock_entry(locks_dir, entry_dir);
  if (!lock) return Unexpected{std::move(lock).error()};
  // The directory by descriptor: if the entry is renamed away (gc, a
  // publish replacing it) the new entry.json lands in the old directory,
  // never in a new entry at the same path.
  util::ScopedFd dir;
  dir.fd = ::open(entry_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dir.fd < 0) return stop_failed(errno_message("cannot open", errno));
  auto text = read_entry_text(dir.fd, read_stamp);
  if (!text) return Unexpected{std::move(text).error()};
  // The file as it is, fields this version does not know included: only
  // the "stat" of records this lookup proved changes.
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return stop_failed("not a JSON object");
  const size_t changed = restamp_records(j, checked);
  if (changed == 0) return stop_quietly();
  auto temp = write_temp_entry(tmp_dir, j);
  if (!temp) return Unexpected{std::move(temp).error()};
  if (auto renamed = rename_over_entry(dir.fd, temp->path, read_stamp); !renamed)
    return Unexpected{std::move(renamed).error()};
  remember_rewritten(dir.fd, entry_dir, temp->inode, checked, written);
  return changed;
}

}  // namespace

bool record_stamps(const std::string& locks_dir, const std::string& tmp_dir, const std::string& entry_dir,
                   const EntryRecord& checked, const util::FullStamp& read_stamp, util::FullStamp* written) {
  if (read_stamp.inode == 0 || failed_rewrites().failed_before(entry_dir, read_stamp)) return false;
  auto changed = rewrite_with_new_stamps(locks_dir, tmp_dir, entry_dir, checked, read_stamp, written);
  if (!changed) {
    if (changed.error().kind == Stop::kFailed) {
      spdlog::debug("cache: not recording new stamps in {}/{}: {}", entry_dir, kEntryFileName, changed.why());
      failed_rewrites().note(entry_dir, read_stamp);
    }
    return false;
  }
  spdlog::debug("cache: recorded {} new stamp(s) in {}/{}", *changed, entry_dir, kEntryFileName);
  return true;
}

}  // namespace tvmffi_jit::cache
