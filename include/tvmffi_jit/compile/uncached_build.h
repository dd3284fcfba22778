// Builds outside the cache: --no-cache, a cache that cannot take a new entry,
// and the staging dir of a cached build, all through one runner that keeps a
// failed build's directory for the user.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "tvmffi_jit/compile/cached_build_options.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::compile {

// Runs the plan in `dir`, a directory this process deletes when it is done
// with it. A failed compile or link keeps it (`keep`) and says so, so that the
// "cd <dir> && ..." line of the message works; `removed_by` tells the user
// who deletes it. Any other failure, and a termination signal, leave `dir`
// to its owner's destructor.
BuildResult execute_in_disposable_dir(const BuildPlan& plan, const std::string& dir, const ExecuteOptions& exec,
                                      const CompileHooks& hooks, const std::function<void()>& keep,
                                      const std::string& removed_by);

// --no-cache, and a cache that cannot take a new entry: builds in a new
// directory under the system temp dir, which belongs to the caller once this
// returns (the artifact is in it). It is removed when the build fails or is
// stopped by a signal, except after a failed compile or link: then the error
// names it and it is kept so that the failed command can be re-run there.
BuildResult build_without_cache(const BuildPlan& plan, const ExecuteOptions& exec);

// Warns why, then build_without_cache().
BuildResult build_outside_cache(const BuildPlan& plan, const std::string& why, const CachedBuildOptions& options);

}  // namespace tvmffi_jit::compile
