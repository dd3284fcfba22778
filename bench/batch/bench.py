#!/usr/bin/env python3
"""Batch AOT build benchmark for docs/benchmarks.md (issue 19).

N CUDA TVM FFI modules (one .cu each, a templated kernel instantiated for
several types and unroll factors, distinct per module so nothing is shared),
each for two architectures, built cold by every parallel peer a user could
reach for, in one run:

  batch       tvmffi-jit build -m DIR -j J                        (one pool, one gate)
  xargs       xargs -P J over single `tvmffi-jit build -m mI.json` (J processes)
  threadpool  ThreadPoolExecutor(J) calling tvm_ffi.cpp.build      (one Python process)
  sequential  tvmffi-jit build -m mI.json one after the other      (optional: BATCH_RUNS)

Each run gets a fresh, empty cache. For each: wall seconds, CPU seconds (user +
system of every process it waited for: compilers, linkers, the tool), and the
peak resident memory of the process tree (sampled every 50 ms). The floor is
the batch's CPU seconds over the cores: no schedule of the same processes can
finish sooner.

Environment:
  TVMFFI_JIT_BIN   the tvmffi-jit binary (default: build/tvmffi-jit of this repo)
  BATCH_N          modules (default 8; the issue's figure is 32)
  BATCH_JOBS       -j / -P / pool size (default: the number of cores)
  BATCH_ARCHS      the archs (default "8.0 9.0")
  BATCH_MEM        --mem-per-job (default: the tool's)
  BATCH_CXX        every BATCH_CXX-th module is C++ only (0: all CUDA; default 0)
  BATCH_KERNEL     templated (default) or simple
  BATCH_RUNS       comma-separated (default "batch,xargs,threadpool")
  BATCH_LABEL      a label for the batch row (e.g. the binary's commit)
  BATCH_TRACE      a file for the batch run's --job-trace (per-job timeline)
  BATCH_WORK       work directory (default: a fresh temp dir, removed at the end)

Prints each run as it ends on stderr (with the machine's busy cores per second,
from /proc/stat), then a Markdown table on stdout.
"""

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = os.environ.get("TVMFFI_JIT_BIN", str(ROOT / "build" / "tvmffi-jit"))
N = int(os.environ.get("BATCH_N", "8"))
CORES = os.cpu_count() or 1
JOBS = int(os.environ.get("BATCH_JOBS", str(CORES)))
ARCHS = os.environ.get("BATCH_ARCHS", "8.0 9.0")
MEM = os.environ.get("BATCH_MEM", "")
CXX_EVERY = int(os.environ.get("BATCH_CXX", "0"))
KERNEL_KIND = os.environ.get("BATCH_KERNEL", "templated")
RUNS = os.environ.get("BATCH_RUNS", "batch,xargs,threadpool").split(",")
LABEL = os.environ.get("BATCH_LABEL", "")
TRACE = os.environ.get("BATCH_TRACE", "")

HEADER = r"""#include <cstdint>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/function.h>
"""

SIMPLE = r"""
__global__ void add_kernel_{i}(const float* x, float* y, int64_t n) {{
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * {scale}.0f + {i}.0f;
}}
"""

# A templated kernel, instantiated for 4 types x 4 unroll factors: the kind of
# module a kernels library generates, heavier on cicc/ptxas than one kernel.
TEMPLATED = r"""
template <typename T, int UNROLL>
__global__ void add_kernel_{i}(const T* x, T* y, int64_t n) {{
  int64_t base = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
  for (int u = 0; u < UNROLL; ++u) {{
    int64_t i = base + u;
    if (i < n) {{
      T v = x[i];
#pragma unroll
      for (int k = 0; k < 4; ++k) v = v * static_cast<T>({scale}) + static_cast<T>(k + {i});
      y[i] = v;
    }}
  }}
}}

template <typename T>
void launch_{i}(const T* x, T* y, int64_t n, cudaStream_t s) {{
  if (n >= 4096) add_kernel_{i}<T, 8><<<static_cast<unsigned>((n / 8 + 255) / 256), 256, 0, s>>>(x, y, n);
  else if (n >= 1024) add_kernel_{i}<T, 4><<<static_cast<unsigned>((n / 4 + 255) / 256), 256, 0, s>>>(x, y, n);
  else if (n >= 256) add_kernel_{i}<T, 2><<<static_cast<unsigned>((n / 2 + 255) / 256), 256, 0, s>>>(x, y, n);
  else add_kernel_{i}<T, 1><<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(x, y, n);
}}
template void launch_{i}<float>(const float*, float*, int64_t, cudaStream_t);
template void launch_{i}<double>(const double*, double*, int64_t, cudaStream_t);
template void launch_{i}<int32_t>(const int32_t*, int32_t*, int64_t, cudaStream_t);
template void launch_{i}<int64_t>(const int64_t*, int64_t*, int64_t, cudaStream_t);
"""

CUDA_ENTRY = r"""
#include <tvm/ffi/extra/c_env_api.h>
void add_{i}(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {{
  TVM_FFI_ICHECK(x.ndim() == 1 && y.ndim() == 1) << "1-D tensors";
  const int64_t n = x.size(0);
  if (n == 0) return;
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  {call}
}}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_{i}, add_{i});
"""

CXX_MODULE = HEADER + r"""
#include <vector>
#include <algorithm>
void add_{i}(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {{
  TVM_FFI_ICHECK(x.ndim() == 1 && y.ndim() == 1) << "1-D tensors";
  const float* in = static_cast<const float*>(x.data_ptr());
  float* out = static_cast<float*>(y.data_ptr());
  std::vector<float> tmp(in, in + x.size(0));
  std::transform(tmp.begin(), tmp.end(), out, [](float v) {{ return v * {scale}.0f + {i}.0f; }});
}}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_{i}, add_{i});
"""


def cuda_source(i):
    scale = i + 2
    if KERNEL_KIND == "simple":
        body = SIMPLE.format(i=i, scale=scale)
        call = (f"add_kernel_{i}<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>("
                "static_cast<const float*>(x.data_ptr()), static_cast<float*>(y.data_ptr()), n);")
    else:
        body = TEMPLATED.format(i=i, scale=scale)
        call = (f"launch_{i}<float>(static_cast<const float*>(x.data_ptr()), "
                "static_cast<float*>(y.data_ptr()), n, stream);")
    return HEADER + "#include <cuda_runtime.h>\n" + body + CUDA_ENTRY.format(i=i, call=call)


def is_cxx(i):
    return CXX_EVERY > 0 and i % CXX_EVERY == CXX_EVERY - 1


def busy_jiffies():
    """(busy, total) jiffies of all CPUs from /proc/stat, or None."""
    try:
        with open("/proc/stat") as f:
            words = f.readline().split()
    except OSError:
        return None
    if not words or words[0] != "cpu":
        return None
    v = [int(x) for x in words[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    total = sum(v[:8])  # guest time is already in user
    return total - idle, total


class TreeSampler:
    """Peak RSS of a process tree (sum over the tree), sampled every 50 ms,
    and the machine's busy cores per second (from /proc/stat): where a run
    left cores idle (its start, its tail)."""

    def __init__(self, root_pid):
        self.root = root_pid
        self.peak_total = 0
        self.busy = []  # busy cores, one value per second of the run
        self._last = busy_jiffies()
        self._last_t = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample_cpu(self, final=False):
        now = time.time()
        if not final and now - self._last_t < 1.0:
            return
        cur = busy_jiffies()
        if cur and self._last and cur[1] > self._last[1]:
            self.busy.append(CORES * (cur[0] - self._last[0]) / (cur[1] - self._last[1]))
        self._last, self._last_t = cur, now

    def _sample(self):
        procs = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                stat = open(f"/proc/{d}/stat").read()
                fields = stat[stat.rindex(")") + 2:].split()
                procs[int(d)] = (int(fields[1]), int(fields[21]) * os.sysconf("SC_PAGE_SIZE"))
            except (OSError, ValueError, IndexError):
                continue
        children = {}
        for pid, (ppid, _) in procs.items():
            children.setdefault(ppid, []).append(pid)
        total, stack = 0, [self.root]
        while stack:
            p = stack.pop()
            if p in procs:
                total += procs[p][1]
            stack.extend(children.get(p, []))
        self.peak_total = max(self.peak_total, total)

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            self._sample_cpu()
            self._stop.wait(0.05)
        self._sample_cpu(final=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_measured(argv, env, stdin=None):
    """Wall seconds, CPU seconds of everything it waited for, peak tree RSS."""
    cpu0, start = children_cpu(), time.time()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE if stdin is not None else None,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with TreeSampler(p.pid) as s:
        out, err = p.communicate(stdin)
    global last_busy
    last_busy = s.busy
    return time.time() - start, children_cpu() - cpu0, p.returncode, out, err, s.peak_total


last_busy = []  # busy cores per second of the last run_measured()


def ranks(xs):
    """Ranks of xs, 0-based, ties given their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(a, b):
    """Spearman's rank correlation (mean ranks for ties); None for fewer than 3 or a constant side."""
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    va, vb = sum((x - ma) ** 2 for x in ra), sum((y - mb) ** 2 for y in rb)
    if va == 0 or vb == 0:
        return None
    return sum((x - ma) * (y - mb) for x, y in zip(ra, rb)) / (va * vb) ** 0.5


def gib(b):
    return f"{b / 2**30:.2f} GiB"


def main():
    if not os.path.exists(TOOL):
        sys.exit(f"no tvmffi-jit binary at {TOOL} (set TVMFFI_JIT_BIN)")
    keep = "BATCH_WORK" in os.environ
    work = Path(os.environ["BATCH_WORK"]) if keep else Path(tempfile.mkdtemp(prefix="tvmffi-jit-batch-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TVMFFI_JIT_CXX", "TVMFFI_JIT_CUDA", "CCACHE_"))}
    env["PATH"] = "/usr/local/cuda/bin" + os.pathsep + env.get("PATH", "")
    env.pop("TVMFFI_JIT_CACHE_DIR", None)
    src = work / "src"
    src.mkdir(exist_ok=True)
    manifests = work / "manifests"
    manifests.mkdir(exist_ok=True)
    specs = []  # (name, source path, cuda?)
    for i in range(N):
        if is_cxx(i):
            path = src / f"k{i}.cc"
            path.write_text(CXX_MODULE.format(i=i, scale=i + 2))
        else:
            path = src / f"k{i}.cu"
            path.write_text(cuda_source(i))
        m = {"name": f"bench_m{i}", "sources": [f"../src/{path.name}"]}
        if not is_cxx(i):
            m["cuda_arch"] = ARCHS
        (manifests / f"m{i:03d}.json").write_text(json.dumps(m))
        specs.append((f"bench_m{i}", path, not is_cxx(i)))
    mem_args = ["--mem-per-job", MEM] if MEM else []
    budget = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            budget = int(line.split()[1]) * 1024
    rows = []

    def row(what, secs, cpu, peak):
        rows.append((what, secs, cpu, peak))
        # As soon as it is measured: a run cut off by a time limit still reports.
        print(f"  {what}: {secs:.1f} s, {cpu:.1f} CPU-s, {secs / (cpu / CORES):.2f}x its floor, peak {gib(peak)}",
              file=sys.stderr, flush=True)
        if last_busy:
            print("    busy cores per second: " + " ".join(f"{b:.0f}" for b in last_busy), file=sys.stderr, flush=True)

    if "batch" in RUNS:
        trace = ["--job-trace", TRACE] if TRACE else []
        secs, cpu, rc, out, err, peak = run_measured(
            [TOOL, "build", "-m", str(manifests), "-j", str(JOBS), "--cache-dir", str(work / "cache-batch"), "-q",
             *mem_args, *trace], env)
        if rc != 0:
            sys.exit(f"batch build failed ({rc}):\n{err}")
        assert len(out.splitlines()) == N, out
        row("tvmffi-jit batch (`-m DIR`)" + (f" {LABEL}" if LABEL else ""), secs, cpu, peak)

    if "xargs" in RUNS:
        cache = work / "cache-xargs"
        files = "\n".join(str(m) for m in sorted(manifests.glob("*.json"))) + "\n"
        secs, cpu, rc, out, err, peak = run_measured(
            ["xargs", "-P", str(JOBS), "-I{}", TOOL, "build", "-m", "{}", "--cache-dir", str(cache), "-q", *mem_args],
            env, stdin=files)
        if rc != 0:
            sys.exit(f"xargs builds failed ({rc}):\n{err}")
        row(f"`xargs -P {JOBS}` of single `tvmffi-jit build`", secs, cpu, peak)

    if "threadpool" in RUNS:
        py = f"""
import json, os, sys
from concurrent.futures import ThreadPoolExecutor
import tvm_ffi.cpp
specs = json.loads(sys.argv[1]); out = sys.argv[2]
def one(s):
    name, path, cuda = s
    kw = dict(cuda_files=[path]) if cuda else dict(cpp_files=[path])
    return tvm_ffi.cpp.build(name, build_directory=os.path.join(out, name), **kw)
with ThreadPoolExecutor({JOBS}) as ex:
    list(ex.map(one, specs))
"""
        tenv = dict(env, TVM_FFI_CUDA_ARCH_LIST=ARCHS, TVM_FFI_CACHE_DIR=str(work / "tvm-ffi-cache"))
        spec_json = json.dumps([(n, str(p), c) for n, p, c in specs])
        secs, cpu, rc, out, err, peak = run_measured([sys.executable, "-c", py, spec_json, str(work / "tvm-ffi-build")], tenv)
        if rc != 0:
            print(f"ThreadPoolExecutor of tvm_ffi.cpp.build failed ({rc}); row omitted:\n{err[-3000:]}", file=sys.stderr)
        else:
            row(f"ThreadPoolExecutor({JOBS}) of `tvm_ffi.cpp.build`", secs, cpu, peak)

    if "sequential" in RUNS:
        cache = work / "cache-sequential"
        total, total_cpu, peak = 0.0, 0.0, 0
        for m in sorted(manifests.glob("*.json")):
            secs, cpu, rc, out, err, p = run_measured([TOOL, "build", "-m", str(m), "--cache-dir", str(cache), "-q",
                                                       *mem_args], env)
            if rc != 0:
                sys.exit(f"build of {m} failed ({rc}):\n{err}")
            total, total_cpu, peak = total + secs, total_cpu + cpu, max(peak, p)
        row("tvmffi-jit one module at a time", total, total_cpu, peak)

    n_cxx = sum(1 for s in specs if not s[2])
    print(f"# {N} modules ({N - n_cxx} CUDA x archs {ARCHS}, {KERNEL_KIND} kernel; {n_cxx} C++ only), "
          f"-j {JOBS}, {CORES} cores, MemAvailable {gib(budget)}, --mem-per-job {MEM or 'default'}")
    print("| run | wall s | CPU s | wall / its floor | batch faster by | peak RSS, tree |")
    print("|---|---:|---:|---:|---:|---:|")
    batch = next((r for r in rows if r[0].startswith("tvmffi-jit batch")), None)
    for what, secs, cpu, peak in rows:
        floor = cpu / CORES
        faster = f"{secs / batch[1]:.2f}x" if batch else "-"
        print(f"| {what} | {secs:.1f} | {cpu:.1f} | {secs / floor:.2f}x | {faster} | {gib(peak)} |")
    if batch:
        peers = [r for r in rows if r is not batch and not r[0].startswith("tvmffi-jit one")]
        floor = batch[2] / CORES
        print(f"\nbatch floor (its CPU s / {CORES} cores): {floor:.1f} s; batch at {batch[1] / floor:.2f}x of it")
        if peers:
            best = min(peers, key=lambda r: r[1])
            print(f"best peer: {best[0]} {best[1]:.1f} s; batch {best[1] / batch[1]:.2f}x faster")
    under = all(r[3] < budget for r in rows)
    print(f"peak RSS under MemAvailable ({gib(budget)}): {'yes' if under else 'NO'}")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if under else 1


if __name__ == "__main__":
    sys.exit(main())
