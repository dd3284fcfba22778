// Cache counters. A build adds its counts by appending one line to
// <root>/stats.log (O_APPEND, one write under a shared flock of the journal
// itself; no rename), because a cache hit is budgeted at a few milliseconds
// and replacing a file by rename costs ext4 a data flush. <root>/stats.json
// holds the folded totals: when the journal passes kStatsFoldBytes, the writer
// that noticed folds it into stats.json under <root>/stats.lock, numbering
// each folded journal so that a fold killed half-way neither loses nor
// double-counts lines. Readers add stats.json and the journal. A line torn by
// a crash is skipped; where flock does nothing (some network filesystems) an
// append racing a fold can be lost. Counters are diagnostics, never inputs to
// a decision.
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
  uint64_t launcher_fallbacks = 0;  // compiles re-run without their launcher (it exited 0 without the outputs)
  // The shared tiers (cache/storage.h).
  uint64_t remote_hits = 0;            // module lookups answered by a remote server
  uint64_t remote_misses = 0;          // remote lookups that found nothing usable (then built)
  uint64_t remote_errors = 0;          // servers given up on (unreachable, timed out, bad answers)
  uint64_t remote_timeouts = 0;        // of those, the ones given up on for missing a deadline
  uint64_t remote_corrupt = 0;         // blobs rejected by verification
  uint64_t remote_stores = 0;          // blobs uploaded
  uint64_t remote_bytes_received = 0;  // blob bytes downloaded
  uint64_t remote_bytes_sent = 0;      // blob bytes uploaded
  uint64_t imported_hits = 0;          // module lookups answered by `cache import`ed entries
  uint64_t remote_untrusted = 0;       // remote/imported entries not used: no trusted key signed them
  // Files local lookups re-hashed because their stamps did not prove them
  // (cache/proof.h), and their bytes.
  uint64_t rehashed_files = 0;
  uint64_t rehashed_bytes = 0;
  void add(const StatsCounters& o);
  bool empty() const;
};

// Journal size above which an update also folds the journal into stats.json.
constexpr uint64_t kStatsFoldBytes = 64 * 1024;

nlohmann::json stats_to_json(const StatsCounters& s);
StatsCounters stats_from_json(const nlohmann::json& j);  // missing fields are 0

// stats.json plus every complete journal line.
StatsCounters read_stats(const std::string& root);
// Adds `delta` to the root's counters, folding the journal when it has grown
// past `fold_bytes`. Never throws: failing to count must not fail a build.
void add_stats(const std::string& root, const StatsCounters& delta, uint64_t fold_bytes = kStatsFoldBytes);
// Folds the journal into stats.json now (cache stats does, so that the
// journal stays short for readers). Never throws.
void fold_stats(const std::string& root);
void zero_stats(const std::string& root);

}  // namespace tvmffi_jit::cache
