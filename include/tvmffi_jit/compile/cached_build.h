// Cached execution of a BuildPlan: `tvmffi-jit build` without --build-dir.
//
//   module key   = compute_module_key(everything the plan says + compiler and
//                  tvm-ffi identities + relevant environment)    (cache/key.h)
//   lookup       = entry.json key + artifact sizes + re-hashed headers
//   miss         = per-key flock (bounded wait) -> lookup again -> build in a
//                  staging dir under the root, reusing per-TU objects keyed on
//                  each unit's own inputs -> record the headers every compiler
//                  read (depfiles) -> publish by one rename
//   cannot write = warn, build in a temp dir outside the root, still succeed
//   remote tier  = after a local miss, an imported or remote entry (verified,
//                  published locally) answers instead of a build; after a
//                  build, the entry is uploaded (cache/remote.h)
//
// Docs: docs/cache.md.
#pragma once

#include <string>
#include <vector>

#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/cache/key.h"
#include "tvmffi_jit/cache/remote.h"
#include "tvmffi_jit/toolchain/toolchain.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"

namespace tvmffi_jit::compile {

struct CachedBuildOptions {
  std::string cache_dir;  // --cache-dir; empty: TVMFFI_JIT_CACHE_DIR, XDG_CACHE_HOME, ~/.cache
  bool force = false;     // --force: skip the lookups (module and objects), rebuild, replace
  double lock_timeout_seconds = 600;
  bool keep_key_trace = false;  // fill CachedBuildResult::key_trace
  // Paths under it enter the portable key relative to it (cache/portable.h);
  // absolute. Empty: none (every path absolute, nothing shared across paths).
  std::string base_dir;
  cache::RemoteOptions remote;
  ExecuteOptions exec;
};

struct CachedBuildResult {
  BuildResult build;        // commands that ran (none on a hit); artifact_path is the published file
  std::string cache;        // "hit" | "remote-hit" | "miss"
  std::string remote_source;  // remote hits: the server (redacted URL) or "imported"
  std::string key;          // 64 hex
  std::string key_trace;    // every hashed field, when asked for
  std::string entry_dir;    // the entry holding the artifact; empty when it could not be stored
  std::string miss_reason;  // why the lookup missed ("absent", "header /x/h.h changed", "--force", ...)
  bool stored = false;      // this process published the entry
  size_t objects_reused = 0;
  size_t objects_compiled = 0;
};

// Computes the module key inputs for a plan (reads every source file and
// identifies every compiler; identities are memoised under `compilers_dir`).
cache::ModuleKeyInputs module_key_inputs(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                                         const std::string& compilers_dir, bool memo_writable);

// Runs the plan through the cache. Throws like execute_plan() for build
// failures and Error(kIo) (exit 5) for an unsafe cache root.
CachedBuildResult cached_build(const BuildPlan& plan, const Manifest& manifest, const toolchain::Toolchain& tc,
                               const CachedBuildOptions& options);

// toolchain::find_tvm_ffi(), with the answer of `tvm-ffi-config` / python3
// (≈100 ms of Python start-up) memoised in <cache root>/toolchain/, so a
// cache hit spawns nothing. The memo is used only while PATH, TVM_FFI_ROOT
// and the identity (path, size, mtime, inode) of the program that answered
// are unchanged and the directories it named still hold tvm-ffi; a root
// given by flag or variable is resolved directly, as before.
toolchain::TvmFfiLocation find_tvm_ffi_memoized(const toolchain::TvmFfiSearch& search, const std::string& cache_dir);

// The tvm-ffi version from <include>/tvm/ffi/c_api.h ("0.1.16"), or "" when
// the macros are absent.
std::string tvm_ffi_header_version(const std::string& include_dir);

}  // namespace tvmffi_jit::compile
