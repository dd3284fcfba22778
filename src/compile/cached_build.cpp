// Module orchestration: the key, the cache tiers around a build, the entry.
// The jobs it calls on live beside it: module_key (what is hashed),
// object_cache (per-unit hooks), module_reads (what the build read),
// uncached_build (building outside the root), compiler_output (replay).
#include "tvmffi_jit/compile/cached_build.h"

#include <optional>

#include "compile/compiler_identities.h"
#include "compile/compiler_output.h"
#include "compile/freshness.h"
#include "compile/module_key.h"
#include "compile/module_reads.h"
#include "compile/object_cache.h"
#include "compile/uncached_build.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/lock.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::compile {

CachedBuildResult cached_build(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                               const CachedBuildOptions& options) {
  if (!options.environment)
    throw io_error("internal: cached_build() of " + plan.name + " without the environment its key needs");
  // Writability is probed on a miss only: a hit stores nothing but counters
  // and compiler identity memos, and those writes may fail quietly.
  const int64_t call_start = now_ns();  // a hit reports its own time, not the original build's
  cache::Store store(cache::open_root(cache::resolve_root_path(options.cache_dir), true, false));
  CompilerIdentities ids(store.compilers_dir(), true);
  const int64_t key_start = now_ns();  // sources are read for the key from here on

  cache::ModuleKeyInputs key_inputs = key_inputs_with(plan, manifest, tc, ids, *options.environment);
  key_inputs.base_dir = options.base_dir;
  cache::Key key = cache::compute_module_key(key_inputs, options.keep_key_trace);
  if (options.keep_key_trace) spdlog::debug("cache: module key of {}: {}, hashed from:\n{}", plan.name, key.hex, key.trace);
  const std::string entry_dir = store.module_entry_dir(plan.name, key.hex);

  CachedBuildResult result;
  result.key = key.hex;
  result.key_trace = key.trace;
  cache::StatsCounters stats;

  // ==== cache tiers (to become one cache::Storage call): local lookup -> lock -> lookup again ->
  // imported/remote -> (cannot store: build outside the root) -> staging

  // A hit serves only the artifact entry.json lists, at its recorded size,
  // re-hashed when small (docs/cache.md, "What the cache promises").
  cache::LookupOptions module_lookup;
  module_lookup.required_artifacts = {plan.artifact_name};
  module_lookup.verify_digest_up_to = options.verify ? cache::kVerifyAll : cache::kVerifyOnHitMaxBytes;
  auto answer_hit = [&](const cache::LookupResult& r) {
    result.cache = "hit";
    result.entry_dir = r.entry_dir;
    result.build.build_dir = r.entry_dir;
    result.build.artifact_path = r.artifact_path(plan.artifact_name);
    if (r.entry) replay_output(r.entry->compiler_output, options.exec);
    stats.hits += 1;
    store.count(stats);
    result.build.seconds = static_cast<double>(now_ns() - call_start) * 1e-9;
    return result;
  };

  if (options.force) {
    result.miss_reason = "--force";
  } else {
    cache::LookupResult r = store.lookup(entry_dir, key.hex, module_lookup);
    spdlog::debug("cache: module {}: {}", plan.name, r.hit ? "hit in " + r.entry_dir : "miss (" + r.miss_reason + ")");
    if (r.hit) return answer_hit(r);
    result.miss_reason = r.miss_reason;
    if (r.corrupt) ++stats.corrupt_entries;
  }
  result.cache = "miss";
  if (options.only_if_cached) return result;  // the caller builds (or asks the remotes) in a process of its own
  std::optional<std::string> cannot_store = unwritable_reason(store);

  util::FileLock lock;
  if (!cannot_store) {
    lock = store.lock(entry_dir, "building " + plan.name, options.lock_timeout_seconds);
    // Whoever held the lock may have just published this very entry.
    if (!options.force || lock.waited_seconds() > 0.05) {
      cache::LookupResult r = store.lookup(entry_dir, key.hex, module_lookup);
      if (r.hit) return answer_hit(r);
    }
  }

  // ---- remote tier (cache/remote.h): an imported or remote entry instead of a build.
  cache::RemoteTier remote(options.remote, store, &stats);
  if (!cannot_store && !options.force) {
    if (std::optional<cache::RemoteHit> hit =
            remote.fetch(plan.name, key, options.base_dir, entry_dir, plan.artifact_name)) {
      result.cache = "remote-hit";
      result.remote_source = hit->source;
      result.entry_dir = hit->lookup.entry_dir;
      result.build.build_dir = hit->lookup.entry_dir;
      result.build.artifact_path = hit->lookup.artifact_path(plan.artifact_name);
      store.count(stats);
      result.build.seconds = static_cast<double>(now_ns() - call_start) * 1e-9;
      return result;
    }
  }
  // ---- end of the remote lookup

  stats.misses += 1;
  if (cannot_store) {
    result.build = build_outside_cache(plan, *cannot_store, options);
    stats.store_failures += 1;
    store.count(stats);
    return result;
  }

  std::optional<cache::Staging> staging;
  try {
    staging.emplace(store.stage());
  } catch (const Error& e) {
    result.build = build_outside_cache(plan, e.what(), options);
    stats.store_failures += 1;
    store.count(stats);
    return result;
  }
  // ==== end of the lookup tiers

  if (options.exec.verbose) spdlog::info("cache miss for {} ({}): building in {}", plan.name, result.miss_reason,
                                         staging->build_dir());
  // The units through the object cache (only when there is a link: a plan
  // whose one compile is the artifact has the module entry as its cache).
  const int64_t start = now_ns();
  UnitCache units(plan, manifest, tc, store, ids, options, plan.link.has_value());
  result.build = execute_in_disposable_dir(plan, staging->build_dir(), options.exec, units.hooks(),
                                          [&] { staging->keep(); },
                                          "`tvmffi-jit cache gc` or `cache clean` removes it once this process is gone");
  result.objects_reused = units.reused();
  result.objects_compiled = units.compiled();
  stats.add(units.stats());
  auto [headers, moved_header, unrecorded_link] =
      record_module_reads(plan, result.build, units, store, options, start, key_start);

  // ==== cache tiers: publish the entry (or serve the artifact unstored), then upload
  // Not stored: the artifact leaves the staging dir (which gc removes once
  // this process is gone) for a directory of the caller's.
  auto serve_unstored = [&](const std::string& why) {
    stats.store_failures += 1;
    store.count(stats);
    result.build.artifact_path =
        staging->move_artifact_out(result.build.artifact_path, plan.artifact_name, plan.name);
    result.build.build_dir = util::parent_path(result.build.artifact_path);
    spdlog::warn("cache: {}; not caching this build: its artifact is in {} (yours to keep or delete)", why,
                 result.build.build_dir);
    return result;
  };
  if (auto moved = moved_header) return serve_unstored(*moved + " changed while " + plan.name + " was being built");
  if (unrecorded_link) return serve_unstored(*unrecorded_link);

  cache::EntryRecord record;
  record.kind = "module";
  record.name = plan.name;
  record.key = key.hex;
  record.portable_key = key.portable_hex;
  record.base_dir = options.base_dir;
  record.headers = headers;
  record.objects = units.objects();
  record.inputs = inputs_summary(key_inputs);
  record.compiler_output = compiler_output(result.build);
  try {
    cache::PublishResult p = store.publish(*staging, entry_dir, record, {{result.build.artifact_path, plan.artifact_name}});
    result.entry_dir = p.entry_dir;
    result.stored = p.ours;
    result.build.artifact_path = util::join_path(p.entry_dir, plan.artifact_name);
    if (p.ours) {
      stats.stores += 1;
      stats.bytes_stored += p.entry.artifacts.front().size;
    }
  } catch (const Error& e) {
    return serve_unstored("could not store " + plan.name + ": " + e.what());
  }
  // ---- remote tier: upload what this process built (a missing libcurl is
  // exit 4; a server that fails costs a warning, counted in the stats).
  if (result.stored) remote.put(result.entry_dir, key);
  store.count(stats);
  // ==== end of the publish tiers
  return result;
}

}  // namespace tvmffi_jit::compile
