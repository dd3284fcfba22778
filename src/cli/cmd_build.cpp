// tvmffi-jit build [SOURCES...] [-m FILE] [--name N] [--function f[=doc]] ...
//
// The orchestrator: manifest (+ command line) -> toolchain -> plan -> build
// into a directory -> print the artifact path. Every check that can fail
// without a compiler happens before the build directory is created, so a bad
// manifest (exit 2) or a missing toolchain (exit 4) writes nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/driver_load.h"
#include "batch_report.h"
#include "build_request.h"
#include "build_module.h"
#include "build_options.h"
#include "build_outputs.h"
#include "tvmffi_jit/compile/arch_check.h"
#include "tvmffi_jit/compile/scheduler.h"
#include "output.h"
#include "tvmffi_jit/compile/key.h"
#include "tvmffi_jit/cache/remote/backend.h"
#include "tvmffi_jit/cache/remote/options.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/storage.h"
#include "tvmffi_jit/cache/transfer/signing.h"
#include "tvmffi_jit/compile/cached_build.h"
#include "tvmffi_jit/compile/tvm_ffi_memo_dirs.h"
#include "tvmffi_jit/compile/cost_log.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/launch.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/compile/precompiled_headers.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/driver/devices.h"
#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/cuda_arch.h"
#include "tvmffi_jit/toolchain/toolchain.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/change_watch.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/job_gate.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/progress.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {

// Finds what this build needs and no more: a CUDA-free module does not look
// for nvcc, a cubin does not need tvm-ffi. What is absent is recorded and
// make_plan() turns it into exit 4 only if the build needs it.
toolchain::Toolchain find_toolchain(const compile::Manifest& m, const BuildRequest& r) {
  toolchain::Toolchain tc;
  const bool host_build = m.emit == compile::EmitKind::kModule || m.emit == compile::EmitKind::kObject;
  if (host_build) {
    bool need_c = false;
    for (const auto& s : m.sources) need_c = need_c || util::extension(s) == ".c";
    tc.host = toolchain::find_host_compilers(r.env, need_c).value_or_throw(missing_tool_error);
  }
  if (m.needs_cuda_toolkit()) tc.cuda = toolchain::find_cuda_toolkit(r.env);
  // ROCm: for backend hip, and to resolve an unset backend of GPU sources.
  if (m.backend == compile::GpuBackend::kHip || (!m.backend && m.has_gpu_sources()))
    tc.rocm = toolchain::find_rocm_toolkit(r.env);
  // Kernel-only builds use tvm-ffi's include directories when it is there;
  // make_plan() says when a build needs it and it is missing.
  tc.tvm_ffi = r.use_cache ? toolchain::find_tvm_ffi_memoized(
                                 r.tvm_ffi, compile::tvm_ffi_memo_dirs(r.cache_dir, r.user_toolchain_memo_dir))
                           : toolchain::find_tvm_ffi(r.tvm_ffi);
  return tc;
}

toolchain::DetectedGpus detect_gpus(const std::string& libcuda) {
  driver::DriverStatus status = driver::query_driver(libcuda);
  toolchain::DetectedGpus gpus;
  gpus.available = status.available;
  gpus.reason = status.reason;
  for (const auto& g : status.gpus) gpus.capabilities.emplace_back(g.cc_major, g.cc_minor);
  return gpus;
}

// What `build --json` prints when the command fails before it printed a
// result: the module's name once known, the command that failed.
struct FailureReport {
  bool printed = false;  // stdout has the result (or a batch's lines): nothing more goes there
  std::string name;
  std::optional<compile::CommandRecord> failed_command;
};

void write_stdout(FailureReport& report, const std::string& s) {
  util::check_termination();  // a result is printed only by a build that was not stopped
  report.printed = true;
  print_result(s);
}

// A failed command as the batch line and the failure object show it: the
// whole record, its exit status included.
nlohmann::json failed_command_json(const compile::CommandRecord& c) {
  nlohmann::json j = command_json(c);
  j["status"] = c.status;
  return j;
}

// `build --json` that ends in an error (not a signal) still gives a script one object
// (docs/build.md#json-output): the exit code the command returns, the error
// as stderr shows it, the failed command and its whole output.
void print_failure_json(const Error& e, const FailureReport& report) {
  nlohmann::json j;
  j["schema_version"] = kBuildJsonSchemaVersion;
  if (!report.name.empty()) j["name"] = report.name;
  j["status"] = "failed";
  j["exit_code"] = e.exit_code();
  j["error"] = e.what();
  if (report.failed_command) j["failed_command"] = failed_command_json(*report.failed_command);
  j["warnings"] = util::logged_warnings();
  print_result(util::dump_json(j, 2) + "\n");
}

// The cache root and its tiers, opened once for the command (cache/storage.h):
// every module of a batch and every unit asks the same storage, so a remote
// given up is given up for the whole command.
struct CommandStorage {
  std::unique_ptr<cache::Store> store;
  std::unique_ptr<cache::Storage> storage;
  // `signature_setup`: OpenSSL's set-up started with the command (it then
  // overlaps planning and the key as well), or invalid.
  void open(const BuildRequest& r, bool warm_signature_check, std::shared_future<void> signature_setup = {}) {
    store = std::make_unique<cache::Store>(cache::open_root(r.cache_dir, true, false));
    storage = std::make_unique<cache::Storage>(*store, r.remote);
    if (warm_signature_check) storage->start_signature_warmup(std::move(signature_setup));
  }
};

// The storage of this command. The engine library keeps one per process and
// cache root: its calls are --only-if-cached (the local store only, no
// remote, no lock), one at a time (docs/python.md), and a hit then costs no
// root opening. Anything else opens its own in `own`.
cache::EntryStorage& command_storage(const BuildRequest& r, bool embedded, CommandStorage& own,
                                     std::shared_future<void> signature_setup) {
  if (embedded && r.only_if_cached) {
    // Never destroyed: nothing is left to flush (cached_build flushes its
    // counts), and the caller's exit must not run our destructors.
    static CommandStorage* kept = new CommandStorage;
    static std::string kept_root;
    if (!kept->storage || kept_root != r.cache_dir) {
      kept->storage.reset();  // before the store it refers to
      kept->store.reset();
      kept->open(r, false);  // its thread would outlive the call: a fork could catch it
      kept_root = r.cache_dir;
    }
    return *kept->storage;
  }
  own.open(r, true, std::move(signature_setup));  // destroyed when the command ends, before a fork can come
  return *own.storage;
}

// --only-if-cached runs inside the Python process (the engine library), whose
// CUDA state is not the tool's to touch: loading the driver there would break
// a later fork() of the caller's CUDA program. Without an arch from the
// manifest or TVM_FFI_CUDA_ARCH_LIST the answer comes from a tvmffi-jit process.
toolchain::DetectedGpus no_gpu_detection() {
  toolchain::DetectedGpus gpus;
  gpus.reason = "not detected by --only-if-cached (run the build without it)";
  return gpus;
}

// 1. The request: command line, environment (the lookup cli::run() made),
//    manifest(s) and defaults, fully checked (exit 2) before anything runs.
BuildRequest resolve_request(const BuildArgs& args, const CommandContext& ctx) {
  const toolchain::EnvLookup& env = ctx.environment.env;
  // --only-if-cached runs nothing, so it reads none of what the job limits
  // come from (the cgroup files, mountinfo, /proc/meminfo): the engine library
  // answers every in-process hit this way (docs/python.md).
  const MachineResources machine =
      args.only_if_cached ? MachineResources{}
                          : read_machine_resources(toolchain::non_empty(env, "TVMFFI_JIT_CGROUP_ROOT").value_or("/"));
  BuildRequest request = resolve_build_request(args, env, machine);
  if (args.only_if_cached) request.limits.why = "not resolved (--only-if-cached runs no job)";
  // The engine library's repeated hits are proven by inotify watches
  // (docs/cache.md, "Watched hits") unless TVMFFI_JIT_WATCH=0; a one-shot
  // command-line process would pay the watches without asking again.
  if (ctx.embedded) util::ChangeWatch::global().enable(toolchain::env_flag(env, "TVMFFI_JIT_WATCH", true));
  return request;
}

// With keys, OpenSSL's ed25519 set-up (~1 ms) runs beside planning and the
// key, not before the first signature check; not for the engine's kept
// storage (command_storage: no thread may outlive its call).
std::shared_future<void> start_signature_setup_if_keys(const BuildRequest& r, const CommandContext& ctx) {
  if (r.use_cache && !(ctx.embedded && r.only_if_cached) && (!r.remote.trusted_keys.empty() || r.remote.sign_key))
    return cache::start_signature_setup();
  return {};
}

// 2. Plan all: every module's toolchain (exit 4 when missing) and plan,
//    before anything is built. With --keep-going a module that cannot be
//    planned is a failed module of the batch; otherwise it ends the batch.
std::vector<Planned> plan_all(const BuildRequest& r, FailureReport& report) {
  std::optional<toolchain::DetectedGpus> gpus;  // asked once for the batch (planning is serial)
  compile::PlanOptions plan_options = r.plan;
  plan_options.detect_gpus = [&gpus, &r] {
    if (!gpus) gpus = detect_gpus(r.libcuda);
    return *gpus;
  };
  if (r.only_if_cached) plan_options.detect_gpus = no_gpu_detection;
  std::vector<Planned> planned;
  for (const auto& m : r.modules) {
    Planned p;
    p.module = &m;
    p.name = m.manifest.name;
    if (!r.batch) report.name = p.name;
    if (!m.error.empty()) {
      p.plan = fail(ExitCode::kUsage, m.error);
      planned.push_back(std::move(p));
      continue;
    }
    try {
      p.tc = find_toolchain(m.manifest, r);
      p.plan = compile::make_plan(m.manifest, p.tc, plan_options);
      p.name = p.plan->name;
      if (!r.batch) report.name = p.name;
      check_supported_archs(*p.plan, p.tc, r.use_cache ? r.cache_dir : std::string(), r.use_cache);
    } catch (const Error& e) {
      if (!r.batch) throw;
      if (!r.keep_going) {
        if (dynamic_cast<const compile::ManifestError*>(&e)) throw;  // already names its manifest
        throw Error(e.code(), m.origin + ": " + e.what());
      }
      p.plan = fail(e.code(), m.origin + ": " + e.what());
    }
    planned.push_back(std::move(p));
  }
  return planned;
}

// What building every module gave: per module, in input order.
struct BuiltModules {
  std::vector<ModuleOutcome> outcomes;
  std::vector<compile::BatchItem> items;
  double wall_seconds = 0;
};

// 3. Build all: one job gate for every compile and link of the request, and
//    one cost model (what each job cost before, <root>/costs.log and the
//    remotes' costs object; read at the first job that runs, so an all-hit
//    command never asks a remote for it). A single
//    module's failure is the command's error; a batch's modules go through
//    the scheduler (compile/scheduler.h).
BuiltModules build_all(const BuildRequest& r, CommandContext& ctx, const std::vector<Planned>& planned,
                       std::shared_future<void> signature_setup, compile::JobTrace* trace, FailureReport& report) {
  // --split-compile auto: the slots nobody waits for are lent to the nvcc
  // jobs' split passes (util/jobserver.h), so no core idles at the tail.
  util::JobGate gate(r.limits.slots, r.limits.memory_bytes, r.plan.split_compile == compile::kSplitCompileAuto);
  compile::JobMemory memory(r.limits.cuda_job_bytes, r.limits.learn_job_bytes);
  if (trace) {
    compile::CommandRecord planning;
    planning.description = "planning " + std::to_string(planned.size()) + " modules";
    planning.seconds = trace->now();
    trace->add("", planning);
  }
  spdlog::debug("job gate: {}", r.limits.why);
  CommandStorage own_storage;
  Shared shared{r, ctx, {}, {}};
  if (r.use_cache) shared.storage = &command_storage(r, ctx.embedded, own_storage, std::move(signature_setup));
  // The root's log, and the remotes' costs object (the team's), both read at the first job.
  const bool learns = r.use_cache && !r.only_if_cached;
  compile::CostModel costs(learns ? util::join_path(r.cache_dir, "costs.log") : "", r.limits.memory_bytes,
                           learns ? shared.storage : nullptr);
  shared.exec.jobs = r.limits.slots;
  shared.exec.verbose = ctx.global.verbosity > 0;  // -q hides progress and logs, never compiler warnings
  // A hit-only caller showed the compiler's warnings when the module was built.
  shared.exec.hide_compiler_output = r.only_if_cached;
  shared.exec.gate = &gate;
  shared.exec.cuda_job_bytes = r.limits.cuda_job_bytes;
  shared.exec.memory = &memory;
  shared.exec.costs = &costs;
  shared.exec.trace = trace;
  compile::PrecompiledHeaders pch(r.only_if_cached ? "" : r.pch_dir);  // GCC's, per user; not for a hit-only caller
  if (pch.enabled()) shared.exec.pch = &pch;

  const size_t n = planned.size();
  BuiltModules out;
  out.outcomes.resize(n);
  auto build_one = [&](size_t i, util::JobGate::Party* party) -> compile::BatchItem {
    const Planned& p = planned[i];
    if (!p.plan) throw Error(p.plan.error().kind, p.plan.why());
    try {
      out.outcomes[i] = build_module(shared, p, party);
    } catch (const compile::CommandFailedError& e) {
      out.outcomes[i].failed_command = e.record();  // its line (or the failure object) shows the command apart
      if (!r.batch) report.failed_command = e.record();
      throw;
    }
    return out.outcomes[i].item;
  };
  size_t total_steps = 0;
  for (const auto& p : planned)
    if (p.plan) total_steps += compile::progress_steps(*p.plan);
  const auto start = std::chrono::steady_clock::now();
  compile::LentSampler lent_sampler(trace, gate);  // the split threads on lent slots, for the trace
  if (!r.batch) {
    out.items.push_back(build_one(0, nullptr));  // a failure is this command's error (exit code and message)
    out.items[0].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } else {
    std::vector<compile::BatchModule> modules;
    for (const auto& p : planned) modules.push_back({p.plan ? &*p.plan : nullptr, p.module->base_dir});
    compile::BatchOptions bo;
    bo.keep_going = r.keep_going;
    // More modules than run at once (twice the slots): a cold unit's size ranks them too.
    bo.order = compile::longest_chain_first(costs, modules, !r.only_if_cached && n > 2 * static_cast<size_t>(gate.slots()));
    bo.gate = &gate;
    bo.on_failure = [&](size_t i, const compile::BatchItem& item) {
      const std::string where = planned[i].module->origin.empty() ? "" : " (" + planned[i].module->origin + ")";
      util::Progress::global().print_above("tvmffi-jit: error: " + planned[i].name + where + ": " + item.error + "\n");
    };
    util::ProgressScope progress(total_steps);
    out.items = compile::run_batch(n, bo, build_one);
  }
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  costs.save();
  // What the gate saw, for a batch (a single module's -vv says what it got, above).
  if (r.batch)
    spdlog::debug("job gate: peak {} slots, peak {} reserved of {}; largest nvcc job {}, host job {}",
                  gate.peak_slots(), util::format_bytes(gate.peak_reserved_bytes()),
                  util::format_bytes(gate.memory_bytes()), util::format_bytes(memory.cuda.largest_seen()),
                  util::format_bytes(memory.host.largest_seen()));
  return out;
}

// 4. Validation loads through the driver one artifact at a time, after the pool is done.
std::vector<nlohmann::json> validate_all(const BuildRequest& r, BuiltModules& built) {
  std::vector<nlohmann::json> validations(built.items.size());
  for (size_t i = 0; r.validate && i < built.items.size(); ++i) {
    compile::BatchItem& item = built.items[i];
    if (item.status != compile::BatchStatus::kHit && item.status != compile::BatchStatus::kBuilt) continue;
    const std::string& path = built.outcomes[i].path;
    int v = validate_build_output(path, r.validate_options, r.require_driver, r.json ? &validations[i] : nullptr);
    if (v != 0) {
      item.status = compile::BatchStatus::kFailed;
      item.exit_code = v;
      item.error = "validation of " + path + " failed";
    }
  }
  return validations;
}

// 5a. Report one module: its path (or --output's) or one JSON object.
int report_module(const BuildRequest& r, const Planned& planned, BuiltModules& built, const nlohmann::json& validation,
                  FailureReport& report) {
  ModuleOutcome& o = built.outcomes[0];
  if (o.only_if_cached_miss) {
    o.json["warnings"] = util::logged_warnings();
    write_stdout(report, util::dump_json(o.json, 2) + "\n");
    return 0;
  }
  const bool ok = built.items[0].status != compile::BatchStatus::kFailed;
  const std::string shown =
      ok ? write_build_outputs(r.outputs, r.modules[0].manifest, *planned.plan, o.build, o.entry_dir) : o.path;
  if (r.json) {
    if (!r.outputs.output.empty()) o.json["output"] = shown;
    if (r.validate) o.json["validation"] = validation;
    o.json["warnings"] = util::logged_warnings();
    write_stdout(report, util::dump_json(o.json, 2) + "\n");
  } else {
    write_stdout(report, shown + "\n");
  }
  return built.items[0].exit_code;
}

// 5b. Report a batch: one line per module, in input order
//     (docs/build.md#batch-builds), then the summary table on stderr.
int report_batch(const BuildRequest& r, const CommandContext& ctx, const std::vector<Planned>& planned,
                 const BuiltModules& built, const std::vector<nlohmann::json>& validations, FailureReport& report) {
  std::string out;
  for (size_t i = 0; i < planned.size(); ++i) {
    const compile::BatchItem& item = built.items[i];
    const ModuleOutcome& outcome = built.outcomes[i];
    const bool ok = item.status == compile::BatchStatus::kHit || item.status == compile::BatchStatus::kBuilt;
    if (r.json) {
      nlohmann::json j = ok ? outcome.json : nlohmann::json::object();
      if (!ok) {
        j["schema_version"] = kBuildJsonSchemaVersion;
        j["name"] = planned[i].name;
        if (item.status == compile::BatchStatus::kFailed) {
          j["exit_code"] = item.exit_code;
          j["error"] = item.error;
          if (outcome.failed_command) j["failed_command"] = failed_command_json(*outcome.failed_command);
        }
      }
      if (r.validate && !validations[i].is_null()) j["validation"] = validations[i];
      j["origin"] = planned[i].module->origin;
      j["status"] = compile::batch_status_name(item.status);
      j["module_seconds"] = item.seconds;
      out += util::dump_json(j) + "\n";
    } else {
      // A failed or skipped module prints an empty line, so line N is module N.
      out += (ok ? outcome.path : std::string()) + "\n";
    }
  }
  write_stdout(report, out);
  if (ctx.global.quiet == 0) {
    std::vector<std::string> names;
    for (const auto& p : planned) names.push_back(p.name);
    std::string table = format_batch_summary(names, built.items, built.wall_seconds);
    std::fwrite(table.data(), 1, table.size(), stderr);
  }
  return compile::batch_exit_code(built.items);
}

// Request, plan all, build all, validate, report.
int run_build(const BuildArgs& args, CommandContext& ctx, FailureReport& report) {
  // SIGINT/SIGTERM/SIGHUP stop the compilers and unwind, so the staging and
  // temp dirs below are removed on the way out (util/process.h).
  util::UnwindOnTermination unwind_on_termination;
  const BuildRequest r = resolve_request(args, ctx);
  std::shared_future<void> signature_setup = start_signature_setup_if_keys(r, ctx);
  std::optional<compile::JobTrace> trace;  // from here, so that planning shows in the timeline
  if (!r.job_trace.empty()) trace.emplace();
  const std::vector<Planned> planned = plan_all(r, report);
  BuiltModules built = build_all(r, ctx, planned, std::move(signature_setup), trace ? &*trace : nullptr, report);
  if (trace) util::write_file_atomic(r.job_trace, compile::job_trace_text(*trace, r.job_trace));
  const std::vector<nlohmann::json> validations = validate_all(r, built);
  return r.batch ? report_batch(r, ctx, planned, built, validations, report)
                 : report_module(r, planned[0], built, validations[0], report);
}

// The parsed values are taken and the bound ones reset before the build
// runs: the engine library parses every call with the same app
// (cli/app.cpp, EmbeddedApp), and one call's options must not reach the next.
void set_build_callback(CLI::App& sub, std::shared_ptr<BuildArgs> args, CommandContext& ctx) {
  sub.callback([args, &ctx] {
    BuildArgs parsed = std::move(*args);
    *args = BuildArgs{};
    FailureReport report;
    try {
      ctx.exit_code = run_build(parsed, ctx, report);
    } catch (const Error& e) {
      // A build stopped by a signal prints nothing (docs/build.md): whoever stopped it knows.
      if (parsed.json && !report.printed && util::termination_signal() == 0) print_failure_json(e, report);
      throw;  // stderr still says it, and the exit code is the error's
    }
  });
}

}  // namespace

void register_build_command(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<BuildArgs>();
  CLI::App* sub = app.add_subcommand(
      "build", "Build C++/CUDA sources (files, inline code in a JSON manifest, or both) into a TVM FFI module\n"
               "(.so), a relocatable object, or a cubin/fatbin/PTX; prints the artifact's absolute path.");
  add_build_options(*sub, *args);
  set_build_callback(*sub, args, ctx);
}

}  // namespace tvmffi_jit::cli
