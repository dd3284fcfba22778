#include "tvmffi_jit/cache/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <ctime>
#include <random>
#include <unordered_map>

#include "cache/store/restamp.h"
#include "cache/store/temporaries.h"
#include "cache/store/watched_proofs.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/entry.h"
#include "tvmffi_jit/cache/results.h"
#include "tvmffi_jit/util/change_watch.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fork_safe.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/hash.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/stamp.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

std::string unique_suffix() {
  static thread_local std::mt19937_64 rng(util::random_seed() ^ static_cast<uint64_t>(::getpid()));
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

// A lookup of `dir` that ends before reading anything: "absent", or "not a
// directory" (a symlink or file where an entry or a key's directory should
// be: never followed, replaced on publish). An empty miss_reason: go on.
LookupResult directory_miss(const std::string& dir) {
  LookupResult r;
  r.entry_dir = dir;
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    r.miss_reason = "absent";
  } else if (!S_ISDIR(st.st_mode)) {
    r.miss_reason = "not a directory";
    r.corrupt = true;
  }
  return r;
}

}  // namespace

std::string LookupResult::artifact_path(size_t i) const {
  if (!entry || i >= entry->artifacts.size()) return "";
  return util::join_path(entry_dir, entry->artifacts[i].file);
}

std::string LookupResult::artifact_path(const std::string& file) const {
  if (!entry) return "";
  for (const auto& a : entry->artifacts)
    if (a.file == file) return util::join_path(entry_dir, a.file);
  return "";
}

Expected<void> check_artifact(const std::string& entry_dir, const ArtifactRecord& a, bool rehash, Rehashed* rehashed,
                              std::string* new_stat) {
  FileCheckOptions how;
  how.follow_symlinks = false;
  how.use_stamps = !rehash;
  FileCheck c = check_recorded_file(util::join_path(entry_dir, a.file), a.size, a.sha256, a.stat, how, rehashed);
  if (new_stat) *new_stat = c.new_stat;
  switch (c.problem) {
    case FileProblem::kNone: return {};
    case FileProblem::kMissing: return Unexpected{"artifact " + a.file + " is missing"};
    case FileProblem::kNotRegular: return Unexpected{"artifact " + a.file + " is not a regular file"};
    case FileProblem::kSize:
      return Unexpected{"artifact " + a.file + " has " + std::to_string(c.found_size) + " bytes, entry.json says " +
                        std::to_string(a.size)};
    case FileProblem::kContent: return Unexpected{"artifact " + a.file + " does not match its SHA-256"};
    case FileProblem::kUnreadable: return Unexpected{"artifact " + a.file + " cannot be read: " + c.detail};
  }
  return Unexpected{"artifact " + a.file + ": unknown check result"};
}

void Staging::keep() {
  try {
    util::write_file(util::join_path(path(), kStagingKeptMarker),
                     "kept for the user by tvmffi-jit (pid " + std::to_string(::getpid()) + ")\n");
  } catch (const Error&) {
    // Without the marker a later build may remove it once this process is gone: no worse than gc.
  }
  dir_.keep();
}

std::string Staging::build_dir() const { return util::join_path(path(), "build"); }
std::string Staging::entry_dir() const { return util::join_path(path(), "entry"); }

std::string Staging::move_artifact_out(const std::string& built_path, const std::string& file_name,
                                       const std::string& label) const {
  std::string from = built_path;
  if (!util::is_regular_file(from)) from = util::join_path(entry_dir(), file_name);
  try {
    util::TempDir out(util::temp_root(), "tvmffi-jit-" + label + "-");
    std::string to = util::join_path(out.path(), file_name);
    move_file(from, to);
    out.keep();
    return to;
  } catch (const Error& e) {
    throw io_error(std::string(e.what()) + "; the build of " + label + " succeeded but its artifact can neither be " +
                   "stored in the cache nor moved out of it (is " + util::temp_root() +
                   " full?); free some space or pass --build-dir DIR");
  }
}

Store::Store(CacheRoot root) : root_(std::move(root)) {}

bool Store::check_writable() {
  if (!root_.write_probed) probe_root_writable(root_);
  return root_.writable;
}

std::string Store::module_key_dir(const std::string& name, const std::string& key_hex) const {
  if (!is_valid_file_name(name))
    throw usage_error("invalid module name '" + name.substr(0, 64) + "' for the cache: use 1-" +
                      std::to_string(kMaxFileNameLength) + " characters from [A-Za-z0-9_.-], not starting with '.'");
  return util::join_path(root_.path, module_entry_dir_name(name, key_hex));
}

std::string Store::object_entry_dir(const std::string& key_hex) const {
  return util::join_path(util::join_path(util::join_path(root_.path, "objects"), key_hex.substr(0, 2)), key_hex);
}

std::string Store::compilers_dir() const { return util::join_path(root_.path, "compilers"); }
DigestMemo Store::digest_memo(bool record) const {
  return {util::join_path(root_.path, "digests"), record && root_.writable};
}
std::string Store::tmp_dir() const { return util::join_path(root_.path, "tmp"); }
std::string Store::locks_dir() const { return util::join_path(root_.path, "locks"); }

LookupResult Store::lookup(const std::string& entry_dir, const std::string& key_hex,
                           const LookupOptions& options) const {
  util::OneMountTablePoll one_poll;  // for every file this lookup checks
  LookupResult r = directory_miss(entry_dir);
  if (!r.miss_reason.empty()) return r;
  util::FullStamp read_stamp;
  auto read = read_entry(entry_dir, &read_stamp);
  if (!read) {
    r.miss_reason = read.why();
    r.corrupt = true;
    return r;
  }
  r.entry = *read;
  if (r.entry->key != key_hex) {
    r.miss_reason = "entry holds key " + r.entry->key.substr(0, 16) + "... (prefix collision or foreign entry)";
    r.corrupt = true;
    return r;
  }
  for (const auto& file : options.required_artifacts) {
    if (r.artifact_path(file).empty()) {
      r.miss_reason = "entry.json does not list " + file;
      r.corrupt = true;
      return r;
    }
  }
  // A result this process proved while watched, with nothing it depends on
  // changed since (util/change_watch.h) and its stat-checked files as they
  // were: the stats below would find what they found then. --verify and
  // object lookups re-hash, never this.
  const bool may_watch = !options.rehash_artifacts && util::ChangeWatch::global().enabled();
  if (may_watch && watched_proof_holds(entry_dir, read_stamp)) {
    r.hit = true;
    r.watched = true;
    r.miss_reason.clear();
    ::utimensat(AT_FDCWD, entry_dir.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
    return r;
  }
  // Watched, and the stat-checked files stamped, before the stats that prove
  // it: a change racing them voids it.
  PendingProof proof = may_watch ? watch_result(entry_dir, *r.entry) : PendingProof();
  std::optional<std::vector<StatChecked>> stat_checked;
  if (proof) stat_checked = stamp_stat_checked(entry_dir, *r.entry, options.toolchain_dirs);
  // The checks below record new stamps in the record: a copy of the one
  // read_entry shares.
  auto checked = std::make_shared<EntryRecord>(*r.entry);
  r.entry = checked;
  for (auto& a : checked->artifacts) {
    std::string new_stat;
    if (auto intact = check_artifact(entry_dir, a, options.rehash_artifacts, &r.rehashed, &new_stat); !intact) {
      r.miss_reason = intact.why();
      r.corrupt = true;
      return r;
    }
    if (!new_stat.empty()) a.stat = std::move(new_stat);
  }
  if (auto held = check_and_stamp_headers(checked->headers, digest_memo(false), &r.rehashed); !held) {
    r.miss_reason = "header " + held.why();
    return r;
  }
  r.hit = true;
  r.miss_reason.clear();
  // Remembered under the entry.json it proved, or under the one
  // record_stamps wrote from it (the same record with new stamps).
  util::FullStamp proven_stamp = read_stamp, written;
  if (r.rehashed.restamped > 0 && root_.writable && record_stamps(locks_dir(), tmp_dir(), entry_dir, *r.entry, read_stamp, &written) &&
      written.inode != 0)
    proven_stamp = written;
  if (proof && stat_checked)
    keep_watched_proof(entry_dir, proven_stamp, proof.take(), std::move(*stat_checked));
  // Last-use time for gc ordering; a read-only root simply keeps the old one.
  ::utimensat(AT_FDCWD, entry_dir.c_str(), nullptr, AT_SYMLINK_NOFOLLOW);
  return r;
}

LookupResult Store::find_result(const std::string& key_dir, const std::string& key_hex,
                                const LookupOptions& options) const {
  util::OneMountTablePoll one_poll;  // for every file the results' checks read
  LookupResult miss = directory_miss(key_dir);
  if (!miss.miss_reason.empty()) return miss;
  std::vector<ResultDir> results = list_result_dirs(key_dir);
  if (results.empty()) {
    miss.miss_reason = "absent";
    return miss;
  }
  Rehashed rehashed;  // over every result tried: each re-read is counted once
  for (const auto& result : results) {
    // What sets this result apart from the key's others, checked first
    // (cache/results.h): one built against other headers is passed over.
    if (results.size() > 1)
      if (auto held = check_headers(read_distinct_inputs(result.path), digest_memo(false)); !held) {
        if (miss.miss_reason.empty()) miss.miss_reason = "header " + held.why();
        continue;
      }
    LookupResult r = lookup(result.path, key_hex, options);
    rehashed.files += r.rehashed.files;
    rehashed.bytes += r.rehashed.bytes;
    if (r.hit && options.refuses) {
      if (auto why = options.refuses(*r.entry)) {
        r.hit = false;
        r.miss_reason = "not trusted: " + *why;
        miss.refused.emplace_back(result.path, *why);
      }
    }
    if (r.hit) {
      r.rehashed = rehashed;
      r.refused = std::move(miss.refused);
      return r;
    }
    if (miss.miss_reason.empty()) miss.miss_reason = r.miss_reason;
    miss.corrupt = miss.corrupt || r.corrupt;
  }
  miss.rehashed = rehashed;
  if (results.size() > 1)
    miss.miss_reason = "none of " + std::to_string(results.size()) + " results matches (the latest: " +
                       miss.miss_reason + ")";
  return miss;
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
      // The holder's note says what it is doing ("building add_one").
      spdlog::warn("waiting for pid {}{}, which is {} (lock {})", h.pid,
                   h.host.empty() || h.host == util::host_name() ? "" : " on " + h.host,
                   h.note.empty() ? "building " + util::file_name(entry_dir) : h.note, path);
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
  // What an interrupted build of this host left (its process killed before
  // it could clean up): a build removes it, not only `cache gc`.
  remove_interrupted_staging(tmp_dir());
  return Staging::create(
      util::TempDir(tmp_dir(), "stage." + util::host_name() + "." + std::to_string(::getpid()) + "."));
}

Staging Staging::create(util::TempDir dir) {
  Staging s(std::move(dir));
  if (::mkdir(s.build_dir().c_str(), 0700) != 0 || ::mkdir(s.entry_dir().c_str(), 0700) != 0)
    throw io_error(errno_message("cannot create the staging directory " + s.path(), errno));
  return s;
}

namespace {

// Moves `files` into the staging entry dir and completes `record` (format
// fields, artifacts), then writes its entry.json there.
void prepare_entry(Staging& staging, EntryRecord& record,
                   const std::vector<std::pair<std::string, std::string>>& files, const std::string& entry_dir) {
  record.format_version = kCacheFormatVersion;
  if (record.tool_version.empty()) record.tool_version = TVMFFI_JIT_VERSION;
  record.created = static_cast<int64_t>(std::time(nullptr));
  record.artifacts.clear();
  for (const auto& [from, name] : files) {
    if (!is_valid_file_name(name)) throw io_error("internal: artifact name '" + name + "' is not a plain file name");
    std::string to = util::join_path(entry_dir, name);
    move_file(from, to);
    ArtifactRecord a;
    a.file = name;
    // Its stamp too, when already settled (an artifact built long ago and
    // published now); a fresh one is stamped by its first hit 2 s later.
    Expected<HashedFile> hashed = hash_file_stamped(to, false);
    if (!hashed) throw io_error("cannot read " + to + ": " + hashed.why());
    a.size = hashed->size;
    a.sha256 = std::move(hashed->sha256);
    a.stat = std::move(hashed->stat);
    record.artifacts.push_back(std::move(a));
  }
  util::write_file(util::join_path(entry_dir, kEntryFileName), entry_file_text(record));
}

}  // namespace

PublishResult Store::publish(Staging& staging, const std::string& entry_dir, EntryRecord record,
                             const std::vector<std::pair<std::string, std::string>>& files,
                             const KeepOccupant& keep) const {
  prepare_entry(staging, record, files, staging.entry_dir());
  return commit(staging, entry_dir, std::move(record), keep);
}

PublishResult Store::publish_result(Staging& staging, const std::string& key_dir, EntryRecord record,
                                    const std::vector<std::pair<std::string, std::string>>& files,
                                    const KeepOccupant& keep) const {
  prepare_entry(staging, record, files, staging.entry_dir());
  return commit_result(staging, key_dir, std::move(record), keep);
}

PublishResult Store::publish_prepared(Staging& staging, const std::string& key_dir, EntryRecord record,
                                      const KeepOccupant& keep) const {
  return commit_result(staging, key_dir, std::move(record), keep);
}

PublishResult Store::commit_result(Staging& staging, const std::string& key_dir, EntryRecord record,
                                   const KeepOccupant& keep) const {
  struct stat st;
  if (::lstat(key_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    // A symlink or file where the key's directory should be: never followed, replaced.
    spdlog::debug("replacing {}: not a directory", key_dir);
    remove_entry(key_dir);
  }
  const std::string dir = util::join_path(key_dir, result_dir_name(result_id(record)));
  PublishResult p = commit(staging, dir, std::move(record), keep);
  if (p.ours) {
    evict_results(key_dir, dir);
    note_distinct_inputs(key_dir, dir, p.entry);
  }
  return p;
}

void Store::evict_results(const std::string& key_dir, const std::string& keep) const {
  std::vector<ResultDir> results = list_result_dirs(key_dir);
  size_t kept = 0;
  for (const auto& r : results) {
    if (r.path == keep || kept + 1 < kMaxResultsPerKey) {
      if (r.path != keep) ++kept;
      continue;
    }
    try {
      if (remove_entry(r.path)) spdlog::debug("cache: {} holds more than {} results: removed {}", key_dir,
                                              kMaxResultsPerKey, r.path);
    } catch (const Error& e) {
      spdlog::debug("cache: cannot remove {}: {}", r.path, e.what());
    }
  }
}

PublishResult Store::commit(Staging& staging, const std::string& entry_dir, EntryRecord record,
                            const KeepOccupant& keep) const {
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
    if (e == ENOENT) {
      // `cache gc` removed the (empty) key directory in between.
      util::make_directories(util::parent_path(entry_dir), 0700);
      continue;
    }
    if (e != ENOTEMPTY && e != EEXIST && e != ENOTDIR && e != EISDIR)
      throw io_error(errno_message("cannot publish " + entry_dir, e));
    // Same-size corruption of the occupant must not make it the winner.
    LookupOptions check_all;
    check_all.rehash_artifacts = true;
    for (const auto& a : record.artifacts) check_all.required_artifacts.push_back(a.file);
    LookupResult existing = lookup(entry_dir, record.key, check_all);
    if (existing.hit && keep && !keep(*existing.entry)) {
      existing.hit = false;
      existing.miss_reason = "replaced (--force, or its provenance is not trusted here)";
    }
    if (existing.hit) {
      PublishResult p;
      p.entry_dir = entry_dir;
      p.entry = *existing.entry;
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
