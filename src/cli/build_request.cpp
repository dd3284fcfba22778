#include "build_request.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <limits>
#include <thread>

#include "tvmffi_jit/cache/root.h"
#include "tvmffi_jit/cache/remote/url.h"
#include "tvmffi_jit/cli/commands.h"
#include "tvmffi_jit/cli/environment.h"
#include "tvmffi_jit/compile/executor.h"
#include "tvmffi_jit/util/error.h"
#include "tvmffi_jit/util/fs.h"
#include "tvmffi_jit/util/job_gate.h"
#include "tvmffi_jit/util/log.h"
#include "tvmffi_jit/util/strings.h"

namespace tvmffi_jit::cli {

namespace {

// A size on the command line needs its unit: `--mem-per-job 4096` read as
// 4096 bytes surprised whoever meant MiB (as `cache gc --max-size` already says).
// The one unit suggested is the one that makes the number a plausible
// memory size for a compile: 4096 -> 4096M, 4 -> 4G.
uint64_t parse_size_with_unit(const std::string& flag, const std::string& text) {
  const std::string t(util::trim(text));
  if (!t.empty() && std::isdigit(static_cast<unsigned char>(t.back()))) {
    const bool small = t.size() <= 2 && t.find_first_not_of("0123456789") == std::string::npos;  // < 100
    throw usage_error(flag + " " + text + ": a size needs a unit; write " + t + (small ? "G" : "M") +
                      " (units: K, M, G, T; B for bytes)");
  }
  auto bytes = util::parse_size(t);
  if (!bytes || *bytes == 0) throw usage_error(flag + " " + text + ": expected a size such as 4G, 1500M or 8GiB");
  return *bytes;
}

std::string current_directory_or_none() {
  char buf[PATH_MAX];
  return ::getcwd(buf, sizeof buf) ? std::string(buf) : std::string();
}

// The default base dir (docs/remote.md, "Path-independent keys"): the top of
// the version-control work tree holding `dir` (the nearest folder upwards
// with a .git -- a directory, or the file of a worktree or submodule -- or a
// .hg), so a manifest that reaches "../include" still shares between two
// checkouts; else `dir` itself. The filesystem root is never a base.
std::string default_base_dir(const std::string& dir) {
  for (std::string d = dir; !d.empty() && d != "/"; d = util::parent_path(d)) {
    if (util::path_exists(util::join_path(d, ".git")) || util::is_directory(util::join_path(d, ".hg"))) return d;
    if (util::parent_path(d) == d) break;
  }
  return dir;
}

cache::RemoteOptions remote_options(const BuildArgs& args, const toolchain::EnvLookup& env) {
  cache::RemoteOptions cl;
  cl.urls = args.remote_urls;
  if (!args.remote_namespace.empty()) cl.key_namespace = args.remote_namespace;
  cl.sign_key_file = args.remote_sign_key;
  cl.trusted_key_files = args.remote_trusted_keys;
  cache::RemoteOptions o = remote_options_from_environment(cl, args.remote_read_only, env);
  o.servers = cache::parse_remote_urls(o.urls);
  if (!o.key_namespace.empty() && !cache::is_valid_entry_name(o.key_namespace))
    throw usage_error("remote namespace '" + o.key_namespace +
                      "': use letters, digits, '.', '_' and '-' (it becomes part of a URL path and a Redis key)");
  return o;
}

// Options about one module's artifact: refused for a batch, naming each one given.
void refuse_single_module_options(const BuildArgs& args) {
  std::vector<std::string> given;
  if (!args.outputs.output.empty()) given.push_back("--output");
  if (!args.outputs.link_to.empty()) given.push_back("--link-to");
  if (!args.outputs.depfile.empty()) given.push_back("--depfile");
  if (!args.outputs.compile_commands.empty()) given.push_back("--compile-commands");
  if (!given.empty())
    throw usage_error(util::join(given, ", ") + ": about one module's artifact; a batch prints every artifact path "
                      "instead (build a module alone for these, or use --json for the paths)");
  if (!args.inputs.sources.empty())
    throw usage_error("source files on the command line build one module; a batch (several -m, a directory, a glob "
                      "or a modules manifest) takes each module's sources from its manifest");
  if (args.inputs.name) throw usage_error("--name names one module; in a batch each manifest names its own");
}

}  // namespace

cache::RemoteOptions remote_options_from_environment(cache::RemoteOptions o, bool command_line_read_only,
                                                     const toolchain::EnvLookup& env) {
  if (o.urls.empty()) {
    if (auto v = env("TVMFFI_JIT_REMOTE")) {
      for (const auto& part : util::split_any(*v, " \t\n"))
        if (!part.empty()) o.urls.push_back(part);
    }
  }
  o.read_only = command_line_read_only || toolchain::env_flag(env, "TVMFFI_JIT_REMOTE_READ_ONLY");
  if (auto ns = env("TVMFFI_JIT_REMOTE_NAMESPACE"); ns && o.key_namespace == "tvmffi-jit") o.key_namespace = *ns;
  o.first_byte_timeout_ms = static_cast<int>(
      toolchain::env_duration_ms(env, "TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT", o.first_byte_timeout_ms));
  o.transfer_timeout_ms =
      static_cast<int>(toolchain::env_duration_ms(env, "TVMFFI_JIT_REMOTE_TIMEOUT", o.transfer_timeout_ms));
  o.max_blob_bytes = toolchain::env_size(env, "TVMFFI_JIT_REMOTE_MAX_BLOB", o.max_blob_bytes);
  // Twice the blob limit unless set: one stale result of the largest size
  // does not keep a lookup from the hit listed after it.
  constexpr uint64_t kMost = std::numeric_limits<uint64_t>::max();
  const uint64_t twice_blob = o.max_blob_bytes > kMost / 2 ? kMost : 2 * o.max_blob_bytes;
  o.max_lookup_bytes = toolchain::env_size(env, "TVMFFI_JIT_REMOTE_MAX_LOOKUP", twice_blob);
  if (auto lib = env("TVMFFI_JIT_LIBCURL"); lib && !lib->empty()) o.libcurl = *lib;
  // AWS's variables, read only when an S3 remote will use them (and checked
  // by cache::finish_remote_options).
  if (std::any_of(o.urls.begin(), o.urls.end(), cache::is_s3_url)) {
    auto var = [&env](const char* name) -> std::string { return env(name).value_or(""); };
    o.s3.endpoint_url = var("AWS_ENDPOINT_URL");
    if (std::string r = var("AWS_REGION"); !r.empty()) o.s3.region = r;
    else if (std::string d = var("AWS_DEFAULT_REGION"); !d.empty()) o.s3.region = d;
    o.s3.access_key_id = var("AWS_ACCESS_KEY_ID");
    o.s3.secret_access_key = var("AWS_SECRET_ACCESS_KEY");
    o.s3.session_token = var("AWS_SESSION_TOKEN");
  }
  if (o.sign_key_file.empty()) {
    if (auto v = env("TVMFFI_JIT_REMOTE_SIGN_KEY")) o.sign_key_file = *v;
  }
  if (o.trusted_key_files.empty()) {
    if (auto v = env("TVMFFI_JIT_REMOTE_TRUSTED_KEYS")) {
      for (const auto& part : util::split_any(*v, ":"))
        if (!part.empty()) o.trusted_key_files.push_back(part);
      // Fail closed: a set but empty list ("", ":") is a mistake (an unset
      // CI secret), never "trust everything".
      if (o.trusted_key_files.empty())
        throw usage_error("TVMFFI_JIT_REMOTE_TRUSTED_KEYS is set but names no key file (" + quote_for_message(*v) +
                          "); give the public key files separated by ':', or unset it to use entries without "
                          "signature checks");
    }
  }
  cache::finish_remote_options(o);
  return o;
}

MachineResources read_machine_resources(const std::string& cgroup_root) {
  MachineResources m;
  m.cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  m.mem_available = util::available_memory_bytes();
  m.cgroup = util::read_cgroup_limits(cgroup_root);
  return m;
}

// --split-compile: "off" 0, "auto" the scheduler's choice, N > 1
// a fixed --split-compile=N on every nvcc unit (nvcc's 0, every core, is
// not offered: the job gate hands out the cores).
// What an unset --split-compile means: "off" until the kernels whose machine
// code split compilation changes are timed on a GPU. nvcc's split passes emit
// byte-identical code for FlashInfer's MoE, sampling and decode units, but not
// for its top-k and batch prefill units (bench/split_sass/compare.py;
// bench/split_sass/time_kernels.py times those two; docs/build.md#split-compilation).
// "auto" is in every nvcc unit's key: flipping this line makes the first build
// after it compile each nvcc unit once more.
static constexpr const char* kDefaultSplitCompile = "off";

static int parse_split_compile(const std::string& text) {
  if (text.empty()) return parse_split_compile(kDefaultSplitCompile);
  if (text == "off") return 0;
  if (text == "auto") return compile::kSplitCompileAuto;
  auto n = util::parse_size(text);
  if (n && *n >= 2 && *n <= 256 && text.find_first_not_of("0123456789") == std::string::npos) return static_cast<int>(*n);
  throw usage_error("--split-compile " + quote_for_message(text) + ": expected off, auto or a number of threads from 2 to 256");
}

JobLimits resolve_job_limits(int jobs, const std::string& mem_per_job, const MachineResources& machine) {
  JobLimits l;
  if (jobs < 0) throw usage_error("-j " + std::to_string(jobs) + ": expected 0 (one per core) or more");
  const int cpu_slots = util::cgroup_cpu_slots(machine.cgroup, machine.cores);
  l.slots = jobs > 0 ? jobs : cpu_slots;
  l.why = jobs > 0 ? "-j " + std::to_string(jobs)
                   : std::to_string(cpu_slots) + " slots (" + std::to_string(machine.cores) + " cores" +
                         (machine.cgroup.cpus ? ", cgroup " + machine.cgroup.cpu_source : std::string()) + ")";
  uint64_t budget = machine.mem_available.value_or(0);
  std::string memory_why = machine.mem_available ? "MemAvailable" : "no MemAvailable";
  if (machine.cgroup.memory_bytes) {
    // What the cgroup still has room for: its limit less what it holds now.
    const uint64_t limit = *machine.cgroup.memory_bytes;
    const uint64_t used = std::min(limit, machine.cgroup.memory_usage.value_or(0));
    const uint64_t room = std::max<uint64_t>(limit - used, 1);
    if (budget == 0 || room < budget) {
      budget = room;
      memory_why = "cgroup " + machine.cgroup.memory_source;
    }
  }
  l.memory_bytes = budget;
  l.why += ", memory " + (budget ? util::format_bytes(budget) : std::string("unlimited")) + " (" + memory_why + ")";
  l.cuda_job_bytes = compile::kDefaultCudaJobBytes;
  if (!mem_per_job.empty()) {
    l.cuda_job_bytes = parse_size_with_unit("--mem-per-job", mem_per_job);
    l.learn_job_bytes = false;
  }
  return l;
}

BuildRequest resolve_build_request(const BuildArgs& args, const toolchain::EnvLookup& env,
                                   const MachineResources& machine) {
  BuildRequest r;
  r.env = env;
  // Options first: a mistake in them is reported before any manifest is read.
  r.limits = resolve_job_limits(args.jobs, args.mem_per_job, machine);
  r.use_cache = args.build_dir.empty() && !args.no_cache;
  r.force = args.force;
  r.verify = args.verify;
  r.build_dir = args.build_dir;
  if (r.use_cache) r.remote = remote_options(args, env);
  r.plan.env_arch_list = env("TVM_FFI_CUDA_ARCH_LIST");
  r.plan.env_cxx_launcher = env("TVMFFI_JIT_CXX_LAUNCHER");
  r.plan.env_cuda_launcher = env("TVMFFI_JIT_CUDA_LAUNCHER");
  r.plan.env_gpu_backend = env("TVM_FFI_GPU_BACKEND");
  r.plan.env_rocm_arch_list = env("TVM_FFI_ROCM_ARCH_LIST");
  r.plan.split_compile = parse_split_compile(args.split_compile);
  r.plan.working_directory = current_directory_or_none();
  if (!args.tvm_ffi_root.empty()) r.tvm_ffi.root = args.tvm_ffi_root;
  r.tvm_ffi.env = env;
  r.keep_going = args.keep_going;
  r.json = args.json;
  r.validate = args.validate;
  r.require_driver = args.require_driver;
  r.driver = args.driver;
  if (r.validate) r.validate_options = to_validate_options(args.driver, env);
  r.libcuda = libcuda_library(env);
  r.outputs = args.outputs;
  r.job_trace = args.job_trace;

  // What to build: the manifest(s), each extended by the command line.
  std::vector<compile::BatchInput> inputs;
  if (!args.manifests.empty()) {
    compile::ExpandedManifests expanded = compile::expand_manifest_arguments(args.manifests, args.keep_going);
    r.batch = expanded.batch;
    inputs = std::move(expanded.modules);
  } else {
    inputs.emplace_back();  // sources on the command line only
  }
  if (r.batch) refuse_single_module_options(args);
  r.only_if_cached = args.only_if_cached;
  if (r.only_if_cached && (!r.use_cache || !r.json))
    throw usage_error("--only-if-cached answers from the cache with --json; it takes neither --build-dir nor --no-cache");
  if (r.only_if_cached && r.batch) throw usage_error("--only-if-cached answers for one module; build a batch without it");

  std::string base_override;
  if (!args.base_dir.empty()) base_override = util::absolute_path(args.base_dir);
  else if (auto v = toolchain::non_empty(env, "TVMFFI_JIT_BASE_DIR")) base_override = util::absolute_path(*v);
  const std::string cwd = base_override.empty() ? r.plan.working_directory : "";
  for (auto& in : inputs) {
    ModuleRequest m;
    m.origin = in.origin;
    m.error = in.error;
    m.manifest = std::move(in.manifest);
    if (m.error.empty()) compile::apply_command_line(m.manifest, args.inputs);
    if (!base_override.empty()) m.base_dir = base_override;
    else if (!m.manifest.manifest_path.empty()) m.base_dir = default_base_dir(util::parent_path(m.manifest.manifest_path));
    else m.base_dir = cwd.empty() ? cwd : default_base_dir(cwd);
    r.modules.push_back(std::move(m));
  }
  // The cache root last: a usage error (exit 2) is reported before a root
  // that cannot be used (exit 5), as when the build opened the root itself.
  if (r.use_cache) {
    const cache::RootEnvironment root_env = cache_root_environment(env);
    r.cache_dir = cache_root_to_open(args.cache_dir, root_env);
    try {
      r.user_toolchain_memo_dir = cache::user_toolchain_memo_dir(root_env);
    } catch (const Error& e) {
      spdlog::debug("no per-user toolchain memo: {}", e.what());  // a memo only: the build goes on without it
    }
  }
  r.pch_dir = precompiled_header_dir(env);  // every kind of build (--build-dir and --no-cache too)
  return r;
}

}  // namespace tvmffi_jit::cli
