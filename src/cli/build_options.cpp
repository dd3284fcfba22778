// build's options: each flag bound to its BuildArgs field, with its help, in
// the order `build --help` lists them.
#include "build_options.h"

#include <string>

#include "build_outputs.h"
#include "cli/driver_load.h"
#include "tvmffi_jit/cache/remote/backend.h"
#include "tvmffi_jit/compile/manifest.h"

namespace tvmffi_jit::cli {

namespace {

// What the module is: sources, manifests and the keys the command line sets.
void add_module_options(CLI::App& sub, BuildArgs& args) {
  compile::CommandLineInputs& in = args.inputs;
  sub.add_option("sources", in.sources, "Source files (.c .cc .cpp .cxx .cu .o), added to the manifest's");
  sub.add_option("-m,--manifest", args.manifests,
                  "JSON manifest (keys as tvm_ffi.cpp.build_inline; docs/manifest.md). Repeatable; a directory, a glob\n"
                  "or a {\"modules\": [...]} manifest builds a batch in one job pool (docs/build.md#batch-builds)")
      ->allow_extra_args(false);
  sub.add_flag("-k,--keep-going", args.keep_going, "Batch: build the other modules after one fails (exit status still 1)");
  sub.add_option("--name", in.name, "Module name (default: the manifest's, else the first source's stem)");
  sub.add_option("--function", in.functions, "Export function f (f=doc adds a docstring); repeatable")->allow_extra_args(false);
  sub.add_option("--cflag", in.cflags, "Extra C/C++ compiler flag (--cflag=-DX=1); repeatable")->allow_extra_args(false);
  sub.add_option("--cuda-cflag", in.cuda_cflags, "Extra nvcc flag (--cuda-cflag=--use_fast_math); repeatable")
      ->allow_extra_args(false);
  sub.add_option("--ldflag", in.ldflags, "Extra link flag (--ldflag=-lcuda); repeatable")->allow_extra_args(false);
  sub.add_option("-I,--include", in.include_paths, "Extra include directory; repeatable")->allow_extra_args(false);
  sub.add_option("--isystem", in.system_include_paths,
                  "Extra system include directory (-isystem: no warnings from its headers); repeatable")
      ->allow_extra_args(false);
  sub.add_flag("--cuda-runtime", in.cuda_runtime,
                "C/C++ units see the CUDA toolkit's headers and the module links -lcudart (manifest: cuda_runtime)");
  sub.add_flag("--cuda-driver", in.cuda_driver,
                "C/C++ units see the CUDA toolkit's headers and the module links -lcuda through the toolkit's stub\n"
                "(manifest: cuda_driver)");
  sub.add_option("--arch", in.arch,
                  "CUDA archs: X.Y, X.Ya, X.Yf, optional +PTX, separated by spaces, commas or semicolons; repeatable.\n"
                  "Default: the manifest's cuda_arch, else $TVM_FFI_CUDA_ARCH_LIST, else the visible GPUs")
      ->allow_extra_args(false);
  sub.add_option("--emit", in.emit, "module (default: .so), object (.o), cubin, fatbin or ptx");
  sub.add_option("--backend", in.backend,
                  "GPU sources (.cu, .hip, inline CUDA) compile for: cuda (nvcc) or hip (hipcc). Default: the\n"
                  "manifest's backend, else hip for .hip sources, else $TVM_FFI_GPU_BACKEND, else hip when only hipcc\n"
                  "is installed, else cuda");
  sub.add_option("--compiler", in.compiler, "Device compiler for --emit cubin/ptx: nvcc (default) or nvrtc");
  sub.add_option("--kernel-name", in.kernel_names, "NVRTC name expression to lower (e.g. 'add<float>'); repeatable")
      ->allow_extra_args(false);
  sub.add_option("--embed-cubin", in.embed_cubin,
                  "NAME=FILE: link FILE (.cubin/.fatbin, or a .cu compiled to a cubin) for TVM_FFI_EMBED_CUBIN(NAME)")
      ->allow_extra_args(false);
}

// Where the module is built and cached: build dir, cache root, remote tiers, base dir.
void add_cache_options(CLI::App& sub, BuildArgs& args) {
  sub.add_option("--build-dir", args.build_dir, "Build in DIR, bypassing the cache");
  sub.add_option("--cache-dir", args.cache_dir,
                  "Cache root (default: $TVMFFI_JIT_CACHE_DIR, else $XDG_CACHE_HOME/tvmffi-jit, else ~/.cache/tvmffi-jit)");
  sub.add_flag("--force", args.force, "Rebuild even if the cache has the module (and replace the entry)");
  sub.add_flag("--verify", args.verify,
                "On a cache hit, re-hash the artifact against its recorded SHA-256 whatever its stamp says (a hit "
                "otherwise proves it by its stamp); a mismatch rebuilds");
  sub.add_flag("--no-cache", args.no_cache, "Build in a new temp directory without the cache");
  // Hidden (no group): the Python package's in-process hit path (docs/python.md).
  sub.add_flag("--only-if-cached", args.only_if_cached,
                "Answer from the local cache only: a hit as usual, else {\"cache\": \"miss\"} with --json, building nothing")
      ->group("");
  sub.add_option("--remote", args.remote_urls,
                  "Remote cache (" + cache::remote_scheme_list() + " URL), tried in order after a\nlocal miss; "
                  "repeatable (default: $TVMFFI_JIT_REMOTE, URLs separated by spaces; docs/remote.md)")
      ->allow_extra_args(false);
  sub.add_flag("--remote-read-only", args.remote_read_only,
                "Fetch from the remote caches but never upload (also $TVMFFI_JIT_REMOTE_READ_ONLY=1)");
  sub.add_option("--remote-namespace", args.remote_namespace,
                  "Key prefix on the remote servers (default: $TVMFFI_JIT_REMOTE_NAMESPACE, else tvmffi-jit)");
  sub.add_option("--remote-sign-key", args.remote_sign_key,
                  "Sign uploaded entries with this secret key (NAME.sec from `cache keygen`; default:\n"
                  "$TVMFFI_JIT_REMOTE_SIGN_KEY)");
  sub.add_option("--remote-trusted-key", args.remote_trusted_keys,
                  "Use remote and imported entries only if signed by this public key (NAME.pub); repeatable\n"
                  "(default: $TVMFFI_JIT_REMOTE_TRUSTED_KEYS, files separated by ':'; docs/remote.md)")
      ->allow_extra_args(false);
  sub.add_option("--base-dir", args.base_dir,
                  "Project root for path-independent keys: paths under it are hashed relative to it, so a\n"
                  "checkout elsewhere hits the remote cache (default: $TVMFFI_JIT_BASE_DIR, else the top of the\n"
                  "git/hg work tree holding the manifest, else the manifest's directory)");
}

// The toolchain and the jobs: tvm-ffi, parallelism, memory, split compilation, trace, launchers.
void add_job_options(CLI::App& sub, BuildArgs& args) {
  compile::CommandLineInputs& in = args.inputs;
  sub.add_option("--tvm-ffi-root", args.tvm_ffi_root,
                  "tvm-ffi installation (default: $TVM_FFI_ROOT, tvm-ffi-config, python3 -c 'import tvm_ffi')");
  sub.add_option("-j,--jobs", args.jobs, "Parallel compiles (default: one per core, within the cgroup's CPU quota)")->check(CLI::NonNegativeNumber);
  sub.add_option("--mem-per-job", args.mem_per_job,
                  "Memory one nvcc compile may need, with a unit (1500M, 4G). Default: 4G until an nvcc job has\n"
                  "finished, then 5/4 of the largest seen; host compiles and links: a quarter. Jobs run only while\n"
                  "their reservations fit in the memory available (MemAvailable, within the cgroup's limit)");
  sub.add_option("--split-compile", args.split_compile,
                  "nvcc split compilation: off (default), auto (each nvcc job runs --split-compile=16 --jobserver and\n"
                  "its passes take only the job slots nobody waits for, such as the tail; docs/build.md#split-compilation),\n"
                  "or N threads on every nvcc job");
  sub.add_option("--job-trace", args.job_trace,
                  "Write what each compile/link process did to FILE: module, step, queued/start/end seconds, CPU\n"
                  "seconds, peak RSS. FILE.json: Chrome's trace-event JSON (Perfetto, chrome://tracing), one lane\n"
                  "per job running at once; any other name: JSON lines (docs/build.md#job-trace)");
  sub.add_option("--cxx-launcher", in.cxx_launcher,
                  "Prefix for C/C++ compile commands, never the link (e.g. ccache, sccache; \"\" for none).\n"
                  "Default: the manifest's cxx_launcher, else $TVMFFI_JIT_CXX_LAUNCHER, else the words before the\n"
                  "compiler in $CXX (CXX=\"ccache g++\"). Not part of the cache key (docs/farm.md)");
  sub.add_option("--cuda-launcher", in.cuda_launcher,
                  "Prefix for nvcc compile commands (e.g. sccache; \"\" for none). Default: the manifest's\n"
                  "cuda_launcher, else $TVMFFI_JIT_CUDA_LAUNCHER");
}

// What the command prints and checks afterwards: --json, where the outputs go, validation.
void add_result_options(CLI::App& sub, BuildArgs& args) {
  sub.add_flag("--json", args.json, "Print one JSON object (path, name, emit, functions, archs, commands, seconds, cache, key)");
  add_build_output_options(sub, args.outputs);
  sub.add_flag("--validate", args.validate,
                "Check the artifact offline, then load it through the CUDA driver in a child process (docs/driver.md);\n"
                "exit 3 if invalid. Without a driver: offline checks only and a warning");
  sub.add_flag("--require-driver", args.require_driver, "With --validate: no driver or device is exit 4");
  add_driver_load_options(&sub, args.driver);
}

}  // namespace

void add_build_options(CLI::App& sub, BuildArgs& args) {
  add_module_options(sub, args);
  add_cache_options(sub, args);
  add_job_options(sub, args);
  add_result_options(sub, args);
}

}  // namespace tvmffi_jit::cli
