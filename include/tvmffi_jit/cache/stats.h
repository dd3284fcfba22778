// Cache counters in <root>/stats.json, updated read-modify-write under
// <root>/stats.lock (flock, bounded wait) and written by atomic rename, so a
// reader never sees a torn file and concurrent builds on one host never lose
// an update. Where flock does nothing (some network filesystems) concurrent
// updates can be lost; counters are diagnostics, never inputs to a decision.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace tvmffi_jit::cache {

struct StatsCounters {
  uint64_t hits = 0;             // module lookups answered from the cache
  uint64_t misses = 0;           // module lookups that built
  uint64_t object_hits = 0;      // translation units reused
  uint64_t object_misses = 0;    // translation units compiled
  uint64_t stores = 0;           // entries published (modules and objects)
  uint64_t bytes_stored = 0;     // artifact bytes published
  uint64_t store_failures = 0;   // builds that could not be stored (read-only, full...)
  uint64_t corrupt_entries = 0;  // entries found broken on lookup and rebuilt
  void add(const StatsCounters& o);
  bool empty() const;
};

nlohmann::json stats_to_json(const StatsCounters& s);
StatsCounters stats_from_json(const nlohmann::json& j);  // missing fields are 0

StatsCounters read_stats(const std::string& root);
// Adds `delta` to the root's counters. Never throws: failing to count must
// not fail a build.
void add_stats(const std::string& root, const StatsCounters& delta);
void zero_stats(const std::string& root);

}  // namespace tvmffi_jit::cache
