#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compile/compiler_identities.h"
#include "tvmffi_jit/cache/headers.h"
#include "tvmffi_jit/cache/stats.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/cache/store.h"
#include "tvmffi_jit/cache/trust.h"
#include "tvmffi_jit/compile/cached_build_options.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/util/expected.h"

namespace tvmffi_jit::compile {

// The per-unit object cache and the header record of a build, as executor
// hooks (compile/executor.h): before a unit compiles, its object is looked up
// by the unit's own key; after it compiles, the headers it read are hashed and
// its object is stored. With `reuse_objects` off (a plan whose one compile is
// the artifact, cached as the module entry) only the headers are recorded.
class UnitCache {
 public:
  // Computes every unit's key (reads its source, identifies its compiler).
  // Objects are found and stored through `storage` (find_object,
  // publish_object), which counts them with the module's other outcomes.
  UnitCache(const BuildPlan& plan, const Manifest& m, const toolchain::Toolchain& tc, cache::EntryStorage& storage,
            CompilerIdentities& ids, const CachedBuildOptions& options, bool reuse_objects);

  compile::CompileHooks hooks();

  // The cached objects the link reads, with the digests they were checked
  // against (reused) or hashed with (compiled): a module entry records them
  // so that `cache verify --remove` can find the modules a bad object went into.
  std::vector<cache::ObjectRecord> objects() const;

  // Everything the units read (a reused unit: the headers its entry recorded).
  std::vector<cache::HeaderRecord> headers() const;
  // A header that changed while a unit compiled, if any: that unit may have
  // read it in its old state, so neither it nor the module may be stored.
  const std::optional<std::string>& moved_header() const { return moved_; }
  // Why a unit's reads could not be keyed exactly (compile/include_probes.h):
  // neither it nor the module may be stored.
  const std::optional<std::string>& unkeyable() const { return unkeyable_; }
  size_t reused() const { return reused_; }
  size_t compiled() const { return compiled_; }

 private:
  struct Unit {
    std::string key;  // empty unless reuse_objects
    int64_t start_ns = 0;
    std::vector<cache::HeaderRecord> headers;
    std::string sha256;  // of the object that goes into the link
    InFlightUnits::Claim claim;  // held from a miss until the object is stored (batch builds)
  };

  std::optional<CommandRecord> before_compile(const UnitRef& ref, const std::string& dir);
  void after_compile(const UnitRef& ref, const std::string& dir, const CommandRecord& rec);
  // __has_include probes of what the unit read -- its source (a file, or the
  // generated text of inline sources) and its headers -- into `headers` (found
  // answers as headers, absent candidates as shadows); done, or why the unit
  // cannot be keyed.
  Expected<void> record_include_probes(const CompileStep& step, const std::string& dir,
                                       const std::vector<std::string>& search,
                                       std::vector<cache::HeaderRecord>& headers);
  void store_object(const CompileStep& step, const std::string& key, const CompiledUnit& unit,
                    const std::vector<cache::HeaderRecord>& headers, const CommandRecord& rec);

  // Counts one outcome into the storage and, when given, one of ours.
  void count(uint64_t cache::StatsCounters::*counter, size_t* ours = nullptr);

  cache::EntryStorage& storage_;
  const CachedBuildOptions& options_;
  const bool reuse_objects_;
  // A signing build links only objects it compiled itself or that carry its
  // key's signature (cache/trust.h): a planted object in a shared root is
  // compiled again and replaced.
  cache::TrustPolicy policy_;
  std::vector<std::string> toolchain_roots_;  // not scanned for __has_include (compile/adoptable_roots.h)
  std::vector<Unit> units_;  // indexed like UnitRef::index; each touched by its unit's worker only
  std::mutex mutex_;         // guards the members below
  std::optional<std::string> moved_;
  std::optional<std::string> unkeyable_;
  size_t reused_ = 0;
  size_t compiled_ = 0;
};

}  // namespace tvmffi_jit::compile
