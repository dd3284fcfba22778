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
#include "compile/search_dirs.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/compile/precompiled_headers.h"
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

cache::EntryStorage& checked_storage(const BuildPlan& plan, const CachedBuildOptions& options) {
  if (!options.environment)
    throw io_error("internal: cached_build() of " + plan.name + " without the environment its key needs");
  if (!options.storage) throw io_error("internal: cached_build() of " + plan.name + " without the command's storage");
  return *options.storage;
}

// One module through the cache, a step per method; cached_build() below is
// the list of them. Writability is probed on a miss only (by the storage's
// find): a hit stores nothing but counters and compiler identity memos, and
// those writes may fail quietly.
class ModuleBuild {
 public:
  ModuleBuild(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
              const CachedBuildOptions& options)
      : plan_(plan), manifest_(manifest), tc_(tc), options_(options), storage_(checked_storage(plan, options)),
        ids_(storage_.compilers_dir(), true) {}

  cache::EntryStorage& storage() { return storage_; }
  const std::optional<std::string>& unkeyable() const { return keyed_.unkeyable; }
  CachedBuildResult take_result() { return std::move(result_); }

  // Reads every input of the key and hashes them.
  void compute_key() {
    key_start_ = now_ns();  // sources are read for the key from here on
    keyed_ = key_inputs_with(plan_, manifest_, tc_, ids_, *options_.environment);
    keyed_.inputs.base_dir = options_.base_dir;
    key_ = compute_module_key(keyed_.inputs, options_.keep_key_trace);
    if (storage_.shares()) warn_unshared_path(keyed_.inputs, manifest_);
    if (options_.keep_key_trace)
      spdlog::debug("cache: module key of {}: {}, hashed from:\n{}", plan_.name, key_.hex, key_.trace);
    result_.key = key_.hex;
    result_.key_trace = key_.trace;
  }

  // A hit would rest on less than what the compile reads: build, store nothing.
  CachedBuildResult build_unkeyable() {
    result_.miss_reason = "not cacheable: " + *keyed_.unkeyable;
    if (options_.only_if_cached) return std::move(result_);
    say_once_verbose(options_.exec.verbose, "cache: not caching " + plan_.name + ": " + *keyed_.unkeyable);
    result_.build = build_without_cache(plan_, options_.exec);
    return std::move(result_);
  }

  // The cache's tiers (cache/storage.h) answer, or say why not and hold the
  // per-key lock while this process builds.
  cache::Found find() {
    request_.name = plan_.name;
    request_.key = key_;
    request_.key_dir = storage_.module_key_dir(plan_.name, key_.hex);
    request_.base_dir = options_.base_dir;
    request_.artifact = plan_.artifact_name;
    request_.adoptable_roots = [this] {
      return adoptable_roots(plan_, tc_, options_.base_dir, *options_.environment);
    };
    // A hit serves only the artifact entry.json lists, its content proven by
    // its stamp or re-hashed; --verify re-hashes it whatever the stamp says
    // (docs/cache.md, "What a hit proves").
    request_.lookup.required_artifacts = {plan_.artifact_name};
    request_.lookup.rehash_artifacts = options_.verify;
    request_.lookup.toolchain_dirs = toolchain_install_dirs(tc_);
    cache::Found found = storage_.find(request_, {options_.force, options_.only_if_cached,
                                                  options_.lock_timeout_seconds, "building " + plan_.name});
    result_.cache = found.status;
    result_.rehashed = found.rehashed;
    if (!found.hit()) result_.miss_reason = found.miss_reason;
    return found;
  }

  CachedBuildResult serve_hit(const cache::Found& found) {
    result_.watched = found.status == cache::CacheStatus::kHit && found.entry.watched;
    result_.remote_source = found.source;
    result_.entry_dir = found.entry.entry_dir;
    result_.build.build_dir = found.entry.entry_dir;
    result_.build.artifact_path = found.entry.artifact_path(plan_.artifact_name);
    // A local hit replays what the compilers said when it was built.
    if (found.status == cache::CacheStatus::kHit && found.entry.entry)
      replay_output(found.entry.entry->compiler_output, options_.exec);
    result_.build.seconds = static_cast<double>(now_ns() - call_start_) * 1e-9;  // not the original build's
    return std::move(result_);
  }

  // The staging dir the miss builds in; none when the root cannot take the
  // entry, and then the module is built outside it.
  std::optional<cache::Staging> stage(const cache::Found& found) {
    std::string refused;
    if (!found.storable) {
      refused = found.storable.why();
    } else {
      try {
        return storage_.stage();
      } catch (const Error& e) {
        refused = e.what();
      }
    }
    result_.build = build_outside_cache(plan_, refused, options_);
    count_store_failure();
    return std::nullopt;
  }

  // The units through the object cache (only when there is a link: a plan
  // whose one compile is the artifact has the module entry as its cache),
  // then what the build read.
  void build_in(cache::Staging& staging) {
    if (options_.exec.verbose)
      spdlog::info("cache miss for {} ({}): building in {}", plan_.name, result_.miss_reason, staging.build_dir());
    const int64_t start = now_ns();
    units_.emplace(plan_, manifest_, tc_, storage_, ids_, options_, plan_.link.has_value());
    if (PrecompiledHeaders* pch = options_.exec.pch)
      pch->prepare_plan(plan_, tc_, *options_.environment, storage_.compilers_dir());
    result_.build =
        execute_in_disposable_dir(plan_, staging.build_dir(), options_.exec, units_->hooks(), [&] { staging.keep(); },
                                  "`tvmffi-jit cache gc` or `cache clean` removes it once this process is gone");
    result_.objects_reused = units_->reused();
    result_.objects_compiled = units_->compiled();
    reads_ = record_module_reads(plan_, result_.build, *units_, storage_.digest_memo(), options_, start, key_start_);
  }

  // The entry is published (or the artifact served unstored), then shared.
  CachedBuildResult publish(cache::Staging& staging) {
    if (auto moved = reads_.moved)
      return serve_unstored(staging, *moved + " changed while " + plan_.name + " was being built");
    if (reads_.unrecorded_link) return serve_unstored(staging, *reads_.unrecorded_link);
    if (reads_.unkeyable) return serve_unstored(staging, *reads_.unkeyable, true);
    try {
      cache::PublishResult p =
          storage_.publish(staging, request_, entry_record(), {{result_.build.artifact_path, plan_.artifact_name}});
      result_.entry_dir = p.entry_dir;
      result_.stored = p.ours;
      result_.build.artifact_path = util::join_path(p.entry_dir, plan_.artifact_name);
    } catch (const Error& e) {
      return serve_unstored(staging, "could not store " + plan_.name + ": " + e.what());
    }
    // What this process built, to the remotes (a missing libcurl is exit 4; a
    // server that fails costs a warning, counted in the stats).
    if (result_.stored) storage_.upload(request_, result_.entry_dir);
    return std::move(result_);
  }

 private:
  void count_store_failure() {
    cache::StatsCounters failed;
    failed.store_failures = 1;
    storage_.count(failed);
  }

  // Not stored: the artifact leaves the staging dir (which gc removes once
  // this process is gone) for a directory of the caller's.
  CachedBuildResult serve_unstored(cache::Staging& staging, const std::string& why, bool quiet = false) {
    count_store_failure();
    result_.build.artifact_path =
        staging.move_artifact_out(result_.build.artifact_path, plan_.artifact_name, plan_.name);
    result_.build.build_dir = util::parent_path(result_.build.artifact_path);
    if (quiet)
      say_once_verbose(options_.exec.verbose, "cache: not caching " + plan_.name + ": " + why +
                                                  "; its artifact is in " + result_.build.build_dir +
                                                  " (yours to keep or delete)");
    else
      spdlog::warn("cache: {}; not caching this build: its artifact is in {} (yours to keep or delete)", why,
                   result_.build.build_dir);
    return std::move(result_);
  }

  cache::EntryRecord entry_record() const {
    cache::EntryRecord record;
    record.kind = "module";
    record.name = plan_.name;
    record.key = key_.hex;
    record.portable_key = key_.portable_hex;
    record.base_dir = options_.base_dir;
    record.headers = reads_.headers;
    record.objects = units_->objects();
    record.inputs = inputs_summary(keyed_.inputs);
    record.compiler_output = compiler_output(result_.build);
    return record;
  }

  const BuildPlan& plan_;
  const Manifest& manifest_;
  const toolchain::Toolchain& tc_;
  const CachedBuildOptions& options_;
  const int64_t call_start_ = now_ns();  // a hit reports its own time
  cache::EntryStorage& storage_;
  CompilerIdentities ids_;
  int64_t key_start_ = 0;
  KeyedPlan keyed_;
  cache::Key key_;
  cache::EntryRequest request_;
  std::optional<UnitCache> units_;
  ModuleReads reads_;
  CachedBuildResult result_;
};

// What a module counted reaches the root's journal when cached_build()
// returns, whichever way (the storage outlives it: one per command).
struct FlushCounts {
  cache::EntryStorage& storage;
  ~FlushCounts() { storage.flush_counts(); }
};

}  // namespace

CachedBuildResult cached_build(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                               const CachedBuildOptions& options) {
  ModuleBuild module(plan, manifest, tc, options);
  module.compute_key();
  FlushCounts flush{module.storage()};
  if (module.unkeyable()) return module.build_unkeyable();
  const cache::Found found = module.find();
  if (found.hit()) return module.serve_hit(found);
  if (options.only_if_cached) return module.take_result();
  std::optional<cache::Staging> staging = module.stage(found);
  if (!staging) return module.take_result();  // built outside the cache
  module.build_in(*staging);
  return module.publish(*staging);
}

}  // namespace tvmffi_jit::compile
