// Driver validation in four steps (internal to the driver layer):
//   validate_plan.cpp   offline reports -> verdict skeletons and the child's work items
//   validate_run.cpp    the work items -> the child's results (restarting it after a crash or hang)
//   validate_judge.cpp  results + offline reports -> verdicts
//   validate_print.cpp  verdicts -> JSON and text
// validate.cpp strings them together (validate_files).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "probe_protocol.h"
#include "tvmffi_jit/devcode/report.h"
#include "tvmffi_jit/driver/validate.h"
#include "tvmffi_jit/util/fs.h"

namespace tvmffi_jit::driver {

// One unit of work for the child and where its result goes.
struct Item {
  ProbeItem request;
  size_t file = 0;   // index into Plan::verdicts
  size_t image = 0;  // index into FileVerdict::images (images only)
  // Offline entries this image may be served from (the driver picks one).
  std::vector<const devcode::Entry*> entries;
};

struct Plan {
  std::vector<FileVerdict> verdicts;
  std::vector<Item> items;
  std::optional<util::TempDir> temp;
};

// Verdict skeletons (offline-invalid files already judged) and the items
// for the child; extracted images go to a temporary directory of the plan.
Plan plan_validation(const std::vector<devcode::FileReport>& reports, const ValidateOptions& options);

// What the child processes said.
struct ProbeOutcome {
  std::optional<DriverInfo> driver;    // the first driver line
  std::map<int, ProbeResult> results;  // by item id
  std::map<int, std::string> deaths;   // item id -> what killed the child while it was on that item
};
// Runs the child on every item of the plan, restarting it after a crash or
// hang with the items that remain. Throws Error(kIo) only if it cannot start.
ProbeOutcome run_probes(const Plan& plan, const ValidateOptions& options);

// Fills the plan's verdicts from the outcome.
void judge(Plan& plan, const ProbeOutcome& outcome);

// The devcode arch strings of entries ("" for those the driver cannot load).
std::vector<std::string> archs_of(const std::vector<const devcode::Entry*>& entries);

}  // namespace tvmffi_jit::driver
