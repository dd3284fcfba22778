// One module of a build request, cached or not: the same for a single build
// and every module of a batch (cmd_build.cpp plans them, runs them through
// the batch and prints what they return). Its own file so that unit tests
// drive it with an in-memory storage and a fake runner
// (tests/unit/test_cli_build_module.cpp).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "build_request.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/compile/scheduler.h"
#include "tvmffi_jit/compile/cached_build.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/toolchain/toolchain.h"
#include "tvmffi_jit/util/expected.h"
#include "tvmffi_jit/util/job_gate.h"

namespace tvmffi_jit::cli {

// `build --json` output (one object, or one line per module of a batch).
constexpr int kBuildJsonSchemaVersion = 1;

// The device-code compiler the plan runs: "nvcc", "nvrtc", "hipcc", or null
// for a module of C/C++ sources only (no device compiler involved).
nlohmann::json device_compiler_json(const compile::BuildPlan& plan);
// One command of a build: "commands" lists them, "failed_command" is one.
nlohmann::json command_json(const compile::CommandRecord& c);
// The fields of share/tvmffi-jit/build.schema.json; a new field is added
// there and in docs/build.md in the same change.
nlohmann::json result_json(const compile::BuildPlan& plan, const compile::BuildResult& r);
// result_json() and what the cache said (key, hit or miss and why, re-hashed, watched).
nlohmann::json cached_result_json(const compile::BuildPlan& plan, const compile::CachedBuildResult& cr);

// A module of the request with its toolchain and plan.
struct Planned {
  const ModuleRequest* module = nullptr;
  std::string name;  // for reports: the plan's, else the manifest's
  toolchain::Toolchain tc;
  // The plan, or why planning failed with the exit code it ends with
  // (--keep-going reports it and builds the other modules).
  Expected<compile::BuildPlan, Failure<ExitCode>> plan = fail(ExitCode::kUsage, "not planned");
};

// Everything a module's build shares with the other modules of its request.
struct Shared {
  const BuildRequest& request;
  CommandContext& ctx;
  compile::ExecuteOptions exec;
  compile::InFlightUnits in_flight;  // a unit shared by modules compiles once
  cache::EntryStorage* storage = nullptr;  // the command's one door to the cache (null: --no-cache, --build-dir)
};

struct ModuleOutcome {
  compile::BatchItem item;
  std::string path;  // the artifact
  nlohmann::json json;
  compile::BuildResult build;  // for --depfile and friends
  std::string entry_dir;
  std::optional<compile::CommandRecord> failed_command;  // a compile or link of this module that failed
  bool only_if_cached_miss = false;  // --only-if-cached found nothing: out.json says so, there is no artifact
};

// One module, cached or not: the same for a single build and every module of a batch.
ModuleOutcome build_module(Shared& sh, const Planned& p, util::JobGate::Party* party);

}  // namespace tvmffi_jit::cli
