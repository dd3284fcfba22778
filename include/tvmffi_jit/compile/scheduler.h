// The batch scheduler: which module of a batch starts when, how many run at
// once, and what becomes of the others when one fails. Everything a batch
// decides above a single module's build lives here (docs/build.md#batch-builds):
//
//   * the order modules start in: the longest chain first, as the cost model
//     (compile/cost_log.h) estimates it, ties by name (never by input
//     order), so that a long module never starts last and runs alone while
//     the cores idle;
//   * the gate's hold (util::JobGate::hold): no job is admitted until every
//     module that starts has checked in (its first job, or its end), so the
//     first jobs are the heaviest of every module's, not those of whichever
//     module computed its cache keys soonest; a failure releases it;
//   * the pool: up to `concurrency` modules at once, each on its own thread,
//     with --keep-going semantics.
//
// What runs inside one module (its units, its link, the gate's order among
// jobs) is the executor's (compile/executor.h); the gate is util's.
// Tests: tests/unit/test_compile_scheduler.cpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "tvmffi_jit/compile/cost_log.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/util/job_gate.h"

namespace tvmffi_jit::compile {

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

// A module of a batch as the scheduler orders it.
struct BatchModule {
  const BuildPlan* plan = nullptr;  // null: it could not be planned (it fails at once: no work)
  std::string base_dir;             // where the cost log names its sources from (CostScope)
};

// The order a batch starts its modules in: the longest chain first (a
// module's longest unit, then its link: CostModel::module_chain_seconds),
// modules of equal chains by name, so the order never depends on the
// manifests' order. `scan_sources`: a device unit the log does not know is
// estimated from its source's size (CostModel::estimate_unit), which reads
// its headers: worth it only when more modules are given than run at once
// (else every module is in flight and the gate orders their jobs), and
// never for a batch that only looks its modules up (--only-if-cached).
std::vector<size_t> longest_chain_first(CostModel& costs, const std::vector<BatchModule>& modules,
                                        bool scan_sources = false);

struct BatchOptions {
  // Modules in flight at once. 0: twice the gate's slots (a module computing
  // its keys or answered by the cache overlaps another's compiles), one
  // without a gate.
  int concurrency = 0;
  // The order modules start in (a permutation of 0..count-1, e.g. from
  // longest_chain_first(); empty: input order).
  std::vector<size_t> order;
  bool keep_going = false;  // after a failure, start the modules not yet started anyway
  // The gate every module's jobs share. run_batch holds it until the modules
  // it starts first have checked in (or `hold_limit` has passed) and
  // releases the hold when a module fails. Null: no gate, no hold.
  util::JobGate* gate = nullptr;
  std::chrono::milliseconds hold_limit{1000};
  // Called (from the failing module's thread, one call at a time) as soon as
  // a module fails, so its error shows while the rest still build.
  std::function<void(size_t index, const BatchItem&)> on_failure;
};

// One module's build. `party` is the module's check-in at the gate's hold
// (pass it to the module's jobs: ExecuteOptions::party); it checks in when
// the callback returns if no job did.
using BuildModuleFn = std::function<BatchItem(size_t index, util::JobGate::Party* party)>;

// Calls build(i) for every module i on up to `concurrency` threads, starting
// them in `order`. An exception from build(i) marks module i failed with
// its exit code and message. Without keep_going, modules not yet started when
// one fails stay kSkipped; those running finish. Returns one item per module.
std::vector<BatchItem> run_batch(size_t count, const BatchOptions& options, const BuildModuleFn& build);

// The exit status of a batch: 0 when every module was built or hit, else the
// exit code of the first failed module in input order.
int batch_exit_code(const std::vector<BatchItem>& items);

}  // namespace tvmffi_jit::compile
