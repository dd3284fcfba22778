// What a cached build is asked to do (compile/cached_build.h): the options
// the orchestrator and the parts it runs (the per-unit object cache, what the
// build read, the build outside the root) all read. Apart from
// cached_build.h so that those parts include the options, not the
// orchestrator.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/in_flight.h"
#include "tvmffi_jit/compile/key.h"

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

}  // namespace tvmffi_jit::compile
