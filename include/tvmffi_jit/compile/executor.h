// Running a BuildPlan in a directory: translation units in parallel (a pool of
// `jobs` threads, each spawning one compiler through util::run_process), then
// the embed unit, then the link. Stops scheduling on the first failure and
// reports that command with its whole output.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tvmffi_jit/compile/plan.h"

namespace tvmffi_jit::compile {

struct ExecuteOptions {
  int jobs = 0;          // <= 0: one per core
  bool verbose = false;  // log every command before it runs
  bool quiet = false;    // do not echo the output (warnings) of successful commands
};

struct CommandRecord {
  std::vector<std::string> argv;  // empty for in-process steps (NVRTC, copies)
  std::string description;        // "compile main.cpp", "link add_one.so", "nvrtc k.cu"
  std::string output;             // stdout+stderr (or the NVRTC log)
  double seconds = 0;
};

// What one translation unit read, from its depfile (parsed with cache::parse_depfile).
struct CompiledUnit {
  std::string object_path;                // absolute
  std::string depfile_path;               // absolute
  std::vector<std::string> dependencies;  // absolute paths, the source itself excluded, in depfile order
};

struct BuildResult {
  std::string build_dir;      // absolute
  std::string artifact_path;  // absolute
  std::vector<CommandRecord> commands;   // in completion order
  std::vector<CompiledUnit> units;       // parallel to plan.compile_steps
  std::vector<CompiledUnit> device_units;  // parallel to plan.device_steps
  std::vector<std::pair<std::string, std::string>> lowered_names;  // NVRTC: expression -> mangled
  double seconds = 0;
};

// The number of steps execute_plan() runs (compiles, NVRTC, embed, link): the
// total of the "[3/7] nvcc kernel.cu" progress line (util/progress.h).
size_t progress_steps(const BuildPlan& plan);

// Creates `build_dir` if needed and builds there. Throws Error(kBuildFailed)
// with the failing command (as a shell line, for pasting) and its output,
// Error(kMissingTool) when a compiler cannot be started, Error(kIo) for I/O.
BuildResult execute_plan(const BuildPlan& plan, const std::string& build_dir, const ExecuteOptions& options);

// Runs one translation unit in `build_dir` (writing its generated source
// first), for callers that schedule units themselves (the cache). Throws as
// execute_plan(); on success fills `unit` from the depfile.
CommandRecord run_compile_step(const CompileStep& step, const std::string& build_dir, CompiledUnit* unit);

}  // namespace tvmffi_jit::compile
