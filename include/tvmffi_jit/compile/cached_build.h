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

#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/compile/cached_build_options.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/toolchain/toolchain.h"

namespace tvmffi_jit::compile {

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

}  // namespace tvmffi_jit::compile
