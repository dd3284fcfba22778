#include "tvmffi_jit/cache/stats.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cache {

namespace {

std::string stats_path(const std::string& root) { return util::join_path(root, "stats.json"); }
std::string journal_path(const std::string& root) { return util::join_path(root, "stats.log"); }
std::string stats_lock_path(const std::string& root) { return util::join_path(root, "stats.lock"); }

// stats.json holds eight numbers; a journal is folded past kStatsFoldBytes.
// Anything much bigger was not written by us and is not read.
constexpr uint64_t kMaxTotalsBytes = 64u << 10;
constexpr uint64_t kMaxJournalBytes = 16u << 20;

#define TVMFFI_JIT_STATS_FIELDS(X) \
  X(hits) X(misses) X(object_hits) X(object_misses) X(stores) X(bytes_stored) X(store_failures) X(corrupt_entries) X(launcher_fallbacks) \
  X(remote_hits) X(remote_misses) X(remote_errors) X(remote_timeouts) X(remote_corrupt) X(remote_stores) X(remote_bytes_received) \
  X(remote_bytes_sent) X(imported_hits) X(remote_untrusted) X(rehashed_files) X(rehashed_bytes)

// Sums the complete lines of a journal; a torn last line (a crash between
// the bytes of one write, or a full disk) is ignored.
StatsCounters sum_journal(std::string_view text) {
  StatsCounters sum;
  size_t p = 0;
  while (p < text.size()) {
    size_t e = text.find('\n', p);
    if (e == std::string_view::npos) break;
    auto j = nlohmann::json::parse(text.substr(p, e - p), nullptr, false);
    if (!j.is_discarded()) sum.add(stats_from_json(j));
    p = e + 1;
  }
  return sum;
}

struct Totals {
  StatsCounters counters;
  uint64_t generation = 0;  // the last journal generation folded in
};

Totals read_totals(const std::string& root) {
  Totals t;
  auto text = util::read_small_file(stats_path(root), kMaxTotalsBytes);
  if (!text) return t;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  t.counters = stats_from_json(j);
  if (j.is_object() && j.contains("generation") && j["generation"].is_number_unsigned())
    t.generation = j["generation"].get<uint64_t>();
  return t;
}

void write_totals(const std::string& root, const Totals& t) {
  nlohmann::json j = stats_to_json(t.counters);
  j["generation"] = t.generation;
  util::write_file_atomic(stats_path(root), util::dump_json(j, 2) + "\n", 0600);
}

util::FileLock stats_lock(const std::string& root) {
  util::LockOptions lo;
  lo.timeout_seconds = 5;  // a stuck holder costs a late fold, not a hang
  lo.notice_after_seconds = 1e9;
  return util::FileLock::acquire(stats_lock_path(root), lo);
}

// Under the stats lock. The journal is renamed to stats.log.<generation+1>
// (appends from here on start a new journal), added to the totals, and the
// totals are written with that generation before the renamed journal is
// removed. A fold that crashed half-way left stats.log.<g>: it was counted
// iff g <= the generation in stats.json, so a later fold neither loses nor
// double-counts it.
void fold_locked(const std::string& root) {
  Totals t = read_totals(root);
  bool changed = false;
  std::vector<std::pair<uint64_t, std::string>> leftovers;  // from folds that died half-way
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(root, ec)) {
    std::string name = item.path().filename().string();
    if (!util::starts_with(name, "stats.log.")) continue;
    try {
      leftovers.emplace_back(std::stoull(name.substr(10)), item.path().string());
    } catch (const std::exception&) {
    }
  }
  std::sort(leftovers.begin(), leftovers.end());
  const uint64_t counted = t.generation;
  std::vector<std::string> done;
  for (const auto& [g, path] : leftovers) {
    if (g > counted) {
      if (auto text = util::read_small_file(path, kMaxJournalBytes)) t.counters.add(sum_journal(*text));
      t.generation = g;
      changed = true;
    }
    done.push_back(path);
  }
  std::string journal = journal_path(root);
  std::string folding = journal + "." + std::to_string(t.generation + 1);
  if (::rename(journal.c_str(), folding.c_str()) == 0) {
    // Waits out appends that opened the journal before the rename.
    int fd = ::open(folding.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) ::flock(fd, LOCK_EX);
    if (auto text = util::read_small_file(folding, kMaxJournalBytes)) t.counters.add(sum_journal(*text));
    if (fd >= 0) ::close(fd);
    t.generation += 1;
    changed = true;
    done.push_back(folding);
  } else if (errno != ENOENT) {
    throw io_error(errno_message("cannot rename " + journal, errno));
  }
  if (changed) write_totals(root, t);
  for (const std::string& path : done) ::unlink(path.c_str());
}

}  // namespace

void StatsCounters::add(const StatsCounters& o) {
#define X(f) f += o.f;
  TVMFFI_JIT_STATS_FIELDS(X)
#undef X
}

bool StatsCounters::empty() const {
  bool any = false;
#define X(f) any = any || f != 0;
  TVMFFI_JIT_STATS_FIELDS(X)
#undef X
  return !any;
}

nlohmann::json stats_to_json(const StatsCounters& s) {
  nlohmann::json j = nlohmann::json::object();
#define X(f) j[#f] = s.f;
  TVMFFI_JIT_STATS_FIELDS(X)
#undef X
  return j;
}

StatsCounters stats_from_json(const nlohmann::json& j) {
  StatsCounters s;
  if (!j.is_object()) return s;
#define X(f) \
  if (j.contains(#f) && j[#f].is_number_unsigned()) s.f = j[#f].get<uint64_t>();
  TVMFFI_JIT_STATS_FIELDS(X)
#undef X
  return s;
}

StatsCounters read_stats(const std::string& root) {
  // Journals left by a fold that crashed are settled by the next fold
  // (cache stats folds before it reads).
  StatsCounters s = read_totals(root).counters;
  if (auto text = util::read_small_file(journal_path(root), kMaxJournalBytes)) s.add(sum_journal(*text));
  return s;
}

namespace {

// Appends `text` to the journal. The shared flock pairs with the fold's
// exclusive one: a writer that opened the journal before a fold renamed it
// either finishes before the fold reads it, or sees (same lock held) that
// the path now names another file and appends to that one instead.
// Returns the journal's size after the append, or -1.
off_t append_to_journal(const std::string& journal, const std::string& text) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    int fd = ::open(journal.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
      spdlog::debug("cannot update cache statistics in {}: {}", journal, std::strerror(errno));
      return -1;
    }
    struct stat opened, named;
    if (::flock(fd, LOCK_SH) != 0 || ::fstat(fd, &opened) != 0) {
      ::close(fd);
      return -1;
    }
    if (::stat(journal.c_str(), &named) != 0 || named.st_ino != opened.st_ino || named.st_dev != opened.st_dev) {
      ::close(fd);  // folded away under us: append to the new journal
      continue;
    }
    ssize_t n = ::write(fd, text.data(), text.size());
    off_t end = n > 0 ? ::lseek(fd, 0, SEEK_CUR) : -1;  // O_APPEND leaves the offset at the end
    ::close(fd);
    if (n != static_cast<ssize_t>(text.size())) {
      spdlog::debug("cannot update cache statistics in {}: short write", journal);
      return -1;
    }
    return end;
  }
  return -1;
}

}  // namespace

void add_stats(const std::string& root, const StatsCounters& delta, uint64_t fold_bytes) {
  if (delta.empty()) return;
  // Only the non-zero fields: a hit appends about a dozen bytes.
  nlohmann::json line = nlohmann::json::object();
#define X(f) \
  if (delta.f) line[#f] = delta.f;
  TVMFFI_JIT_STATS_FIELDS(X)
#undef X
  off_t end = append_to_journal(journal_path(root), util::dump_json(line) + "\n");
  if (end >= 0 && static_cast<uint64_t>(end) > fold_bytes) fold_stats(root);
}

void fold_stats(const std::string& root) {
  try {
    util::FileLock lock = stats_lock(root);
    fold_locked(root);
  } catch (const std::exception& e) {
    spdlog::debug("cannot fold cache statistics in {}: {}", root, e.what());
  }
}

void zero_stats(const std::string& root) {
  util::FileLock lock = util::FileLock::acquire(stats_lock_path(root), {});
  fold_locked(root);  // settles the generation, so no old journal is counted again
  Totals t = read_totals(root);
  t.counters = {};
  write_totals(root, t);
}

}  // namespace tvmffi_jit::cache
