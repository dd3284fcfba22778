#include "tvmffi_jit/cache/stats.h"

#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::cache {

namespace {

std::string stats_path(const std::string& root) { return util::join_path(root, "stats.json"); }
std::string stats_lock_path(const std::string& root) { return util::join_path(root, "stats.lock"); }

#define TVMFFI_JIT_STATS_FIELDS(X) \
  X(hits) X(misses) X(object_hits) X(object_misses) X(stores) X(bytes_stored) X(store_failures) X(corrupt_entries)

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
  auto text = util::try_read_file(stats_path(root));
  if (!text) return {};
  return stats_from_json(nlohmann::json::parse(*text, nullptr, false));
}

void add_stats(const std::string& root, const StatsCounters& delta) {
  if (delta.empty()) return;
  try {
    util::LockOptions lo;
    lo.timeout_seconds = 5;  // a stuck holder costs us a lost update, not a hang
    lo.notice_after_seconds = 1e9;
    util::FileLock lock = util::FileLock::acquire(stats_lock_path(root), lo);
    StatsCounters s = read_stats(root);
    s.add(delta);
    util::write_file_atomic(stats_path(root), stats_to_json(s).dump(2) + "\n", 0600);
  } catch (const std::exception& e) {
    spdlog::debug("cannot update cache statistics in {}: {}", root, e.what());
  }
}

void zero_stats(const std::string& root) {
  util::FileLock lock = util::FileLock::acquire(stats_lock_path(root), {});
  util::write_file_atomic(stats_path(root), stats_to_json({}).dump(2) + "\n", 0600);
}

}  // namespace tvmffi_jit::cache
