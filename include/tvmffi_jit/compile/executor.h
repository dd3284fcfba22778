// Running a BuildPlan in a directory: translation units in parallel (a pool of
// `jobs` threads, each running one compiler through the CommandRunner), then
// NVRTC, the embed unit, then the link. Stops scheduling on the first failure
// and reports that command with its whole output.
//
// This is the only compile loop: the cache (cached_build.cpp) plugs its
// per-unit object cache in through CompileHooks instead of scheduling units
// itself, so progress ("[2/3] c++ b.cc") and compiler output go through one
// StatusSink on every path. The runner and the sink are injected
// (compile/runner.h); by default util::run_process and util::Progress.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tvmffi_jit/compile/job_trace.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/compile/runner.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/expected.h"
#include "tvmffi_jit/util/job_gate.h"

namespace tvmffi_jit::compile {

// What one nvcc / host compile or link is assumed to need, for the job gate.
// nvcc of the heavy kernels libraries build peaks at 4-8 GB; docs/farm.md has
// the measured numbers.
constexpr uint64_t kDefaultCudaJobBytes = 4ull << 30;
// Host C++ units and links: a quarter of a CUDA unit's reservation.
constexpr uint64_t host_job_bytes(uint64_t cuda_job_bytes) { return cuda_job_bytes / 4; }

struct CommandRecord;
class CostModel;

// The memory the gate reserves for each kind of job, learned from the peaks
// of finished ones (util::JobMemoryEstimate): nvcc compiles, and host
// compiles and links (a quarter of nvcc's until one has been seen).
struct JobMemory {
  JobMemory(uint64_t cuda_job_bytes, bool learn) : cuda(cuda_job_bytes, learn), host(host_job_bytes(cuda_job_bytes), learn) {}
  util::JobMemoryEstimate cuda;
  util::JobMemoryEstimate host;
};

class PrecompiledHeaders;

struct ExecuteOptions {
  int jobs = 0;          // <= 0: one per core
  bool verbose = false;  // log every command before it runs
  // Do not show the output (warnings) of successful commands. For library
  // callers that collect BuildResult::commands themselves; the CLI's -q does
  // not set it: warnings are shown under -q, as ninja does.
  bool hide_compiler_output = false;
  // Shared admission of compiles and links (slots and memory), for one build
  // or a whole batch (util/job_gate.h). Null: only `jobs` limits them.
  util::JobGate* gate = nullptr;
  // The module of a batch this build is, checked in at its first job
  // (util::JobGate::hold). Null: a single build.
  util::JobGate::Party* party = nullptr;
  uint64_t cuda_job_bytes = kDefaultCudaJobBytes;  // --mem-per-job
  // --build-dir: the directory is the user's and kept between builds. A step
  // whose command, inputs and outputs are unchanged since it last ran there
  // is skipped (compile/build_log.h); the module is relinked only when an
  // input of the link changed, into a new file renamed over the old one, so
  // a process that has the old module loaded keeps a valid mapping. The
  // directory is locked (flock) for the build.
  bool incremental = false;
  JobMemory* memory = nullptr;  // learned reservations shared by a batch; null: cuda_job_bytes as it is
  // What each job cost before (compile/cost_log.h): the gate's weights (the
  // longest chains first), --split-compile auto's cores, the memory a job
  // reserves; told what each job cost. Null: weights by kind only.
  CostModel* costs = nullptr;
  std::string plan_name;  // set by execute_plan(): the module its jobs are logged under
  // The module's base dir (docs/remote.md): the cost log names its sources
  // relative to it, so a checkout at another path finds their costs. Empty:
  // by absolute path.
  std::string base_dir;
  JobTrace* trace = nullptr;    // --job-trace
  // GCC precompiled headers for export units (compile/precompiled_headers.h),
  // shared by the modules of a command, prepared for a plan's steps before
  // it runs (PrecompiledHeaders::prepare_plan); null: none.
  PrecompiledHeaders* pch = nullptr;
  // The module's name in progress lines of a batch ("[3/96] nvcc k3: k3.cu")
  // and in the trace; empty for a single build (its name is not ambiguous).
  std::string module;
  // The module a job is traced under: `module`, else (a single build) the plan's name.
  const std::string& traced_module() const { return module.empty() ? plan_name : module; }
  // How commands run and where progress goes (compile/runner.h); null: the
  // defaults, util::run_process and util::Progress::global().
  CommandRunner* runner = nullptr;
  StatusSink* status = nullptr;
  CommandRunner& command_runner() const { return runner ? *runner : process_runner(); }
  StatusSink& status_sink() const { return status ? *status : progress_sink(); }
};

struct CommandRecord {
  std::vector<std::string> argv;  // empty for in-process steps (NVRTC, copies)
  std::string description;        // "compile main.cpp", "link add_one.so", "nvrtc k.cu"
  std::string output;             // stdout+stderr (or the NVRTC log)
  std::string status;             // util::ProcessResult::status_text() ("exit status 0"); empty for in-process steps
  double seconds = 0;
  // The compile launcher exited 0 without producing every output, so the
  // step ran again without it (launch.h); `argv` is then the launcher-less one.
  bool launcher_fallback = false;
  std::string launcher_fallback_reason;
  // For the job trace and the memory estimate (process steps only).
  double queued_at = 0, started_at = 0;  // JobTrace::now() when it asked the gate, when it started
  double cpu_seconds = 0;
  uint64_t max_rss_bytes = 0;
  int threads = 0;  // nvcc --threads
  int slots = 0;    // job slots the gate gave it
  int64_t admission = -1;  // its place in the gate's order (util::JobGate::Ticket::admission); -1: no gate
  int split = 0;    // nvcc --split-compile=N it ran with (--split-compile auto), 0 without
  // Its split threads ran on slots the gate lent (util/jobserver.h): `split`
  // is the most it could take; the trace's samples say how many were taken.
  bool split_lent = false;
  // nvcc: the seconds of its passes that more threads do not shorten (from
  // `nvcc --time`, or a split run's wall against its CPU); negative: unknown.
  double serial_seconds = -1;
  // What the cost model expected (CPU seconds) and from what ("log",
  // "same-source", "source-size", "kind-mean", "default"); empty: not estimated.
  double estimated_cpu_seconds = 0;
  std::string estimate_source;
};

// Steps that fell back from their launcher.
size_t count_launcher_fallbacks(const std::vector<CommandRecord>& commands);

// What one translation unit read, from its depfile (parsed with parse_depfile).
struct CompiledUnit {
  std::string object_path;                // absolute
  std::string depfile_path;               // absolute
  std::vector<std::string> dependencies;  // absolute paths, the source itself excluded, in depfile order
};

struct BuildResult {
  std::string build_dir;      // absolute
  std::string artifact_path;  // absolute
  std::vector<CommandRecord> commands;   // commands that ran, in completion order
  std::vector<CommandRecord> reused;     // units CompileHooks::before_compile satisfied, in completion order
  std::vector<std::string> up_to_date;   // incremental: outputs of the steps skipped as up to date, in plan order
  std::vector<CompiledUnit> units;       // parallel to plan.compile_steps
  std::vector<CompiledUnit> device_units;  // parallel to plan.device_steps
  // What the link read (LinkStep::depfile_name): absolute paths, build-dir
  // files included, in the linker's order. nullopt: no link ran, or the
  // linker wrote no dependency file.
  std::optional<std::vector<std::string>> link_dependencies;
  std::vector<std::pair<std::string, std::string>> lowered_names;  // NVRTC: expression -> mangled
  double seconds = 0;
};

// One translation unit as the hooks see it. Units are numbered device steps
// first, then compile steps, each in plan order (0 .. device+compile-1).
struct UnitRef {
  size_t index;
  const CompileStep& step;
  CompiledUnit& unit;  // what execute_plan() returns for this unit
};

// Calls around each translation unit, made on that unit's worker thread
// (different units concurrently, one unit's calls in order). Either may be
// empty. An exception from a hook fails the build like a failed compile.
struct CompileHooks {
  // Just before the compiler would run. Returning a record satisfies the unit
  // without compiling: the hook has put step.object_name into `dir` (and the
  // generated source, if any, for later steps) and filled `unit`. The record's
  // `output` is shown as a compiler's would be (a cached unit replays the
  // warnings it was compiled with) and the record goes to BuildResult::reused.
  // nullopt: compile as usual.
  std::function<std::optional<CommandRecord>(const UnitRef&, const std::string& dir)> before_compile;
  // After the compiler succeeded and its outputs were found (`unit` is filled
  // from the depfile); `record` is what it ran and printed.
  std::function<void(const UnitRef&, const std::string& dir, const CommandRecord& record)> after_compile;
};

// A command of the plan that failed.
enum class CommandFailureKind {
  kFailed,    // a non-zero exit, a signal or a timeout
  kNoOutput,  // exit 0 without writing what the plan expects of it
};
// The documented Failure<Kind> shape (util/expected.h): `kind` to branch on,
// `message` what Error(kBuildFailed) says (which step failed and why, the
// command as a shell line for pasting, its whole output), plus the record of
// the command, which doctor reports.
struct CommandFailure : Failure<CommandFailureKind> {
  CommandRecord record;  // the command that failed: argv, output, status
  CommandFailure() = default;
  CommandFailure(CommandFailureKind k, std::string m, CommandRecord r)
      : Failure<CommandFailureKind>{k, std::move(m)}, record(std::move(r)) {}
};

// Error(kBuildFailed) for a command of the plan that failed, as execute_plan()
// throws it: the message as CommandFailure's, and the command itself (argv,
// status, output) for a report that shows it apart (`build --json`'s
// failed_command).
class CommandFailedError : public Error {
 public:
  CommandFailedError(const std::string& message, CommandRecord record)
      : Error(ExitCode::kBuildFailed, message), record_(std::move(record)) {}
  const CommandRecord& record() const { return record_; }

 private:
  CommandRecord record_;
};

// The number of steps execute_plan() runs (compiles, NVRTC, embed, link): the
// total of the "[3/7] nvcc kernel.cu" progress line (util/progress.h).
size_t progress_steps(const BuildPlan& plan);

// Creates `build_dir` if needed and builds there, one progress step per
// unit (compiled or served by a hook), NVRTC, embed and link. Throws
// Error(kBuildFailed) with the failing command (as a shell line, for pasting)
// and its output, Error(kMissingTool) when a compiler cannot be started,
// Error(kIo) for I/O.
BuildResult execute_plan(const BuildPlan& plan, const std::string& build_dir, const ExecuteOptions& options,
                         const CompileHooks& hooks = {});

// The same, with a command that fails returned as a value: for callers that
// report it rather than end on it (doctor's launcher probes). What cannot go
// on (a compiler that cannot be started, I/O, a hook's exception) still throws.
Expected<BuildResult, CommandFailure> try_execute_plan(const BuildPlan& plan, const std::string& build_dir,
                                                       const ExecuteOptions& options, const CompileHooks& hooks = {});

}  // namespace tvmffi_jit::compile
