// One build request: the command line, the environment, the manifest(s) and
// the defaults of `tvmffi-jit build`, resolved once (ARCHITECTURE.md, "The
// build request"). A single build is a batch of one module: everything below
// applies to every module the same way, and what only makes sense for one
// module (-o, --depfile, ...) is refused for a batch here, before anything
// runs. The environment is read here, through the EnvLookup given, and
// nowhere below: the layers get values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "build_outputs.h"
#include "cli/driver_load.h"
#include "tvmffi_jit/cache/remote/options.h"
#include "tvmffi_jit/compile/manifest_expand.h"
#include "tvmffi_jit/compile/manifest.h"
#include "tvmffi_jit/compile/plan.h"
#include "tvmffi_jit/toolchain/environment.h"
#include "tvmffi_jit/toolchain/tvm_ffi.h"
#include "tvmffi_jit/util/cgroup.h"

namespace tvmffi_jit::cli {

// The command line of `build`, as CLI11 fills it.
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
  std::string job_trace;    // --job-trace FILE
  std::string split_compile;  // --split-compile off|auto|N (nvcc)
  bool json = false;
  bool validate = false;        // --validate: check the artifact offline and through the driver
  bool require_driver = false;  // --require-driver: no driver is exit 4 instead of a warning
  DriverLoadOptions driver;     // --device, --timeout
};

// One module to build.
struct ModuleRequest {
  std::string origin;  // "a.json", "mods.json#/modules/3"; "" for sources given on the command line
  compile::Manifest manifest;  // the command line applied
  // The directory paths are hashed relative to in portable keys
  // (docs/remote.md): --base-dir, else $TVMFFI_JIT_BASE_DIR, else the
  // manifest's directory, else the current directory; empty when the
  // current directory is gone (every path absolute).
  std::string base_dir;
  std::string error;  // --keep-going: the manifest could not be read or checked (exit 2)
};

// What the job gate gets: -j, the memory budget and one nvcc job's reservation.
struct JobLimits {
  int slots = 1;
  uint64_t memory_bytes = 0;    // 0: unlimited
  uint64_t cuda_job_bytes = 0;  // --mem-per-job, else the default
  bool learn_job_bytes = true;  // no --mem-per-job: learn from finished jobs (util::JobMemoryEstimate)
  std::string why;              // where slots and memory came from, for the debug log
};

// What the machine offers, read by the caller (the real one in cmd_build,
// fixed values in unit tests).
struct MachineResources {
  int cores = 1;
  std::optional<uint64_t> mem_available;  // /proc/meminfo MemAvailable
  util::CgroupLimits cgroup;
};

// The machine's resources: the cores, MemAvailable and the cgroup limits
// under `cgroup_root` ("/" unless $TVMFFI_JIT_CGROUP_ROOT says otherwise).
MachineResources read_machine_resources(const std::string& cgroup_root);

// -j (0: the cores, within the cgroup's cpu quota), the memory budget
// (MemAvailable, within the cgroup's memory limit less what it uses) and
// --mem-per-job (a size with a unit: exit 2 otherwise).
JobLimits resolve_job_limits(int jobs, const std::string& mem_per_job, const MachineResources& machine);

struct BuildRequest {
  std::vector<ModuleRequest> modules;
  bool batch = false;  // several modules, or an argument naming many: one line per module on stdout

  bool use_cache = true;  // not --build-dir, not --no-cache
  bool only_if_cached = false;  // the engine library's in-process path (docs/python.md)
  std::string cache_dir;  // the cache root (use_cache): --cache-dir, TVMFFI_JIT_CACHE_DIR, XDG_CACHE_HOME, HOME
  std::string user_toolchain_memo_dir;  // cache::user_toolchain_memo_dir(); "" when no home directory is known
  // Where GCC precompiled headers live (compile/precompiled_headers.h):
  // $TVMFFI_JIT_PCH_DIR ("off" or empty: none), else <user toolchain memo dir>/pch.
  std::string pch_dir;
  bool force = false;
  bool verify = false;
  std::string build_dir;  // --build-dir (a batch builds each module in DIR/NAME)
  cache::RemoteOptions remote;
  compile::PlanOptions plan;  // environment parts; detect_gpus is set by the caller
  toolchain::TvmFfiSearch tvm_ffi;
  toolchain::EnvLookup env;  // for the toolchain finders (CXX, CUDA_HOME, PATH, ...)
  JobLimits limits;

  bool keep_going = false;
  bool json = false;
  bool validate = false;
  bool require_driver = false;
  DriverLoadOptions driver;
  driver::ValidateOptions validate_options;  // --validate: --device, --timeout and the environment's parts
  std::string libcuda;                       // the driver library for arch detection (TVMFFI_JIT_LIBCUDA)
  BuildOutputOptions outputs;  // one module only
  std::string job_trace;       // --job-trace FILE
};

// $TVMFFI_JIT_REMOTE (URLs separated by spaces), $TVMFFI_JIT_REMOTE_READ_ONLY
// (a boolean: toolchain::env_flag), $TVMFFI_JIT_REMOTE_NAMESPACE,
// $TVMFFI_JIT_REMOTE_FIRST_BYTE_TIMEOUT and $TVMFFI_JIT_REMOTE_TIMEOUT
// (durations), $TVMFFI_JIT_REMOTE_MAX_BLOB and $TVMFFI_JIT_REMOTE_MAX_LOOKUP
// (sizes; the second defaults to twice the first),
// $TVMFFI_JIT_REMOTE_SIGN_KEY and $TVMFFI_JIT_REMOTE_TRUSTED_KEYS (files
// separated by ':', as PATH) under the command line's values: urls, a sign
// key or trusted keys given on the command line replace the variable's. A
// malformed value is usage_error (exit 2) naming the variable.
// $TVMFFI_JIT_LIBCURL names the libcurl to load for http(s) and s3 remotes;
// the AWS variables fill S3Settings. Then cache::finish_remote_options()
// checks the S3 settings when an s3:// URL is among the urls (a malformed
// $AWS_ENDPOINT_URL or $AWS_REGION is usage_error, exit 2) and loads the key
// files. `env` is the CLI's one reader of the environment (ARCHITECTURE.md).
cache::RemoteOptions remote_options_from_environment(cache::RemoteOptions command_line, bool command_line_read_only,
                                                     const toolchain::EnvLookup& env);

// Resolves everything but the toolchain and the plans. Throws Error(kUsage)
// (exit 2) for a bad or unreadable manifest (unless keep_going keeps it as a
// failed module), an option a batch cannot honour, a size without a unit, a
// bad remote URL or namespace.
BuildRequest resolve_build_request(const BuildArgs& args, const toolchain::EnvLookup& env,
                                   const MachineResources& machine);

}  // namespace tvmffi_jit::cli
