// Module orchestration: the key, the cache's answer (cache/storage.h), else a
// build whose entry is published and shared through the same facade.
// The jobs it calls on live beside it: module_key (what is hashed),
// object_cache (per-unit hooks), module_reads (what the build read),
// uncached_build (building outside the root), compiler_output (replay).
#include "tvmffi_jit/compile/cached_build.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <set>

#include "compile/adoptable_roots.h"
#include "compile/compiler_identities.h"
#include "compile/compiler_output.h"
#include "compile/freshness.h"
#include "compile/module_key.h"
#include "compile/module_reads.h"
#include "compile/object_cache.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/compile/uncached_build.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"

namespace tvmffi_jit::compile {

namespace {

// Under -v, each reason once per process (a batch of modules sharing a flag
// says it once).
void say_once_verbose(bool verbose, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (verbose && said.insert(message).second) spdlog::info("{}", message);
}

// Once per process: a remote is there to share, and a path of the project
// outside the base dir keeps this module's portable key to this checkout.
void warn_unshared_path(const ModuleKeyInputs& key_inputs, const Manifest& manifest) {
  static std::atomic<bool> warned{false};
  auto path = project_path_outside_base(key_inputs, manifest);
  if (!path || warned.exchange(true)) return;
  spdlog::warn("cache: {} is outside the base dir {}, so the remote cache key of {} holds it as an absolute path "
               "and a checkout at another path will not share the entry; pass --base-dir DIR (or set "
               "TVMFFI_JIT_BASE_DIR) to the project's root",
               *path, key_inputs.base_dir, key_inputs.name);
}

// The folders the toolchain was installed in (cache::LookupOptions::
// toolchain_dirs): each compiler's prefix (the folder above its bin/), the
// CUDA and ROCm homes, tvm-ffi's include folders. Strings only: this runs on
// every in-process hit.
std::vector<std::string> toolchain_install_dirs(const toolchain::Toolchain& tc) {
  std::vector<std::string> dirs;
  for (const std::string* compiler : {&tc.host.cxx, &tc.host.cc})
    if (!compiler->empty() && (*compiler)[0] == '/') dirs.push_back(util::parent_path(util::parent_path(*compiler)));
  if (tc.cuda) dirs.push_back(tc.cuda->home);
  if (tc.rocm) dirs.push_back(tc.rocm->home);
  if (tc.tvm_ffi) {
    dirs.push_back(tc.tvm_ffi->include_dir);
    dirs.push_back(tc.tvm_ffi->dlpack_include_dir);
  }
  // A compiler at /bin/c++ would give "/": every file, which no folder of a toolchain is.
  dirs.erase(std::remove_if(dirs.begin(), dirs.end(), [](const std::string& d) { return d.empty() || d == "/"; }),
             dirs.end());
  return dirs;
}

}  // namespace

CachedBuildResult cached_build(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                               const CachedBuildOptions& options) {
  if (!options.environment)
    throw io_error("internal: cached_build() of " + plan.name + " without the environment its key needs");
  // Writability is probed on a miss only: a hit stores nothing but counters
  // and compiler identity memos, and those writes may fail quietly.
  const int64_t call_start = now_ns();  // a hit reports its own time, not the original build's
  if (!options.storage) throw io_error("internal: cached_build() of " + plan.name + " without the command's storage");
  cache::EntryStorage& storage = *options.storage;
  cache::Store& store = storage.local();
  CompilerIdentities ids(store.compilers_dir(), true);
  const int64_t key_start = now_ns();  // sources are read for the key from here on

  KeyedPlan keyed = key_inputs_with(plan, manifest, tc, ids, *options.environment);
  ModuleKeyInputs& key_inputs = keyed.inputs;
  const std::optional<std::string>& unkeyable = keyed.unkeyable;
  key_inputs.base_dir = options.base_dir;
  cache::Key key = compute_module_key(key_inputs, options.keep_key_trace);
  if (storage.shares()) warn_unshared_path(key_inputs, manifest);
  if (options.keep_key_trace) spdlog::debug("cache: module key of {}: {}, hashed from:\n{}", plan.name, key.hex, key.trace);

  CachedBuildResult result;
  result.key = key.hex;
  result.key_trace = key.trace;
  // What this module counted reaches the root's journal when it returns,
  // whichever way (the storage outlives it: one per command).
  struct FlushCounts {
    cache::EntryStorage& storage;
    ~FlushCounts() { storage.flush_counts(); }
  } flush_counts{storage};
  auto count_store_failure = [&storage] {
    cache::StatsCounters failed;
    failed.store_failures = 1;
    storage.count(failed);
  };

  if (unkeyable) {
    // A hit would rest on less than what the compile reads: build, store nothing.
    result.miss_reason = "not cacheable: " + *unkeyable;
    if (options.only_if_cached) return result;
    say_once_verbose(options.exec.verbose, "cache: not caching " + plan.name + ": " + *unkeyable);
    result.build = build_without_cache(plan, options.exec);
    return result;
  }

  // The cache's tiers (cache/storage.h) answer, or say why not and hold the
  // per-key lock while this process builds.
  cache::EntryRequest request;
  request.name = plan.name;
  request.key = key;
  request.key_dir = store.module_key_dir(plan.name, key.hex);
  request.base_dir = options.base_dir;
  request.artifact = plan.artifact_name;
  request.adoptable_roots = [&plan, &tc, &options] {
    return adoptable_roots(plan, tc, options.base_dir, *options.environment);
  };
  // A hit serves only the artifact entry.json lists, its content proven by
  // its stamp or re-hashed; --verify re-hashes it whatever the stamp says
  // (docs/cache.md, "What a hit proves").
  request.lookup.required_artifacts = {plan.artifact_name};
  request.lookup.rehash_artifacts = options.verify;
  request.lookup.toolchain_dirs = toolchain_install_dirs(tc);
  cache::Found found = storage.find(request, {options.force, options.only_if_cached, options.lock_timeout_seconds,
                                              "building " + plan.name});
  result.cache = found.status;
  result.rehashed = found.rehashed;
  if (found.hit()) {
    result.watched = found.status == cache::CacheStatus::kHit && found.entry.watched;
    result.remote_source = found.source;
    result.entry_dir = found.entry.entry_dir;
    result.build.build_dir = found.entry.entry_dir;
    result.build.artifact_path = found.entry.artifact_path(plan.artifact_name);
    // A local hit replays what the compilers said when it was built.
    if (found.status == cache::CacheStatus::kHit && found.entry.entry)
      replay_output(found.entry.entry->compiler_output, options.exec);
    result.build.seconds = static_cast<double>(now_ns() - call_start) * 1e-9;
    return result;
  }
  result.miss_reason = found.miss_reason;
  if (options.only_if_cached) return result;

  if (!found.storable) {
    result.build = build_outside_cache(plan, found.storable.why(), options);
    count_store_failure();
    return result;
  }
  std::optional<cache::Staging> staging;
  try {
    staging.emplace(store.stage());
  } catch (const Error& e) {
    result.build = build_outside_cache(plan, e.what(), options);
    count_store_failure();
    return result;
  }


  if (options.exec.verbose) spdlog::info("cache miss for {} ({}): building in {}", plan.name, result.miss_reason,
                                         staging->build_dir());
  // The units through the object cache (only when there is a link: a plan
  // whose one compile is the artifact has the module entry as its cache).
  const int64_t start = now_ns();
  UnitCache units(plan, manifest, tc, storage, ids, options, plan.link.has_value());
  result.build = execute_in_disposable_dir(plan, staging->build_dir(), options.exec, units.hooks(),
                                          [&] { staging->keep(); },
                                          "`tvmffi-jit cache gc` or `cache clean` removes it once this process is gone");
  result.objects_reused = units.reused();
  result.objects_compiled = units.compiled();
  auto [headers, moved_header, unrecorded_link, unkeyable_reads] =
      record_module_reads(plan, result.build, units, store, options, start, key_start);

  // The entry is published (or the artifact served unstored), then shared.
  // Not stored: the artifact leaves the staging dir (which gc removes once
  // this process is gone) for a directory of the caller's.
  auto serve_unstored = [&](const std::string& why, bool quiet = false) {
    count_store_failure();
    result.build.artifact_path =
        staging->move_artifact_out(result.build.artifact_path, plan.artifact_name, plan.name);
    result.build.build_dir = util::parent_path(result.build.artifact_path);
    if (quiet)
      say_once_verbose(options.exec.verbose, "cache: not caching " + plan.name + ": " + why + "; its artifact is in " +
                                                 result.build.build_dir + " (yours to keep or delete)");
    else
      spdlog::warn("cache: {}; not caching this build: its artifact is in {} (yours to keep or delete)", why,
                   result.build.build_dir);
    return result;
  };
  if (auto moved = moved_header) return serve_unstored(*moved + " changed while " + plan.name + " was being built");
  if (unrecorded_link) return serve_unstored(*unrecorded_link);
  if (unkeyable_reads) return serve_unstored(*unkeyable_reads, true);

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
    cache::PublishResult p =
        storage.publish(*staging, request, std::move(record), {{result.build.artifact_path, plan.artifact_name}});
    result.entry_dir = p.entry_dir;
    result.stored = p.ours;
    result.build.artifact_path = util::join_path(p.entry_dir, plan.artifact_name);
  } catch (const Error& e) {
    return serve_unstored("could not store " + plan.name + ": " + e.what());
  }
  // What this process built, to the remotes (a missing libcurl is exit 4; a
  // server that fails costs a warning, counted in the stats).
  if (result.stored) storage.upload(request, result.entry_dir);
  return result;
}

}  // namespace tvmffi_jit::compile
