// Cached execution of a BuildPlan: `tvmffi-jit build` without --build-dir.
//
//   module key   = compute_module_key(everything the plan says + compiler and
//                  tvm-ffi identities + relevant environment)    (compile/key.h)
//   lookup       = cache::EntryStorage::find (cache/storage.h, one per
//                  command, given in the options): the local entry,
//                  else under the per-key flock the local entry again, an
//                  imported or a remote one (published locally)
//   miss         = build in a
//                  staging dir under the root with execute_plan(), whose
//                  CompileHooks look each unit's object up by its own key
//                  before compiling and store it after (find_object,
//                  publish_object: the same door, local tier) -> record the headers
//                  every compiler read (depfiles) -> publish by one rename
//                  (Storage::publish) -> upload (Storage::upload)
//   cannot write = warn, build in a temp dir outside the root, still succeed
//   cannot store = (a source changed during the build, publish failed) the
//                  artifact moves to a temp dir outside the root (the caller's)
//
// Docs: docs/cache.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/in_flight.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/compile/key.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/toolchain/toolchain.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/toolchain/tvm_ffi_memo.h"

namespace tvmffi_jit::compile {

struct CachedBuildOptions {
  // The command's one door to the cache (cache/storage.h): its local store
  // (the root, resolved and opened by the caller) and remotes, shared by every
  // module of a batch. Required.
  cache::EntryStorage* storage = nullptr;
  bool force = false;     // --force: skip the lookups (module and objects), rebuild, replace
  bool verify = false;    // --verify: re-hash the module artifact on a hit whatever its size
  double lock_timeout_seconds = 600;
  bool keep_key_trace = false;  // fill CachedBuildResult::key_trace and log every key's trace (debug, -vv)
  // Paths under it enter the portable key relative to it (cache/portable.h);
  // absolute. Empty: none (every path absolute, nothing shared across paths).
  std::string base_dir;
  // The variables that change what the compilers and the linker produce
  // (relevant_environment() over the CLI's EnvLookup): they enter
  // every module and object key, and CPATH & co. the include search order
  // that header records are checked against. Required: a build without
  // them throws, since an unkeyed NVCC_APPEND_FLAGS would serve wrong hits.
  std::optional<std::vector<ModuleKeyInputs::EnvVar>> environment;
  ExecuteOptions exec;
  // A local hit or nothing: a miss returns cache "miss" with no lock taken, no
  // remote asked and nothing built (the engine library's in-process path).
  bool only_if_cached = false;
  InFlightUnits* in_flight = nullptr;  // shared by the modules of a batch; null: no other builder in this process
};

struct CachedBuildResult {
  BuildResult build;        // commands that ran (none on a hit); artifact_path is the published file
  cache::CacheStatus cache = cache::CacheStatus::kMiss;  // shown as cache::cache_status_name()
  std::string remote_source;  // remote hits: the server (redacted URL) or "imported"
  std::string key;          // 64 hex
  std::string key_trace;    // every hashed field, when asked for
  std::string entry_dir;    // the entry holding the artifact; empty when it could not be stored
  std::string miss_reason;  // why the lookup missed ("absent", "header /x/h.h changed", "--force", ...)
  bool stored = false;      // this process published the entry
  size_t objects_reused = 0;
  size_t objects_compiled = 0;
  cache::Rehashed rehashed;  // what the lookup re-read to prove the entry (cache/proof.h)
  // A local hit proven by this process's watches, without a stat of its
  // recorded files (util/change_watch.h: the engine library's repeated hits).
  bool watched = false;
};

// Runs the plan through the cache. Throws like execute_plan() for build
// failures and Error(kIo) (exit 5) for an unsafe cache root.
CachedBuildResult cached_build(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                               const CachedBuildOptions& options);

// --no-cache, and a cache that cannot take a new entry: builds in a new
// directory under the system temp dir, which belongs to the caller once this
// returns (the artifact is in it). It is removed when the build fails or is
// stopped by a signal, except after a failed compile or link: then the error
// names it and it is kept so that the failed command can be re-run there.
BuildResult build_without_cache(const BuildPlan& plan, const ExecuteOptions& exec);

// Where toolchain::find_tvm_ffi_memoized() keeps its memo for a build with
// the resolved cache root `cache_root`: <root>/toolchain, written only while
// the root is writable (opening it creates it, as the build would), and
// `user_dir` (cache::user_toolchain_memo_dir(), shared by all of this user's
// roots; "" when there is none). No directories (a search without memo)
// when `cache_root` is empty.
toolchain::TvmFfiMemoDirs tvm_ffi_memo_dirs(const std::string& cache_root, const std::string& user_dir);

}  // namespace tvmffi_jit::compile
