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

Each row is printed as soon as it is measured, cheapest and most telling
first (in-process hits, the whole-process hit against `import tvmffi_jit`),
so a run cut off by a time limit still reports; figures compared with each
other are measured interleaved (a, b, a, b, ...), so they see the same load.

Usage: bench.py [TOOL] [--runs N] [--cold-runs N] [--work DIR] [--no-cuda]
  TOOL: a build tree's tvmffi-jit (its engine library beside it); without it,
  the tvmffi_jit installed in this interpreter (a wheel).
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
    return interleaved_ms([argv], env, runs)[0]


def interleaved_ms(argvs, env, runs):
    """median_ms of several commands run in turn (a, b, a, b, ...): a figure and the floor it is compared
    with then see the same load, which on a shared machine moves by more than the difference."""
    for argv in argvs:
        timed(argv, env)
    samples = [[] for _ in argvs]
    for _ in range(runs):
        for i, argv in enumerate(argvs):
            samples[i].append(timed(argv, env))
    return [(statistics.median(s[0] for s in ss) * 1000, statistics.median(s[1] for s in ss) * 1000) for ss in samples]


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


def say(text=""):
    """One line of the report, written at once: a run cut off by a time limit still reports what it measured."""
    print(text, flush=True)


def row(label, ours, theirs, digits=1):
    say(f"| {label} | {ours[0]:.{digits}f} / {ours[1]:.{digits}f} ms | {theirs[0]:.{digits}f} / {theirs[1]:.{digits}f} ms "
        f"| {theirs[0] / ours[0]:.2f}x / {theirs[1] / ours[1]:.2f}x |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool", nargs="?", help="a tvmffi-jit binary with its engine library beside it (a build tree); "
                    "left out: the tvmffi_jit package installed in this interpreter (a wheel)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--no-cuda", action="store_true", help="skip the CUDA module case")
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="tvmffi-jit-bench-python-"))
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable  # the interpreter itself, not a pyenv shim script
    env = dict(os.environ)
    if args.tool:
        env["PYTHONPATH"] = os.pathsep.join([str(SOURCE_DIR / "python"), env.get("PYTHONPATH", "")])
        env["TVMFFI_JIT_BIN"] = str(Path(args.tool).resolve())
    env["TVMFFI_JIT_CACHE_DIR"] = str(work / "jit-cache")
    env["TVM_FFI_CACHE_DIR"] = str(work / "tvm-ffi-cache")
    where = subprocess.run([py, "-c", "import tvmffi_jit, tvm_ffi; from tvmffi_jit import _engine; "
                            "print(tvmffi_jit.__file__, _engine.library_path(), tvm_ffi.__version__)"],
                           env=env, capture_output=True, text=True, check=True).stdout.strip()
    say(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs; {args.runs} runs per fresh-process figure "
        f"(median), {args.cold_runs} per cold figure; {py} {sys.version.split()[0]}")
    say(f"package, engine, tvm_ffi version: {where}")

    # 1. Repeated calls inside one process (one process per row: cheap even where `import tvm_ffi` is slow).
    in_process_runs = max(40, args.runs)
    say()
    say(f"| per call, median of {in_process_runs} repeated calls in one process | tvmffi_jit wall / CPU "
        "| tvm_ffi.cpp wall / CPU | ratio wall / CPU |")
    say("|---|---|---|---|")
    for function in ("build_inline", "load_inline"):
        got = {}
        for package, variant, extra_env in (("tvm_ffi.cpp", "", {}), ("tvmffi_jit", "", {}),
                                            ("tvmffi_jit", " binary", {"TVMFFI_JIT_IN_PROCESS": "0"})):
            s = work / f"{package.replace('.', '_')}_{function}_in_process.py"
            s.write_text(IN_PROCESS.format(module=MODULES[package], source=SOURCE, runs=in_process_runs,
                                           function=function))
            out = subprocess.run([py, str(s)], env={**env, **extra_env}, capture_output=True, text=True,
                                 check=True).stdout.split()
            got[(package, variant)] = (float(out[0]), float(out[1]))
        theirs = got[("tvm_ffi.cpp", "")]
        row(f"`{function}` hit, in-process (engine)", got[("tvmffi_jit", "")], theirs, 3)
        row(f"`{function}` hit, a `tvmffi-jit` process per call (`TVMFFI_JIT_IN_PROCESS=0`)",
            got[("tvmffi_jit", " binary")], theirs, 3)

    # 2. The whole-process hit against `import tvmffi_jit`, interleaved (target: within 15 ms).
    hit = script(work, "tvmffi_jit", "build_inline")
    wall([py, str(hit)], env)  # builds it
    floor_import, ours = interleaved_ms([[py, "-c", "import tvmffi_jit"], [py, str(hit)]], env, args.runs)
    say()
    say(f"whole process, interleaved, median of {args.runs}: `python3 -c 'import tvmffi_jit'` "
        f"{floor_import[0]:.1f} / {floor_import[1]:.1f} ms, `build_inline` hit {ours[0]:.1f} / {ours[1]:.1f} ms "
        f"(wall / CPU): the hit is {ours[0] - floor_import[0]:.1f} ms wall, {ours[1] - floor_import[1]:.1f} ms CPU "
        "above the import (target: within 15 ms)")

    # 3. Start-up floors.
    say()
    say("| start-up floor (fresh process, median) | wall ms | CPU ms |")
    say("|---|---|---|")
    floor = {}
    for label, argv in (("python3 -c pass", [py, "-c", "pass"]),
                        ("python3 -c 'import tvm_ffi'", [py, "-c", "import tvm_ffi"]),
                        ("python3 -c 'import tvm_ffi.cpp'", [py, "-c", "import tvm_ffi.cpp"])):
        floor[label] = median_ms(argv, env, args.runs)
        say(f"| `{label}` | {floor[label][0]:.1f} | {floor[label][1]:.1f} |")

    # 4. Fresh-process hits against tvm_ffi.cpp, each pair interleaved.
    say()
    say("| fresh process, whole run (median) | tvmffi_jit wall / CPU | tvm_ffi.cpp wall / CPU | ratio wall / CPU |")
    say("|---|---|---|---|")
    hits = {}
    for function in ("build_inline", "load_inline"):
        pair = [script(work, package, function) for package in MODULES]
        for s in pair:
            wall([py, str(s)], env)  # builds it (both share nothing: separate caches)
        hits[function] = interleaved_ms([[py, str(s)] for s in pair], env, args.runs)
        row(f"hit, `{function}`", *hits[function])
    pair = []
    for package in MODULES:
        s = work / f"{package.replace('.', '_')}_generated.py"
        (work / f"gen-{package}").mkdir(exist_ok=True)
        s.write_text(GENERATED_FILE.format(module=MODULES[package], source=FILE_SOURCE,
                                           path=str(work / f"gen-{package}" / "generated.cc")))
        wall([py, str(s)], env)
        pair.append([py, str(s)])
    row("hit, `build` of a generated file rewritten before each run",
        *interleaved_ms(pair, env, max(3, args.runs // 4)))
    pair = [[py, str(script(work, package, "load_inline", work / f"build-dir-{package}"))] for package in MODULES]
    for argv in pair:
        wall(argv, env)
    row("repeated call, `load_inline` with `build_directory`", *interleaved_ms(pair, env, max(3, args.runs // 4)), 0)
    cuda_home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    cuda_env = dict(env)
    if (cuda_home / "bin" / "nvcc").exists() and not args.no_cuda:
        # The module needs libcudart at load (no rpath, as tvm_ffi builds it); without
        # nvidia-smi (no GPU) tvm_ffi needs the arch list, and then both get it.
        cuda_env["LD_LIBRARY_PATH"] = os.pathsep.join([str(cuda_home / "lib64"), env.get("LD_LIBRARY_PATH", "")])
        if shutil.which("nvidia-smi") is None:
            cuda_env.setdefault("TVM_FFI_CUDA_ARCH_LIST", "9.0")
        pair = [[py, str(script(work, package, "load_inline", cuda=True))] for package in MODULES]
        for argv in pair:
            wall(argv, cuda_env)
        row("hit, `load_inline`, CUDA source", *interleaved_ms(pair, cuda_env, max(3, args.runs // 2)))
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
    row("cold (empty cache), `load_inline`", colds["tvmffi_jit"], colds["tvm_ffi.cpp"], 0)
    say()
    for function, floor_name in (("build_inline", "python3 -c pass"), ("load_inline", "python3 -c 'import tvm_ffi'")):
        base = floor[floor_name]
        ours, theirs = hits[function]
        say(f"{function} hit above `{floor_name}` ({base[0]:.1f} ms wall, {base[1]:.1f} ms CPU): "
            f"tvmffi_jit {ours[0] - base[0]:.1f} / {ours[1] - base[1]:.1f} ms, "
            f"tvm_ffi.cpp {theirs[0] - base[0]:.1f} / {theirs[1] - base[1]:.1f} ms (wall / CPU)")


if __name__ == "__main__":
    main()
