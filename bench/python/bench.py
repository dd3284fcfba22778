#!/usr/bin/env python3
"""tvmffi_jit.load_inline against tvm_ffi.cpp.load_inline, in fresh Python
processes (docs/benchmarks.md, section "python").

Each measurement is the wall time of a whole `python3 SCRIPT` process that
imports the package and calls the function once, as a program or a test that
JIT-builds its kernels at start does: Python start-up and imports included.

1. hit: the module is already built (tvm_ffi: its build directory exists and
   ninja is up to date; tvmffi_jit: a cache hit). load_inline and build_inline.
   Target: tvmffi_jit >= 50x faster. Anchors measured in the same run: the
   start-up floors `python3 -c pass`, `import tvmffi_jit` and `import tvm_ffi`
   (load_inline needs tvm_ffi to load the module, whoever built it).
   Also a CUDA-only module (load_inline hit), when nvcc is there (--no-cuda skips).
2. cold: an empty cache root for each run, the same source compiled and linked.
3. the repeated call of a program that passes build_directory.
4. in one process (a long-running program): the median of 40 repeated hits of
   build_inline and load_inline; tvmffi_jit's answered in-process by
   libtvmffi_jit_engine.so, and (row "binary") with TVMFFI_JIT_IN_PROCESS=0,
   a tvmffi-jit process per call as before the engine.

Wall time is what a user waits; CPU time (user+sys of the process and its
children) is what stays comparable when other work shares the machine.

Usage: bench.py TOOL [--runs N] [--cold-runs N] [--work DIR]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[2]

# tvm_ffi.cpp's documented example (the load_inline docstring).
SOURCE = r'''
void add_one_cpu(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  TVM_FFI_ICHECK(x.ndim() == 1) << "x must be a 1D tensor";
  DLDataType f32_dtype{kDLFloat, 32, 1};
  TVM_FFI_ICHECK(x.dtype() == f32_dtype) << "x must be a float tensor";
  TVM_FFI_ICHECK(y.ndim() == 1) << "y must be a 1D tensor";
  TVM_FFI_ICHECK(y.dtype() == f32_dtype) << "y must be a float tensor";
  TVM_FFI_ICHECK(x.size(0) == y.size(0)) << "x and y must have the same shape";
  for (int i = 0; i < x.size(0); ++i) {
    static_cast<float*>(y.data_ptr())[i] = static_cast<float*>(x.data_ptr())[i] + 1;
  }
}
'''

# A CUDA-only module (tvm_ffi's test_load_inline_cuda, shortened): the kernel
# and its launcher in one .cu unit.
CUDA_SOURCE = r'''
__global__ void AddOneKernel(float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1;
}
void add_one_cuda(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  int64_t n = x.size(0);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  AddOneKernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<float*>(x.data_ptr()), static_cast<float*>(y.data_ptr()), n);
}
'''

# Repeated calls inside one process (a long-running program): per-call wall
# and CPU (the process's and its children's), median over the calls.
IN_PROCESS = """import resource, statistics, sys, time
import {module} as jit
def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
jit.{function}("bench_add_one", cpp_sources={source!r}, functions=["add_one_cpu"])
walls, cpus = [], []
for _ in range({runs}):
    w, c = time.perf_counter(), cpu()
    jit.{function}("bench_add_one", cpp_sources={source!r}, functions=["add_one_cpu"])
    walls.append(time.perf_counter() - w)
    cpus.append(cpu() - c)
print(statistics.median(walls) * 1000, statistics.median(cpus) * 1000)
"""

# A generated source file, written (same content) before each build, as code
# generators and `pip install -e` refreshes do: tvm_ffi's ninja goes by mtime,
# tvmffi-jit's cache by content.
GENERATED_FILE = """import pathlib
import {module} as jit
src = pathlib.Path({path!r})
src.write_text({source!r})
r = jit.build("bench_generated", sources=[str(src)])
assert r.endswith("bench_generated.so")
"""
FILE_SOURCE = ("#include <tvm/ffi/function.h>\n#include <tvm/ffi/container/tensor.h>\n" + SOURCE
               + "TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_one_cpu, add_one_cpu);\n")

SCRIPT = """import {module} as jit
r = jit.{function}("{name}", {kind}={source!r}, functions=["{exported}"]{extra})
{check}
"""
CHECKS = {
    "load_inline": "assert r.get_function('{exported}') is not None",
    "build_inline": "assert r.endswith('{name}.so')",
}
# The repeated call of a program that passes build_directory: tvm_ffi's ninja
# finds the directory up to date; tvmffi-jit's --build-dir rebuilds (no cache).
BUILD_DIR_CASE = "load_inline, build_directory"
MODULES = {"tvmffi_jit": "tvmffi_jit", "tvm_ffi.cpp": "tvm_ffi.cpp"}


def timed(argv, env):
    """(wall seconds, CPU seconds: user+sys of the process and the children it waited for)."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    err = p.stderr.read()
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{err}")
    return dt, ru.ru_utime + ru.ru_stime


def wall(argv, env):
    return timed(argv, env)[0]


def median_ms(argv, env, runs):
    """(median wall ms, median CPU ms) over `runs` processes, after one uncounted warm-up."""
    timed(argv, env)
    samples = [timed(argv, env) for _ in range(runs)]
    return (statistics.median(s[0] for s in samples) * 1000, statistics.median(s[1] for s in samples) * 1000)


def script(work, package, function, build_directory=None, cuda=False):
    tag = ("_build_dir" if build_directory else "") + ("_cuda" if cuda else "")
    path = work / f"{package.replace('.', '_')}_{function}{tag}.py"
    extra = f", build_directory={str(build_directory)!r}" if build_directory else ""
    name, exported = ("bench_cuda", "add_one_cuda") if cuda else ("bench_add_one", "add_one_cpu")
    path.write_text(SCRIPT.format(module=MODULES[package], function=function, name=name,
                                  kind="cuda_sources" if cuda else "cpp_sources",
                                  source=CUDA_SOURCE if cuda else SOURCE, exported=exported, extra=extra,
                                  check=CHECKS[function].format(name=name, exported=exported)))
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--no-cuda", action="store_true", help="skip the CUDA module case")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="tvmffi-jit-bench-python-"))
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable  # the interpreter itself, not a pyenv shim script
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SOURCE_DIR / "python"), env.get("PYTHONPATH", "")])
    env["TVMFFI_JIT_BIN"] = str(Path(args.tool).resolve())
    env["TVMFFI_JIT_CACHE_DIR"] = str(work / "jit-cache")
    env["TVM_FFI_CACHE_DIR"] = str(work / "tvm-ffi-cache")

    rows = []
    floor = {
        "python3 -c pass": median_ms([py, "-c", "pass"], env, args.runs),
        "python3 -c 'import tvmffi_jit'": median_ms([py, "-c", "import tvmffi_jit"], env, args.runs),
        "python3 -c 'import tvm_ffi'": median_ms([py, "-c", "import tvm_ffi"], env, args.runs),
        "python3 -c 'import tvm_ffi.cpp'": median_ms([py, "-c", "import tvm_ffi.cpp"], env, args.runs),
    }
    hits = {}
    for function in ("load_inline", "build_inline"):
        for package in MODULES:
            s = script(work, package, function)
            wall([py, str(s)], env)  # builds it (both share nothing: separate caches)
            hits[(package, function)] = median_ms([py, str(s)], env, args.runs)
    for package in MODULES:
        s = script(work, package, "load_inline", work / f"build-dir-{package}")
        wall([py, str(s)], env)
        hits[(package, BUILD_DIR_CASE)] = median_ms([py, str(s)], env, max(3, args.runs // 4))
    for package in MODULES:
        s = work / f"{package.replace('.', '_')}_generated.py"
        (work / f"gen-{package}").mkdir(exist_ok=True)
        s.write_text(GENERATED_FILE.format(module=MODULES[package], source=FILE_SOURCE,
                                           path=str(work / f"gen-{package}" / "generated.cc")))
        wall([py, str(s)], env)
        hits[(package, "generated")] = median_ms([py, str(s)], env, max(3, args.runs // 4))
    in_process_runs = max(40, args.runs)
    for function in ("build_inline", "load_inline"):
        for package, variant, extra_env in (("tvmffi_jit", "", {}), ("tvmffi_jit", " binary", {"TVMFFI_JIT_IN_PROCESS": "0"}),
                                            ("tvm_ffi.cpp", "", {})):
            s = work / f"{package.replace('.', '_')}_{function}_in_process.py"
            s.write_text(IN_PROCESS.format(module=MODULES[package], source=SOURCE, runs=in_process_runs,
                                           function=function))
            out = subprocess.run([py, str(s)], env={**env, **extra_env}, capture_output=True, text=True,
                                 check=True).stdout.split()
            hits[(package, f"in-process {function}{variant}")] = (float(out[0]), float(out[1]))
    cuda_home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    cuda_env = dict(env)
    if (cuda_home / "bin" / "nvcc").exists() and not args.no_cuda:
        # The module needs libcudart at load (no rpath, as tvm_ffi builds it); without
        # nvidia-smi (no GPU) tvm_ffi needs the arch list, and then both get it.
        cuda_env["LD_LIBRARY_PATH"] = os.pathsep.join([str(cuda_home / "lib64"), env.get("LD_LIBRARY_PATH", "")])
        if shutil.which("nvidia-smi") is None:
            cuda_env.setdefault("TVM_FFI_CUDA_ARCH_LIST", "9.0")
        for package in MODULES:
            s = script(work, package, "load_inline", cuda=True)
            wall([py, str(s)], cuda_env)
            hits[(package, "cuda")] = median_ms([py, str(s)], cuda_env, max(3, args.runs // 2))
    colds = {}
    for package in MODULES:
        s = script(work, package, "load_inline")
        times = []
        for i in range(args.cold_runs):
            cold_env = dict(env)
            cold_env["TVMFFI_JIT_CACHE_DIR"] = str(work / f"cold-jit-{i}")
            cold_env["TVM_FFI_CACHE_DIR"] = str(work / f"cold-tvm-ffi-{i}")
            times.append(timed([py, str(s)], cold_env))
            shutil.rmtree(work / f"cold-jit-{i}", ignore_errors=True)
            shutil.rmtree(work / f"cold-tvm-ffi-{i}", ignore_errors=True)
        colds[package] = (statistics.median(t[0] for t in times) * 1000, statistics.median(t[1] for t in times) * 1000)

    print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs per hit figure (median), "
          f"{args.cold_runs} per cold figure; {py}")
    print()
    print("| start-up floor (fresh process, median) | wall ms | CPU ms |")
    print("|---|---|---|")
    for k, (w, c) in floor.items():
        print(f"| `{k}` | {w:.1f} | {c:.1f} |")
    print()
    print("| fresh process, whole run (median) | tvmffi_jit wall / CPU | tvm_ffi.cpp wall / CPU | ratio wall / CPU |")
    print("|---|---|---|---|")

    def row(label, ours, theirs, digits=1):
        print(f"| {label} | {ours[0]:.{digits}f} / {ours[1]:.{digits}f} ms | {theirs[0]:.{digits}f} / {theirs[1]:.{digits}f} ms "
              f"| {theirs[0] / ours[0]:.2f}x / {theirs[1] / ours[1]:.2f}x |")

    for function in ("build_inline", "load_inline"):
        row(f"hit, `{function}`", hits[("tvmffi_jit", function)], hits[("tvm_ffi.cpp", function)])
    row("hit, `build` of a generated file rewritten before each run", hits[("tvmffi_jit", "generated")],
        hits[("tvm_ffi.cpp", "generated")])
    for function in ("build_inline", "load_inline"):
        row(f"hit, `{function}`, repeated call in one process (per call, median of {in_process_runs})",
            hits[("tvmffi_jit", f"in-process {function}")], hits[("tvm_ffi.cpp", f"in-process {function}")], 3)
        row(f"the same, tvmffi_jit through the binary (`TVMFFI_JIT_IN_PROCESS=0`)",
            hits[("tvmffi_jit", f"in-process {function} binary")], hits[("tvm_ffi.cpp", f"in-process {function}")], 3)
    if ("tvmffi_jit", "cuda") in hits:
        row("hit, `load_inline`, CUDA source", hits[("tvmffi_jit", "cuda")], hits[("tvm_ffi.cpp", "cuda")])
    row("repeated call, `load_inline` with `build_directory`", hits[("tvmffi_jit", BUILD_DIR_CASE)],
        hits[("tvm_ffi.cpp", BUILD_DIR_CASE)], 0)
    row("cold (empty cache), `load_inline`", colds["tvmffi_jit"], colds["tvm_ffi.cpp"], 0)
    print()
    for function, floor_name in (("build_inline", "python3 -c pass"), ("load_inline", "python3 -c 'import tvm_ffi'")):
        base = floor[floor_name]
        ours, theirs = hits[("tvmffi_jit", function)], hits[("tvm_ffi.cpp", function)]
        print(f"{function} hit above `{floor_name}` ({base[0]:.1f} ms wall, {base[1]:.1f} ms CPU): "
              f"tvmffi_jit {ours[0] - base[0]:.1f} / {ours[1] - base[1]:.1f} ms, "
              f"tvm_ffi.cpp {theirs[0] - base[0]:.1f} / {theirs[1] - base[1]:.1f} ms (wall / CPU)")
    base = floor["python3 -c 'import tvmffi_jit'"]
    ours = hits[("tvmffi_jit", "build_inline")]
    print(f"build_inline hit above `python3 -c 'import tvmffi_jit'` ({base[0]:.1f} ms wall): "
          f"{ours[0] - base[0]:.1f} ms wall, {ours[1] - base[1]:.1f} ms CPU (target: within 15 ms)")

if __name__ == "__main__":
    main()
