#!/usr/bin/env python3
"""A cold batch with one long CUDA unit: `--split-compile off` against `auto`
(docs/benchmarks.md, "batch": the split of units of unknown cost).

One heavy module (a templated kernel instantiated --heavy times, one .cu) and
--light modules of a few instantiations each, every one for --arch, built
cold (a fresh cache root, so no cost log) by `tvmffi-jit build -m DIR -j J`
with each setting, alternately, --rounds times. Prints, per run: wall seconds,
CPU seconds of every job (from --job-trace), the heavy unit's seconds and the
`--split-compile=N` it ran with; then the medians.

The mechanism under test: with `auto`, a unit whose cost is unknown runs with
--split-compile=4 on the one slot it holds, so once the light units are done
the heavy one uses the cores they gave back (docs/build.md, "Split
compilation"). On 2 cores the room for it is small; the case it is for is a
kernel library's cold build on 16.

Usage: split_cold.py TOOL [--jobs J] [--heavy N] [--light M] [--arch A] [--rounds R]
"""

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

KERNEL = """#include <cstdint>
template <int K, typename T>
__global__ void work(T* x, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T v = x[i];
#pragma unroll
  for (int j = 0; j < 256 + K; ++j) v = v * (T)1.0001 + sqrt(v + (T)(j % (K + 3)));
  x[i] = v;
}}
{instances}
"""


def module(work, name, instances):
    d = work / "src"
    d.mkdir(exist_ok=True)
    lines = []
    for k in range(instances):
        for t in ("float", "double"):
            lines.append(f"template __global__ void work<{k}, {t}>({t}*, int);")
    (d / f"{name}.cu").write_text(KERNEL.format(instances="\n".join(lines)))
    (work / "manifests").mkdir(exist_ok=True)
    (work / "manifests" / f"{name}.json").write_text(json.dumps({
        "name": name, "emit": "cubin", "sources": [str(d / f"{name}.cu")]}))


def run(tool, work, label, jobs, arch, split, i):
    root = work / f"root-{label}-{i}"
    trace = work / f"trace-{label}-{i}.jsonl"
    t = time.perf_counter()
    p = subprocess.run([tool, "build", "-q", "-m", str(work / "manifests"), "-j", str(jobs), "--arch", arch,
                        "--cache-dir", str(root), "--split-compile", split, "--job-trace", str(trace)],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    assert p.returncode == 0, p.stderr
    jobs_seen = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    cpu = sum(j.get("cpu", 0) for j in jobs_seen)
    heavy = [j for j in jobs_seen if "heavy" in j.get("step", "") and "compiling" in j.get("step", "")]
    h = heavy[0] if heavy else {}
    return wall, cpu, h.get("end", 0) - h.get("start", 0), h.get("split", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--heavy", type=int, default=24)
    ap.add_argument("--light", type=int, default=6)
    ap.add_argument("--arch", default="9.0")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tvmffi-jit-split-cold-"))
    module(work, "heavy", a.heavy)
    for i in range(a.light):
        module(work, f"light{i}", 2)
    rows = {"off": [], "auto": []}
    for i in range(a.rounds):
        for split in (("off", "auto") if i % 2 == 0 else ("auto", "off")):
            r = run(a.tool, work, split, a.jobs, a.arch, split, i)
            rows[split].append(r)
            print(f"--split-compile {split}: wall {r[0]:.1f} s, CPU {r[1]:.1f} s, heavy unit {r[2]:.1f} s "
                  f"(split {r[3]})", flush=True)
    print(f"\n| -j {a.jobs}, cold, 1 heavy + {a.light} light modules | wall s | CPU s | heavy unit s |")
    print("|---|---|---|---|")
    for split, rs in rows.items():
        print(f"| `--split-compile {split}` (median of {len(rs)}) | {statistics.median(r[0] for r in rs):.1f} | "
              f"{statistics.median(r[1] for r in rs):.1f} | {statistics.median(r[2] for r in rs):.1f} |")


if __name__ == "__main__":
    main()
