#!/usr/bin/env python3
"""Batch AOT build benchmark for docs/benchmarks.md and docs/farm.md.

N small CUDA TVM FFI modules (one .cu each: a kernel and an exported
TensorView entry point, distinct per module so nothing is shared), each for
two architectures, built cold three ways:

  batch       tvmffi-jit build -m DIR -j J                 (one pool, one gate)
  one by one  tvmffi-jit build -m mI.json -j J, for each I  (separate processes)
  tvm_ffi     tvm_ffi.cpp.build(...) in a Python loop       (MAX_JOBS=J, TVM_FFI_CUDA_ARCH_LIST)

Each run gets a fresh, empty cache (tvmffi-jit: --cache-dir; tvm_ffi:
TVM_FFI_CACHE_DIR and a fresh build_directory). While a run goes, the
resident memory of its whole process tree is sampled every 50 ms: the peak
of the sum (what the machine must hold) and the peak of one compile job (a
compiler process with its children: nvcc + cicc + ptxas), next to the job
gate's budget (MemAvailable at the start) and --mem-per-job.

Environment:
  TVMFFI_JIT_BIN   the tvmffi-jit binary (default: build/tvmffi-jit of this repo)
  BATCH_N          modules (default 8; the issue's figure is 32)
  BATCH_JOBS       -j / MAX_JOBS (default: the number of cores)
  BATCH_ARCHS      the two archs (default "8.0 9.0")
  BATCH_MEM        --mem-per-job (default: the tool's, 4G)
  BATCH_RUNS       which runs, comma-separated (default "batch,one-by-one,tvm_ffi")
  BATCH_WORK       work directory (default: a fresh temp dir, removed at the end)

Prints a Markdown table on stdout; ratios are against the batch run of the same invocation.
"""

import json
import os
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
JOBS = int(os.environ.get("BATCH_JOBS", str(os.cpu_count() or 1)))
ARCHS = os.environ.get("BATCH_ARCHS", "8.0 9.0")
MEM = os.environ.get("BATCH_MEM", "")
RUNS = os.environ.get("BATCH_RUNS", "batch,one-by-one,tvm_ffi").split(",")

KERNEL = r"""#include <cstdint>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

__global__ void add_kernel_{i}(const float* x, float* y, int64_t n) {{
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * {scale}.0f + {i}.0f;
}}

void add_{i}(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {{
  TVM_FFI_ICHECK(x.ndim() == 1 && y.ndim() == 1) << "1-D tensors";
  const int64_t n = x.size(0);
  if (n == 0) return;
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  add_kernel_{i}<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
      static_cast<const float*>(x.data_ptr()), static_cast<float*>(y.data_ptr()), n);
}}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_{i}, add_{i});
"""


def meminfo_available():
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


class TreeSampler:
    """Samples RSS of a process tree: peak total, and peak per compile job."""

    def __init__(self, root_pid):
        self.root = root_pid
        self.peak_total = 0
        self.peak_job = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _table():
        procs = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                stat = open(f"/proc/{d}/stat").read()
                fields = stat[stat.rindex(")") + 2:].split()
                ppid, rss_pages = int(fields[1]), int(fields[21])
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
            except (OSError, ValueError, IndexError):
                continue
            procs[int(d)] = (ppid, rss_pages * os.sysconf("SC_PAGE_SIZE"), comm)
        return procs

    def _sample(self):
        procs = self._table()
        children = {}
        for pid, (ppid, _, _) in procs.items():
            children.setdefault(ppid, []).append(pid)

        def subtree(pid):
            total, stack = 0, [pid]
            while stack:
                p = stack.pop()
                if p in procs:
                    total += procs[p][1]
                stack.extend(children.get(p, []))
            return total

        if self.root not in procs:
            return
        self.peak_total = max(self.peak_total, subtree(self.root))
        # A compile job: a compiler process (nvcc, c++/g++/gcc) and everything under it.
        for pid, (_, _, comm) in procs.items():
            if comm in ("nvcc", "c++", "g++", "gcc", "cc") and self._descends(pid, procs):
                self.peak_job = max(self.peak_job, subtree(pid))

    def _descends(self, pid, procs):
        seen = 0
        while pid in procs and seen < 64:
            if pid == self.root:
                return True
            pid = procs[pid][0]
            seen += 1
        return False

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run_sampled(argv, env):
    start = time.time()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with TreeSampler(p.pid) as s:
        out, err = p.communicate()
    return time.time() - start, p.returncode, out, err, s


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
    for i in range(N):
        (src / f"k{i}.cu").write_text(KERNEL.format(i=i, scale=i + 2))
        (manifests / f"m{i:03d}.json").write_text(json.dumps(
            {"name": f"bench_m{i}", "sources": [f"../src/k{i}.cu"], "cuda_arch": ARCHS}))
    mem_args = ["--mem-per-job", MEM] if MEM else []
    budget = meminfo_available()
    rows = []

    if "batch" in RUNS:
        cache = work / "cache-batch"
        secs, rc, out, err, s = run_sampled([TOOL, "build", "-m", str(manifests), "-j", str(JOBS), "--cache-dir",
                                             str(cache), "-q", *mem_args], env)
        if rc != 0:
            sys.exit(f"batch build failed ({rc}):\n{err}")
        assert len(out.splitlines()) == N
        rows.append(("tvmffi-jit batch (-m DIR)", secs, s.peak_total, s.peak_job))

    if "one-by-one" in RUNS:
        cache = work / "cache-sequential"
        total, peak_total, peak_job = 0.0, 0, 0
        for m in sorted(manifests.glob("*.json")):
            secs, rc, out, err, s = run_sampled([TOOL, "build", "-m", str(m), "-j", str(JOBS), "--cache-dir",
                                                 str(cache), "-q", *mem_args], env)
            if rc != 0:
                sys.exit(f"build of {m} failed ({rc}):\n{err}")
            total += secs
            peak_total, peak_job = max(peak_total, s.peak_total), max(peak_job, s.peak_job)
        rows.append(("tvmffi-jit one module at a time", total, peak_total, peak_job))

    if "tvm_ffi" in RUNS:
        py = f"""
import os, sys, tvm_ffi.cpp
src, out = sys.argv[1], sys.argv[2]
for i in range({N}):
    tvm_ffi.cpp.build(f"bench_m{{i}}", cuda_files=[os.path.join(src, f"k{{i}}.cu")],
                      build_directory=os.path.join(out, f"m{{i}}"))
"""
        tenv = dict(env, TVM_FFI_CUDA_ARCH_LIST=ARCHS, MAX_JOBS=str(JOBS), TVM_FFI_CACHE_DIR=str(work / "tvm-ffi-cache"))
        secs, rc, out, err, s = run_sampled([sys.executable, "-c", py, str(src), str(work / "tvm-ffi-build")], tenv)
        if rc != 0:
            print(f"tvm_ffi.cpp.build loop failed ({rc}); row omitted:\n{err[-2000:]}", file=sys.stderr)
        else:
            rows.append(("tvm_ffi.cpp.build in a loop", secs, s.peak_total, s.peak_job))

    anchor = rows[0][1] if rows else 1.0
    print(f"# batch AOT build: {N} CUDA modules x 2 archs ({ARCHS}), -j {JOBS}, {os.cpu_count()} cores, "
          f"gate budget {gib(budget)} (MemAvailable), --mem-per-job {MEM or '4G (default)'}")
    print("| run | seconds | vs batch | peak RSS, whole tree | peak RSS, one compile job |")
    print("|---|---:|---:|---:|---:|")
    for what, secs, peak_total, peak_job in rows:
        print(f"| {what} | {secs:.1f} | {secs / anchor:.2f}x | {gib(peak_total)} | {gib(peak_job)} |")
    under = all(r[2] < budget for r in rows[:2])
    print(f"\npeak RSS under the budget ({gib(budget)}): {'yes' if under else 'NO'}")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if under else 1


if __name__ == "__main__":
    sys.exit(main())
