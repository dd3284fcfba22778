// tvmffi-jit build [SOURCES...] [-m FILE] [--name N] [--function f[=doc]] ...
//
// The orchestrator: manifest (+ command line) -> toolchain -> plan -> build
// into a directory -> print the artifact path. Every check that can fail
// without a compiler happens before the build directory is created, so a bad
// manifest (exit 2) or a missing toolchain (exit 4) writes nothing.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/driver_load.h"
#include "build_outputs.h"
#include "tvmffi_jit/cache/remote.h"
#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/compile/cached_build.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/driver/devices.h"
#include "tvmffi_jit/toolchain/compilers.h"
#include "tvmffi_jit/toolchain/cuda_arch.h"
#include "tvmffi_jit/toolchain/toolchain.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {

struct BuildArgs {
  std::string manifest;
  compile::CommandLineInputs inputs;
  BuildOutputOptions outputs;  // --output, --link-to, --depfile, --compile-commands
  std::string build_dir;
  std::string cache_dir;  // --cache-dir (cache on unless --build-dir or --no-cache)
  bool force = false;
  bool no_cache = false;
  std::string base_dir;                  // --base-dir
  std::vector<std::string> remote_urls;  // --remote (repeatable)
  bool remote_read_only = false;         // --remote-read-only
  std::string remote_namespace;          // --remote-namespace
  std::string tvm_ffi_root;
  int jobs = 0;
  bool json = false;
  int verbosity = 0;
  bool quiet = false;
  bool validate = false;        // --validate: check the artifact offline and through the driver
  bool require_driver = false;  // --require-driver: no driver is exit 4 instead of a warning
  DriverLoadOptions driver;     // --device, --timeout
};

bool uses_cache(const BuildArgs& args) { return args.build_dir.empty() && !args.no_cache; }

// The directory paths are made relative to in portable keys (docs/remote.md):
// --base-dir, else $TVMFFI_JIT_BASE_DIR, else the manifest's directory, else
// the current directory.
std::string key_base_dir(const BuildArgs& args, const compile::Manifest& m) {
  if (!args.base_dir.empty()) return util::absolute_path(args.base_dir);
  if (const char* v = std::getenv("TVMFFI_JIT_BASE_DIR"); v && *v) return util::absolute_path(v);
  return m.manifest_path.empty() ? util::current_directory() : util::parent_path(m.manifest_path);
}

cache::RemoteOptions remote_options(const BuildArgs& args) {
  cache::RemoteOptions cl;
  cl.urls = args.remote_urls;
  if (!args.remote_namespace.empty()) cl.key_namespace = args.remote_namespace;
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
    tc.host = toolchain::find_host_compilers(env, need_c);
  }
  if (m.needs_cuda()) tc.cuda = toolchain::find_cuda_toolkit(env, &tc.cuda_missing_reason);
  toolchain::TvmFfiSearch search;
  if (!args.tvm_ffi_root.empty()) search.root = args.tvm_ffi_root;
  if (host_build) {
    tc.tvm_ffi = uses_cache(args) ? compile::find_tvm_ffi_memoized(search, args.cache_dir) : toolchain::find_tvm_ffi(search);
  } else {
    // Kernel-only builds add tvm-ffi's include directories when it is there.
    try {
      tc.tvm_ffi = uses_cache(args) ? compile::find_tvm_ffi_memoized(search, args.cache_dir) : toolchain::find_tvm_ffi(search);
    } catch (const Error& e) {
      tc.tvm_ffi_missing_reason = e.what();
    }
  }
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
  j["seconds"] = r.seconds;
  return j;
}

void write_stdout(const std::string& s) {
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size() || std::fflush(stdout) != 0)
    throw io_error("cannot write to stdout");
}

int run_build(const BuildArgs& args, CommandContext& ctx) {
  // 1. What to build: the manifest, extended by the command line; fully
  //    validated (exit 2) before anything else happens.
  compile::Manifest manifest = args.manifest.empty() ? compile::Manifest{} : compile::load_manifest(args.manifest);
  compile::apply_command_line(manifest, args.inputs);
  const cache::RemoteOptions remote = uses_cache(args) ? remote_options(args) : cache::RemoteOptions{};

  // 2. With what, and how: toolchain (exit 4 when missing) and the plan.
  toolchain::Toolchain tc = find_toolchain(manifest, args);
  compile::PlanOptions plan_options;
  if (const char* v = std::getenv("TVM_FFI_CUDA_ARCH_LIST")) plan_options.env_arch_list = std::string(v);
  plan_options.detect_gpus = detect_gpus;
  compile::BuildPlan plan = compile::make_plan(manifest, tc, plan_options);

  compile::ExecuteOptions exec;
  exec.jobs = args.jobs;
  exec.verbose = ctx.global.verbosity > 0;
  exec.quiet = ctx.global.quiet;

  // 3a. Cached (the default): docs/cache.md.
  if (uses_cache(args)) {
    compile::CachedBuildOptions co;
    co.cache_dir = args.cache_dir;
    co.force = args.force;
    co.exec = exec;
    co.base_dir = key_base_dir(args, manifest);
    co.remote = remote;
    compile::CachedBuildResult cr = compile::cached_build(plan, manifest, tc, co);
    nlohmann::json validation;
    int validated = args.validate ? validate_build_output(cr.build.artifact_path, args.driver, args.require_driver,
                                                          args.json ? &validation : nullptr)
                                  : 0;
    const std::string shown =
        validated == 0 ? write_build_outputs(args.outputs, manifest, plan, cr.build, cr.entry_dir) : cr.build.artifact_path;
    if (args.json) {
      nlohmann::json j = result_json(plan, cr.build);
      if (!args.outputs.output.empty()) j["output"] = shown;
      j["cache"] = cr.cache;
      j["key"] = cr.key;
      j["entry_dir"] = cr.entry_dir.empty() ? nlohmann::json() : nlohmann::json(cr.entry_dir);
      if (cr.cache == "miss") j["miss_reason"] = cr.miss_reason;
      if (cr.cache == "remote-hit") j["remote"] = cr.remote_source;
      j["objects_reused"] = cr.objects_reused;
      j["objects_compiled"] = cr.objects_compiled;
      if (args.validate) j["validation"] = validation;
      write_stdout(j.dump(2) + "\n");
    } else {
      write_stdout(shown + "\n");
    }
    return validated;
  }

  // 3b. Where: --build-dir as given, else a fresh directory under the system
  //    temp dir that outlives this process (the artifact is in it).
  std::string build_dir = args.build_dir;
  if (build_dir.empty()) {
    util::TempDir temp(util::temp_root(), "tvmffi-jit-" + plan.name + "-");
    temp.keep();
    build_dir = temp.path();
  }

  // 4. Build into that directory.
  if (exec.verbose) spdlog::info("building {} in {}", plan.name, build_dir);
  compile::BuildResult result = compile::execute_plan(plan, build_dir, exec);
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
    write_stdout(j.dump(2) + "\n");
  } else {
    write_stdout(shown + "\n");
  }
  return validated;
}

}  // namespace

void register_build_command(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<BuildArgs>();
  CLI::App* sub = app.add_subcommand(
      "build", "Build C++/CUDA sources (files, inline code in a JSON manifest, or both) into a TVM FFI module\n"
               "(.so), a relocatable object, or a cubin/fatbin/PTX; prints the artifact's absolute path.");
  compile::CommandLineInputs& in = args->inputs;
  sub->add_option("sources", in.sources, "Source files (.c .cc .cpp .cxx .cu .o), added to the manifest's");
  sub->add_option("-m,--manifest", args->manifest, "JSON manifest (keys as tvm_ffi.cpp.build_inline; docs/manifest.md)");
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
  sub->add_flag("--no-cache", args->no_cache, "Build in a new temp directory without the cache");
  sub->add_option("--remote", args->remote_urls,
                  "Remote cache (http://, https:// or redis:// URL), tried in order after a local miss;\n"
                  "repeatable (default: $TVMFFI_JIT_REMOTE, URLs separated by spaces; docs/remote.md)")
      ->allow_extra_args(false);
  sub->add_flag("--remote-read-only", args->remote_read_only,
                "Fetch from the remote caches but never upload (also $TVMFFI_JIT_REMOTE_READ_ONLY=1)");
  sub->add_option("--remote-namespace", args->remote_namespace,
                  "Key prefix on the remote servers (default: $TVMFFI_JIT_REMOTE_NAMESPACE, else tvmffi-jit)");
  sub->add_option("--base-dir", args->base_dir,
                  "Project root for path-independent keys: paths under it are hashed relative to it, so a\n"
                  "checkout elsewhere hits the remote cache (default: $TVMFFI_JIT_BASE_DIR, else the manifest's\n"
                  "directory, else the current directory)");
  sub->add_option("--tvm-ffi-root", args->tvm_ffi_root,
                  "tvm-ffi installation (default: $TVM_FFI_ROOT, tvm-ffi-config, python3 -c 'import tvm_ffi')");
  sub->add_option("-j,--jobs", args->jobs, "Parallel compiles (default: one per core)")->check(CLI::NonNegativeNumber);
  sub->add_flag("--json", args->json, "Print one JSON object (path, name, emit, functions, archs, commands, seconds, cache, key)");
  sub->add_flag("-v,--verbose", args->verbosity, "Show every command (also accepted before the subcommand)");
  sub->add_flag("-q,--quiet", args->quiet, "Only errors on stderr");
  add_build_output_options(*sub, args->outputs);
  sub->add_flag("--validate", args->validate,
                "Check the artifact offline, then load it through the CUDA driver in a child process (docs/driver.md);\n"
                "exit 3 if invalid. Without a driver: offline checks only and a warning");
  sub->add_flag("--require-driver", args->require_driver, "With --validate: no driver or device is exit 4");
  add_driver_load_options(sub, args->driver);
  sub->callback([args, &ctx] {
    if (args->verbosity || args->quiet) {
      ctx.global.verbosity += args->verbosity;
      ctx.global.quiet = ctx.global.quiet || args->quiet;
      util::init_logging(ctx.global.verbosity, ctx.global.quiet);
    }
    ctx.exit_code = run_build(*args, ctx);
  });
}

}  // namespace tvmffi_jit::cli
