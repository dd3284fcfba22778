#include "tvmffi_jit/compile/scheduler.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <thread>

#include "tvmffi_jit/util/error.h"

namespace tvmffi_jit::compile {

namespace {

// One module of the pool: build(i) under its check-in at the gate, its
// failure (an exception) turned into its item, its wall time measured.
BatchItem run_module(size_t i, const BatchOptions& options, const BuildModuleFn& build) {
  const auto start = std::chrono::steady_clock::now();
  BatchItem item;
  try {
    util::JobGate::Party party(options.gate);  // checks in at the module's first job, or here when it ends
    item = build(i, &party);
  } catch (const Error& e) {
    item.status = BatchStatus::kFailed;
    item.exit_code = e.exit_code();
    item.error = e.what();
  } catch (const std::exception& e) {
    item.status = BatchStatus::kFailed;
    item.exit_code = static_cast<int>(ExitCode::kIo);
    item.error = std::string("internal error: ") + e.what();
  }
  item.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return item;
}

size_t modules_in_flight(size_t count, const BatchOptions& options) {
  const int wanted = options.concurrency > 0 ? options.concurrency : options.gate ? 2 * options.gate->slots() : 1;
  return std::max<size_t>(1, std::min<size_t>(count, static_cast<size_t>(std::max(1, wanted))));
}

}  // namespace

const char* batch_status_name(BatchStatus s) {
  switch (s) {
    case BatchStatus::kSkipped: return "skipped";
    case BatchStatus::kHit: return "hit";
    case BatchStatus::kBuilt: return "built";
    case BatchStatus::kFailed: return "failed";
  }
  return "skipped";
}

std::vector<size_t> longest_chain_first(CostModel& costs, const std::vector<BatchModule>& modules,
                                        bool scan_sources) {
  std::vector<double> chain(modules.size(), 0);
  for (size_t i = 0; i < modules.size(); ++i)
    if (const BuildPlan* plan = modules[i].plan)
      chain[i] = costs.module_chain_seconds(CostScope(plan->name, modules[i].base_dir), *plan, scan_sources);
  std::vector<size_t> order(modules.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Ties by name, never by the manifests' order: a batch given its modules
  // in another order starts them in the same one (unplanned modules, which
  // fail at once, last in input order).
  auto name = [&](size_t i) -> const std::string* { return modules[i].plan ? &modules[i].plan->name : nullptr; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (chain[a] != chain[b]) return chain[a] > chain[b];
    const std::string *na = name(a), *nb = name(b);
    if (!na || !nb) return na && !nb;
    return *na < *nb;
  });
  return order;
}

std::vector<BatchItem> run_batch(size_t count, const BatchOptions& options, const BuildModuleFn& build) {
  std::vector<BatchItem> items(count);
  if (count == 0) return items;
  const size_t threads = modules_in_flight(count, options);
  // The first jobs are chosen among every starting module's (util/job_gate.h, hold).
  if (options.gate) options.gate->hold(threads, options.hold_limit);
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex failure_mutex;
  auto worker = [&] {
    for (;;) {
      if (stop.load()) return;
      const size_t k = next.fetch_add(1);
      if (k >= count) return;
      const size_t i = options.order.size() == count ? options.order[k] : k;
      BatchItem item = run_module(i, options, build);
      if (item.status == BatchStatus::kFailed) {
        if (!options.keep_going) stop = true;
        // Without -k the modules not started yet never check in: the batch is ending.
        if (options.gate) options.gate->release_hold();
        if (options.on_failure) {
          std::lock_guard<std::mutex> lock(failure_mutex);
          options.on_failure(i, item);
        }
      }
      items[i] = std::move(item);
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return items;
}

int batch_exit_code(const std::vector<BatchItem>& items) {
  for (const auto& i : items)
    if (i.status == BatchStatus::kFailed) return i.exit_code == 0 ? static_cast<int>(ExitCode::kBuildFailed) : i.exit_code;
  return 0;
}

}  // namespace tvmffi_jit::compile
