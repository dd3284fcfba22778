// Batch AOT builds: `tvmffi-jit build -m a.json -m b.json`, a directory or a
// glob of manifests, or a "modules" manifest listing many, built in one job
// pool (util::JobGate: one -j and one memory budget for every module's
// compiles and links). docs/build.md#batch-builds.
//
// Two parts, both free of CLI concerns: expanding the -m arguments into
// modules (every manifest read and checked before anything is built), and
// running one build callback per module with --keep-going semantics.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tvmffi_jit/compile/manifest.h"

namespace tvmffi_jit::compile {

struct BatchInput {
  std::string origin;  // where it was read: "a.json", "mods.json#/modules/3"
  Manifest manifest;
  // Set when the manifest could not be read or checked and the caller asked
  // to keep going: the message (naming the manifest), exit code 2. The module
  // is reported as failed; `manifest` is empty but for its name (the file's
  // stem), which the report shows.
  std::string error;
};

struct ExpandedManifests {
  // More than one module, or any argument that names many (a directory, a
  // glob, a "modules" manifest): the caller builds a batch even of one.
  bool batch = false;
  std::vector<BatchInput> modules;
};

// The -m arguments, each one of:
//   a manifest file;
//   a directory: its *.json files (not recursive, sorted by name);
//   a glob pattern (*, ?, [...]) matching manifest files;
//   a "modules" manifest: {"modules": [entry, ...]} where an entry is a path
//     or glob (relative to that file, possibly another modules manifest) or
//     an inline manifest object.
// The same file reached twice is built once. Two modules with one name are an
// error, as is a pattern or directory that matches nothing. Throws
// ManifestError / Error(kUsage) (exit 2).
//
// With `keep_going`, a manifest file or inline entry that does not parse or
// check becomes a module with `error` set instead of ending the expansion (a
// path that matches nothing, a modules manifest of the wrong shape and two
// modules with one name still throw: they are about the batch, not a module).
ExpandedManifests expand_manifest_arguments(const std::vector<std::string>& arguments, bool keep_going = false);

enum class BatchStatus { kSkipped, kHit, kBuilt, kFailed };
const char* batch_status_name(BatchStatus s);  // "skipped", "hit", "built", "failed"

// What a build callback reports for one module.
struct BatchItem {
  BatchStatus status = BatchStatus::kSkipped;
  int exit_code = 0;    // of the failure (1 compile/link, 3 validation, 4 toolchain, 5 I/O)
  std::string error;    // the failure's message
  double seconds = 0;   // wall time of this module
  size_t objects_reused = 0;
  size_t objects_compiled = 0;
};

struct BatchOptions {
  int concurrency = 1;      // modules in flight at once (their jobs share one gate)
  // The order modules start in (a permutation of 0..count-1; empty: input
  // order). The caller puts the longest first so that none starts last and
  // runs alone while the cores idle.
  std::vector<size_t> order;
  bool keep_going = false;  // after a failure, start the modules not yet started anyway
  // Called (from the failing module's thread, one call at a time) as soon as
  // a module fails, so its error shows while the rest still build.
  std::function<void(size_t index, const BatchItem&)> on_failure;
};

// Calls build(i) for every module i on up to `concurrency` threads, starting
// them in `order`. An exception from build(i) marks module i failed with
// its exit code and message. Without keep_going, modules not yet started when
// one fails stay kSkipped; those running finish. Returns one item per module.
std::vector<BatchItem> run_batch(size_t count, const BatchOptions& options,
                                 const std::function<BatchItem(size_t index)>& build);

// The exit status of a batch: 0 when every module was built or hit, else the
// exit code of the first failed module in input order.
int batch_exit_code(const std::vector<BatchItem>& items);

}  // namespace tvmffi_jit::compile
