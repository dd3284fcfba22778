// tvmffi-jit build [SOURCES...] [-m FILE] [--name N] [--function f[=doc]] ...
//
// The orchestrator: manifest (+ command line) -> toolchain -> plan -> build
// into a directory -> print the artifact path. Every check that can fail
// without a compiler happens before the build directory is created, so a bad
// manifest (exit 2) or a missing toolchain (exit 4) writes nothing.
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
#include "build_outputs.h"
#include "tvmffi_jit/compile/batch.h"
#include "output.h"
#include "tvmffi_jit/cache/remote.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/compile/cached_build.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/launch.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/driver/devices.h"
#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/cuda_arch.h"
#include "tvmffi_jit/toolchain/toolchain.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/json.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/job_gate.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/process.h"
#include "tvmffi_jit/util/progress.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {

struct BuildArgs {
  std::vector<std::string> manifests;  // -m, repeatable: more than one (or a directory, glob, modules manifest) is a batch
  bool keep_going = false;             // batch: build the other modules after one fails
  compile::CommandLineInputs inputs;
  BuildOutputOptions outputs;  // --output, --link-to, --depfile, --compile-commands
  std::string build_dir;
  std::string cache_dir;  // --cache-dir (cache on unless --build-dir or --no-cache)
  bool force = false;
  bool verify = false;  // --verify: re-hash the cached artifact on a hit whatever its size
  bool no_cache = false;
  bool only_if_cached = false;  // --only-if-cached (hidden): a local hit, or {"cache": "miss"} without building
  std::string base_dir;                  // --base-dir
  std::vector<std::string> remote_urls;  // --remote (repeatable)
  bool remote_read_only = false;         // --remote-read-only
  std::string remote_namespace;          // --remote-namespace
  std::string remote_sign_key;                   // --remote-sign-key FILE
  std::vector<std::string> remote_trusted_keys;  // --remote-trusted-key FILE (repeatable)
  std::string tvm_ffi_root;
  int jobs = 0;
  std::string mem_per_job;  // --mem-per-job SIZE (a CUDA unit's reservation in the job gate)
  bool json = false;
  bool validate = false;        // --validate: check the artifact offline and through the driver
  bool require_driver = false;  // --require-driver: no driver is exit 4 instead of a warning
  DriverLoadOptions driver;     // --device, --timeout
};

bool uses_cache(const BuildArgs& args) { return args.build_dir.empty() && !args.no_cache; }

// The directory paths are made relative to in portable keys (docs/remote.md):
// --base-dir, else $TVMFFI_JIT_BASE_DIR, else the manifest's directory, else
// the current directory; none (every path absolute) when the current
// directory is gone (a build with absolute paths still works there).
std::string key_base_dir(const BuildArgs& args, const compile::Manifest& m) {
  if (!args.base_dir.empty()) return util::absolute_path(args.base_dir);
  if (const char* v = std::getenv("TVMFFI_JIT_BASE_DIR"); v && *v) return util::absolute_path(v);
  if (!m.manifest_path.empty()) return util::parent_path(m.manifest_path);
  char buf[PATH_MAX];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) : std::string();
}

cache::RemoteOptions remote_options(const BuildArgs& args) {
  cache::RemoteOptions cl;
  cl.urls = args.remote_urls;
  if (!args.remote_namespace.empty()) cl.key_namespace = args.remote_namespace;
  cl.sign_key_file = args.remote_sign_key;
  cl.trusted_key_files = args.remote_trusted_keys;
  cache::RemoteOptions o = cache::remote_options_from_environment(cl, args.remote_read_only);
  cache::check_remote_urls(o.urls);
  if (!o.key_namespace.empty() && !cache::is_valid_entry_name(o.key_namespace))
    throw usage_error("remote namespace '" + o.key_namespace +
                      "': use letters, digits, '.', '_' and '-' (it becomes part of a URL path and a Redis key)");
  return o;
}

// Finds what this build needs and no more: a CUDA-free module does not look
// for nvcc, a cubin does not need tvm-ffi. What is absent is recorded and
// make_plan() turns it into exit 4 only if the build needs it.
toolchain::Toolchain find_toolchain(const compile::Manifest& m, const BuildArgs& args) {
  toolchain::Toolchain tc;
  toolchain::EnvLookup env = toolchain::process_environment();
  const bool host_build = m.emit == compile::EmitKind::kModule || m.emit == compile::EmitKind::kObject;
  if (host_build) {
    bool need_c = false;
    for (const auto& s : m.sources) need_c = need_c || util::extension(s) == ".c";
    tc.host = toolchain::find_host_compilers(env, need_c).value_or_throw(missing_tool_error);
  }
  if (m.needs_cuda()) tc.cuda = toolchain::find_cuda_toolkit(env);
  // Kernel-only builds use tvm-ffi's include directories when it is there;
  // make_plan() says when a build needs it and it is missing.
  toolchain::TvmFfiSearch search;
  if (!args.tvm_ffi_root.empty()) search.root = args.tvm_ffi_root;
  tc.tvm_ffi = uses_cache(args) ? compile::find_tvm_ffi_memoized(search, args.cache_dir) : toolchain::find_tvm_ffi(search);
  return tc;
}

toolchain::DetectedGpus detect_gpus() {
  driver::DriverStatus status = driver::query_driver();
  toolchain::DetectedGpus gpus;
  gpus.available = status.available;
  gpus.reason = status.reason;
  for (const auto& g : status.gpus) gpus.capabilities.emplace_back(g.cc_major, g.cc_minor);
  return gpus;
}

nlohmann::json result_json(const compile::BuildPlan& plan, const compile::BuildResult& r) {
  nlohmann::json j;
  j["path"] = r.artifact_path;
  j["name"] = plan.name;
  j["emit"] = compile::emit_kind_name(plan.emit);
  j["compiler"] = compile::device_compiler_name(plan.compiler);
  j["functions"] = plan.functions;
  j["archs"] = nlohmann::json::array();
  for (const auto& a : plan.archs) j["archs"].push_back(a.text());
  if (!plan.arch_source.empty()) j["arch_source"] = plan.arch_source;
  j["build_dir"] = r.build_dir;
  j["commands"] = nlohmann::json::array();
  for (const auto& c : r.commands) {
    nlohmann::json cj;
    cj["description"] = c.description;
    cj["argv"] = c.argv;
    cj["seconds"] = c.seconds;
    cj["output"] = c.output;
    j["commands"].push_back(std::move(cj));
  }
  if (plan.nvrtc) {
    j["lowered_names"] = nlohmann::json::object();
    for (const auto& [expr, mangled] : r.lowered_names) j["lowered_names"][expr] = mangled;
  }
  j["launcher_fallbacks"] = compile::count_launcher_fallbacks(r.commands);
  j["seconds"] = r.seconds;
  return j;
}

// The job gate of one invocation: -j slots and a memory budget of what the
// machine has available now, each CUDA unit reserving --mem-per-job.
struct JobBudget {
  std::unique_ptr<util::JobGate> gate;
  uint64_t cuda_job_bytes = compile::kDefaultCudaJobBytes;
};

JobBudget job_budget(const BuildArgs& args) {
  JobBudget b;
  if (!args.mem_per_job.empty()) {
    auto bytes = util::parse_size(args.mem_per_job);
    if (!bytes || *bytes == 0)
      throw usage_error("--mem-per-job " + args.mem_per_job + ": expected a size such as 4G, 1500M or 8GiB");
    b.cuda_job_bytes = *bytes;
  }
  uint64_t budget = util::available_memory_bytes().value_or(0);
  b.gate = std::make_unique<util::JobGate>(args.jobs, budget);
  if (budget != 0 && b.cuda_job_bytes > budget)
    spdlog::debug("--mem-per-job {} exceeds the {} available: CUDA units compile one at a time",
                  util::format_bytes(b.cuda_job_bytes), util::format_bytes(budget));
  return b;
}

nlohmann::json cached_result_json(const compile::BuildPlan& plan, const compile::CachedBuildResult& cr) {
  nlohmann::json j = result_json(plan, cr.build);
  j["cache"] = cr.cache;
  j["key"] = cr.key;
  j["entry_dir"] = cr.entry_dir.empty() ? nlohmann::json() : nlohmann::json(cr.entry_dir);
  if (cr.cache == "miss") j["miss_reason"] = cr.miss_reason;
  if (cr.cache == "remote-hit") j["remote"] = cr.remote_source;
  j["objects_reused"] = cr.objects_reused;
  j["objects_compiled"] = cr.objects_compiled;
  return j;
}

void write_stdout(const std::string& s) {
  util::check_termination();  // a result is printed only by a build that was not stopped
  print_result(s);
}

compile::PlanOptions plan_options_from_environment() {
  compile::PlanOptions plan_options;
  if (const char* v = std::getenv("TVM_FFI_CUDA_ARCH_LIST")) plan_options.env_arch_list = std::string(v);
  if (const char* v = std::getenv("TVMFFI_JIT_CXX_LAUNCHER")) plan_options.env_cxx_launcher = std::string(v);
  if (const char* v = std::getenv("TVMFFI_JIT_CUDA_LAUNCHER")) plan_options.env_cuda_launcher = std::string(v);
  plan_options.detect_gpus = detect_gpus;
  return plan_options;
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

int run_batch_build(const BuildArgs& args, CommandContext& ctx, std::vector<compile::BatchInput> modules);

int run_build(const BuildArgs& args, CommandContext& ctx) {
  // SIGINT/SIGTERM/SIGHUP stop the compilers and unwind, so the staging and
  // temp dirs below are removed on the way out (util/process.h).
  util::UnwindOnTermination unwind_on_termination;
  // 1. What to build: the manifest, extended by the command line; fully
  //    validated (exit 2) before anything else happens. Several manifests
  //    (or a directory, glob or modules manifest) are a batch.
  compile::Manifest manifest;
  if (!args.manifests.empty()) {
    compile::ExpandedManifests expanded = compile::expand_manifest_arguments(args.manifests);
    if (expanded.batch) return run_batch_build(args, ctx, std::move(expanded.modules));
    manifest = std::move(expanded.modules.at(0).manifest);
  }
  compile::apply_command_line(manifest, args.inputs);
  if (args.only_if_cached && (!uses_cache(args) || !args.json))
    throw usage_error("--only-if-cached answers from the cache with --json; it takes neither --build-dir nor --no-cache");
  const cache::RemoteOptions remote = uses_cache(args) ? remote_options(args) : cache::RemoteOptions{};

  // 2. With what, and how: toolchain (exit 4 when missing) and the plan.
  toolchain::Toolchain tc = find_toolchain(manifest, args);
  compile::PlanOptions plan_options = plan_options_from_environment();
  if (args.only_if_cached) plan_options.detect_gpus = no_gpu_detection;
  compile::BuildPlan plan = compile::make_plan(manifest, tc, plan_options);

  JobBudget budget = job_budget(args);
  compile::ExecuteOptions exec;
  exec.jobs = args.jobs;
  exec.verbose = ctx.global.verbosity > 0;  // -q hides progress and logs, never compiler warnings
  exec.gate = budget.gate.get();
  exec.cuda_job_bytes = budget.cuda_job_bytes;
  // A hit-only caller showed the compiler's warnings when the module was built.
  if (args.only_if_cached) exec.hide_compiler_output = true;

  // 3a. Cached (the default): docs/cache.md.
  if (uses_cache(args)) {
    compile::CachedBuildOptions co;
    co.cache_dir = args.cache_dir;
    co.force = args.force;
    co.keep_key_trace = ctx.global.verbosity >= 2;  // -vv: what every key was hashed from
    co.verify = args.verify;
    co.exec = exec;
    co.base_dir = key_base_dir(args, manifest);
    co.remote = remote;
    co.only_if_cached = args.only_if_cached;
    compile::CachedBuildResult cr = compile::cached_build(plan, manifest, tc, co);
    if (args.only_if_cached && cr.cache == "miss") {
      nlohmann::json j{{"name", plan.name}, {"cache", "miss"}, {"key", cr.key}, {"miss_reason", cr.miss_reason}};
      j["warnings"] = util::logged_warnings();
      print_result(util::dump_json(j, 2) + "\n");
      return 0;
    }
    nlohmann::json validation;
    int validated = args.validate ? validate_build_output(cr.build.artifact_path, args.driver, args.require_driver,
                                                          args.json ? &validation : nullptr)
                                  : 0;
    const std::string shown =
        validated == 0 ? write_build_outputs(args.outputs, manifest, plan, cr.build, cr.entry_dir) : cr.build.artifact_path;
    if (args.json) {
      nlohmann::json j = cached_result_json(plan, cr);
      if (!args.outputs.output.empty()) j["output"] = shown;
      if (args.validate) j["validation"] = validation;
      j["warnings"] = util::logged_warnings();
      print_result(util::dump_json(j, 2) + "\n");
    } else {
      print_result(shown + "\n");
    }
    return validated;
  }

  // 3b. Where: --build-dir as given, else (--no-cache) a fresh directory
  //    under the system temp dir that outlives this process (the artifact is
  //    in it).
  compile::BuildResult result;
  if (!args.build_dir.empty()) {
    if (exec.verbose) spdlog::info("building {} in {}", plan.name, args.build_dir);
    result = compile::execute_plan(plan, args.build_dir, exec);
  } else {
    result = compile::build_without_cache(plan, exec);
  }
  nlohmann::json validation;
  int validated = args.validate ? validate_build_output(result.artifact_path, args.driver, args.require_driver,
                                                        args.json ? &validation : nullptr)
                                : 0;
  const std::string shown = validated == 0 ? write_build_outputs(args.outputs, manifest, plan, result, "") : result.artifact_path;

  // 5. Report: one line (the path) or one JSON object on stdout.
  if (args.json) {
    nlohmann::json j = result_json(plan, result);
    if (!args.outputs.output.empty()) j["output"] = shown;
    j["cache"] = "off";
    if (args.validate) j["validation"] = validation;
    j["warnings"] = util::logged_warnings();
    print_result(util::dump_json(j, 2) + "\n");
  } else {
    print_result(shown + "\n");
  }
  return validated;
}

// A batch: every module read, checked and planned first (a bad manifest is
// exit 2 and a missing toolchain exit 4 before anything is built), then all
// of them built through one job gate, several modules in flight so that one
// module's link never leaves the pool idle.
int run_batch_build(const BuildArgs& args, CommandContext& ctx, std::vector<compile::BatchInput> modules) {
  if (!args.inputs.sources.empty())
    throw usage_error("source files on the command line build one module; a batch (several -m, a directory, a glob "
                      "or a modules manifest) takes each module's sources from its manifest");
  if (args.inputs.name) throw usage_error("--name names one module; in a batch each manifest names its own");
  if (args.only_if_cached) throw usage_error("--only-if-cached answers for one module; build a batch without it");
  if (!args.outputs.output.empty() || !args.outputs.link_to.empty() || !args.outputs.depfile.empty() ||
      !args.outputs.compile_commands.empty())
    throw usage_error("--output, --link-to, --depfile and --compile-commands are about one module's artifact; a batch "
                      "prints every artifact path instead (build a module alone for these)");

  struct Planned {
    compile::Manifest manifest;
    std::string origin;
    toolchain::Toolchain tc;
    compile::BuildPlan plan;
  };
  std::vector<Planned> planned;
  compile::PlanOptions plan_options = plan_options_from_environment();
  std::optional<toolchain::DetectedGpus> gpus;  // asked once for the batch (planning is serial)
  plan_options.detect_gpus = [&gpus] {
    if (!gpus) gpus = detect_gpus();
    return *gpus;
  };
  size_t total_steps = 0;
  for (auto& in : modules) {
    try {
      compile::apply_command_line(in.manifest, args.inputs);
      toolchain::Toolchain tc = find_toolchain(in.manifest, args);
      compile::BuildPlan plan = compile::make_plan(in.manifest, tc, plan_options);
      total_steps += compile::progress_steps(plan);
      planned.push_back({std::move(in.manifest), in.origin, std::move(tc), std::move(plan)});
    } catch (const compile::ManifestError&) {
      throw;  // already names its manifest
    } catch (const Error& e) {
      throw Error(e.code(), in.origin + ": " + e.what());
    }
  }

  JobBudget budget = job_budget(args);
  compile::ExecuteOptions exec;
  exec.jobs = args.jobs;
  exec.verbose = ctx.global.verbosity > 0;  // -q hides progress and logs, never compiler warnings
  exec.gate = budget.gate.get();
  exec.cuda_job_bytes = budget.cuda_job_bytes;

  const size_t n = planned.size();
  compile::InFlightUnits in_flight;  // a unit shared by modules compiles once
  std::vector<std::string> paths(n);
  std::vector<nlohmann::json> lines(n);
  compile::BatchOptions bo;
  bo.keep_going = args.keep_going;
  bo.concurrency = 2 * budget.gate->slots();
  bo.on_failure = [&](size_t i, const compile::BatchItem& item) {
    util::Progress::global().print_above("tvmffi-jit: error: " + planned[i].plan.name + " (" + planned[i].origin +
                                         "): " + item.error + "\n");
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<compile::BatchItem> items;
  {
    util::ProgressScope progress(total_steps);
    items = compile::run_batch(n, bo, [&](size_t i) {
      const Planned& p = planned[i];
      compile::BatchItem item;
      if (uses_cache(args)) {
        compile::CachedBuildOptions co;
        co.cache_dir = args.cache_dir;
        co.force = args.force;
        co.exec = exec;
        co.keep_key_trace = ctx.global.verbosity >= 2;
        co.in_flight = &in_flight;
        compile::CachedBuildResult cr = compile::cached_build(p.plan, p.manifest, p.tc, co);
        item.status = cr.cache == "hit" ? compile::BatchStatus::kHit : compile::BatchStatus::kBuilt;
        item.objects_reused = cr.objects_reused;
        item.objects_compiled = cr.objects_compiled;
        paths[i] = cr.build.artifact_path;
        if (args.json) lines[i] = cached_result_json(p.plan, cr);
      } else {
        std::string dir;
        if (!args.build_dir.empty()) {
          dir = util::join_path(args.build_dir, p.plan.name);
        } else {
          util::TempDir temp(util::temp_root(), "tvmffi-jit-" + p.plan.name + "-");
          temp.keep();
          dir = temp.path();
        }
        compile::BuildResult r = compile::execute_plan(p.plan, dir, exec);
        item.status = compile::BatchStatus::kBuilt;
        item.objects_compiled = p.plan.compile_steps.size() + p.plan.device_steps.size();
        paths[i] = r.artifact_path;
        if (args.json) {
          lines[i] = result_json(p.plan, r);
          lines[i]["cache"] = "off";
        }
      }
      return item;
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Validation loads through the driver one artifact at a time, after the pool is done.
  if (args.validate) {
    for (size_t i = 0; i < n; ++i) {
      if (items[i].status != compile::BatchStatus::kHit && items[i].status != compile::BatchStatus::kBuilt) continue;
      nlohmann::json validation;
      int v = validate_build_output(paths[i], args.driver, args.require_driver, args.json ? &validation : nullptr);
      if (args.json) lines[i]["validation"] = validation;
      if (v != 0) {
        items[i].status = compile::BatchStatus::kFailed;
        items[i].exit_code = v;
        items[i].error = "validation of " + paths[i] + " failed";
      }
    }
  }

  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const compile::BatchItem& item = items[i];
    const bool ok = item.status == compile::BatchStatus::kHit || item.status == compile::BatchStatus::kBuilt;
    if (args.json) {
      nlohmann::json& j = lines[i];
      if (!ok) {
        j = nlohmann::json::object();
        j["name"] = planned[i].plan.name;
        if (item.status == compile::BatchStatus::kFailed) {
          j["exit_code"] = item.exit_code;
          j["error"] = item.error;
        }
      }
      j["origin"] = planned[i].origin;
      j["status"] = compile::batch_status_name(item.status);
      j["module_seconds"] = item.seconds;
      out += j.dump() + "\n";
    } else if (ok) {
      out += paths[i] + "\n";
    }
  }
  write_stdout(out);
  if (!ctx.global.quiet) {
    std::vector<std::string> names;
    for (const auto& p : planned) names.push_back(p.plan.name);
    std::string table = format_batch_summary(names, items, wall);
    std::fwrite(table.data(), 1, table.size(), stderr);
  }
  spdlog::debug("job gate: peak {} slots, peak {} reserved of {}", budget.gate->peak_slots(),
                util::format_bytes(budget.gate->peak_reserved_bytes()), util::format_bytes(budget.gate->memory_bytes()));
  return compile::batch_exit_code(items);
}

}  // namespace

void register_build_command(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<BuildArgs>();
  CLI::App* sub = app.add_subcommand(
      "build", "Build C++/CUDA sources (files, inline code in a JSON manifest, or both) into a TVM FFI module\n"
               "(.so), a relocatable object, or a cubin/fatbin/PTX; prints the artifact's absolute path.");
  compile::CommandLineInputs& in = args->inputs;
  sub->add_option("sources", in.sources, "Source files (.c .cc .cpp .cxx .cu .o), added to the manifest's");
  sub->add_option("-m,--manifest", args->manifests,
                  "JSON manifest (keys as tvm_ffi.cpp.build_inline; docs/manifest.md). Repeatable; a directory, a glob\n"
                  "or a {\"modules\": [...]} manifest builds a batch in one job pool (docs/build.md#batch-builds)")
      ->allow_extra_args(false);
  sub->add_flag("-k,--keep-going", args->keep_going, "Batch: build the other modules after one fails (exit status still 1)");
  sub->add_option("--name", in.name, "Module name (default: the manifest's, else the first source's stem)");
  sub->add_option("--function", in.functions, "Export function f (f=doc adds a docstring); repeatable")->allow_extra_args(false);
  sub->add_option("--cflag", in.cflags, "Extra C/C++ compiler flag (--cflag=-DX=1); repeatable")->allow_extra_args(false);
  sub->add_option("--cuda-cflag", in.cuda_cflags, "Extra nvcc flag (--cuda-cflag=--use_fast_math); repeatable")
      ->allow_extra_args(false);
  sub->add_option("--ldflag", in.ldflags, "Extra link flag (--ldflag=-lcuda); repeatable")->allow_extra_args(false);
  sub->add_option("-I,--include", in.include_paths, "Extra include directory; repeatable")->allow_extra_args(false);
  sub->add_option("--arch", in.arch,
                  "CUDA archs: X.Y, X.Ya, X.Yf, optional +PTX, separated by spaces, commas or semicolons; repeatable.\n"
                  "Default: the manifest's cuda_arch, else $TVM_FFI_CUDA_ARCH_LIST, else the visible GPUs")
      ->allow_extra_args(false);
  sub->add_option("--emit", in.emit, "module (default: .so), object (.o), cubin, fatbin or ptx");
  sub->add_option("--compiler", in.compiler, "Device compiler for --emit cubin/ptx: nvcc (default) or nvrtc");
  sub->add_option("--kernel-name", in.kernel_names, "NVRTC name expression to lower (e.g. 'add<float>'); repeatable")
      ->allow_extra_args(false);
  sub->add_option("--embed-cubin", in.embed_cubin,
                  "NAME=FILE: link FILE (.cubin/.fatbin, or a .cu compiled to a cubin) for TVM_FFI_EMBED_CUBIN(NAME)")
      ->allow_extra_args(false);
  sub->add_option("--build-dir", args->build_dir, "Build in DIR, bypassing the cache");
  sub->add_option("--cache-dir", args->cache_dir,
                  "Cache root (default: $TVMFFI_JIT_CACHE_DIR, else $XDG_CACHE_HOME/tvmffi-jit, else ~/.cache/tvmffi-jit)");
  sub->add_flag("--force", args->force, "Rebuild even if the cache has the module (and replace the entry)");
  sub->add_flag("--verify", args->verify,
                "On a cache hit, re-hash the artifact against its recorded SHA-256 whatever its size (modules up to "
                "4 MiB always are); a mismatch rebuilds");
  sub->add_flag("--no-cache", args->no_cache, "Build in a new temp directory without the cache");
  // Hidden (no group): the Python package's in-process hit path (docs/python.md).
  sub->add_flag("--only-if-cached", args->only_if_cached,
                "Answer from the local cache only: a hit as usual, else {\"cache\": \"miss\"} with --json, building nothing")
      ->group("");
  sub->add_option("--remote", args->remote_urls,
                  "Remote cache (http://, https:// or redis:// URL), tried in order after a local miss;\n"
                  "repeatable (default: $TVMFFI_JIT_REMOTE, URLs separated by spaces; docs/remote.md)")
      ->allow_extra_args(false);
  sub->add_flag("--remote-read-only", args->remote_read_only,
                "Fetch from the remote caches but never upload (also $TVMFFI_JIT_REMOTE_READ_ONLY=1)");
  sub->add_option("--remote-namespace", args->remote_namespace,
                  "Key prefix on the remote servers (default: $TVMFFI_JIT_REMOTE_NAMESPACE, else tvmffi-jit)");
  sub->add_option("--remote-sign-key", args->remote_sign_key,
                  "Sign uploaded entries with this secret key (NAME.sec from `cache keygen`; default:\n"
                  "$TVMFFI_JIT_REMOTE_SIGN_KEY)");
  sub->add_option("--remote-trusted-key", args->remote_trusted_keys,
                  "Use remote and imported entries only if signed by this public key (NAME.pub); repeatable\n"
                  "(default: $TVMFFI_JIT_REMOTE_TRUSTED_KEYS, files separated by ':'; docs/remote.md)")
      ->allow_extra_args(false);
  sub->add_option("--base-dir", args->base_dir,
                  "Project root for path-independent keys: paths under it are hashed relative to it, so a\n"
                  "checkout elsewhere hits the remote cache (default: $TVMFFI_JIT_BASE_DIR, else the manifest's\n"
                  "directory, else the current directory)");
  sub->add_option("--tvm-ffi-root", args->tvm_ffi_root,
                  "tvm-ffi installation (default: $TVM_FFI_ROOT, tvm-ffi-config, python3 -c 'import tvm_ffi')");
  sub->add_option("-j,--jobs", args->jobs, "Parallel compiles (default: one per core)")->check(CLI::NonNegativeNumber);
  sub->add_option("--mem-per-job", args->mem_per_job,
                  "Memory one nvcc compile may need (default 4G; host compiles and links: a quarter). Jobs run\n"
                  "only while their reservations fit in the memory available (MemAvailable) at the start");
  sub->add_option("--cxx-launcher", in.cxx_launcher,
                  "Prefix for C/C++ compile commands, never the link (e.g. ccache, sccache; \"\" for none).\n"
                  "Default: the manifest's cxx_launcher, else $TVMFFI_JIT_CXX_LAUNCHER, else the words before the\n"
                  "compiler in $CXX (CXX=\"ccache g++\"). Not part of the cache key (docs/farm.md)");
  sub->add_option("--cuda-launcher", in.cuda_launcher,
                  "Prefix for nvcc compile commands (e.g. sccache; \"\" for none). Default: the manifest's\n"
                  "cuda_launcher, else $TVMFFI_JIT_CUDA_LAUNCHER");
  sub->add_flag("--json", args->json, "Print one JSON object (path, name, emit, functions, archs, commands, seconds, cache, key)");
  add_build_output_options(*sub, args->outputs);
  sub->add_flag("--validate", args->validate,
                "Check the artifact offline, then load it through the CUDA driver in a child process (docs/driver.md);\n"
                "exit 3 if invalid. Without a driver: offline checks only and a warning");
  sub->add_flag("--require-driver", args->require_driver, "With --validate: no driver or device is exit 4");
  add_driver_load_options(sub, args->driver);
  sub->callback([args, &ctx] { ctx.exit_code = run_build(*args, ctx); });
}

}  // namespace tvmffi_jit::cli
