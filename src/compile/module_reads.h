// What a module's build read, recorded in its entry so that a hit can check
// it: the headers every compiler read, the files NVRTC's includes reach, the
// libraries the linker read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compile/object_cache.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/compile/cached_build_options.h"

namespace tvmffi_jit::compile {

struct ModuleReads {
  std::vector<cache::HeaderRecord> headers;
  // An input that changed while the build read it (after `build_start_ns`;
  // a source after `key_start_ns`, when it was read for the key): the
  // module must not be stored.
  std::optional<std::string> moved;
  // Why the linker's reads are unknown, if they are: not storable either.
  std::optional<std::string> unrecorded_link;
  // Why what the build read cannot be keyed exactly (compile/include_probes.h,
  // NVRTC's computed includes): built, not stored; said under -v.
  std::optional<std::string> unkeyable;
};

// After `build` ran with `units` as its hooks; what the linker read is
// hashed through `digests` (EntryStorage::digest_memo).
ModuleReads record_module_reads(const BuildPlan& plan, const BuildResult& build, const UnitCache& units,
                                const cache::DigestMemo& digests, const CachedBuildOptions& options, int64_t build_start_ns,
                                int64_t key_start_ns);

}  // namespace tvmffi_jit::compile
