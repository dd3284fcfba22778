#!/usr/bin/env python3
"""A cold batch with one long CUDA unit: `--split-compile off` against `auto`,
each with the manifests in order and reversed (docs/benchmarks.md, "batch";
docs/build.md, "The cost log" and "Split compilation").

One heavy module (`zheavy`: a templated kernel instantiated --heavy times,
one .cu, named to sort last) and --light modules of a few instantiations
each, every one for --arch, built cold (a fresh cache root, so no cost log)
by `tvmffi-jit build -m MODS.json -j J`, where MODS.json lists the modules in
order or reversed, --rounds times. Prints, per run: wall seconds, CPU seconds
of every job (from --job-trace), the heavy unit's seconds, its place among
the compiles started and the `--split-compile=N` it ran with, the most
threads running at once while a job waited (never more than -j: no
oversubscription), and the rank correlation of the estimates with the CPU
seconds measured; then whether the reversed batch started its units in the
same order, and the medians.

What it shows at small scale: a cold unit is ranked by the bytes its source
and headers hold (estimate_source "source-size"), so the heavy unit starts
first although its name sorts last and whatever the manifests' order; ties
go by name, never by arrival. On 2 cores the room for splitting is small;
the case it is for is a kernel library's cold build on 16.

Usage: split_cold.py TOOL [--jobs J] [--heavy N] [--light M] [--arch A] [--rounds R]
"""

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import spearman  # bench/batch/bench.py: one rank correlation for the batch benchmarks

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


def peak_threads_while_full(jobs):
    """The most threads (a split job's N, else 1) running at once while some job waited. A job
    whose split threads took lent slots (split_lent, --split-compile auto's jobserver) counts
    one: the gate lends nothing while a job waits, so its other pieces ran on its own thread."""
    events = []
    for j in jobs:
        if "start" not in j or "end" not in j:
            continue
        threads = 1 if j.get("split_lent") else max(1, j.get("split", 0))
        events.append((j["start"], 1, threads))
        events.append((j["end"], 0, -threads))
    peak, now = 0, 0
    for t, _, d in sorted(events):
        now += d
        waiting = any(q.get("queued", 0) <= t < q.get("start", 0) for q in jobs)
        if waiting:
            peak = max(peak, now)
    return peak


def run(tool, work, label, jobs, arch, split, mods, i):
    root = work / f"root-{label}-{i}"
    trace = work / f"trace-{label}-{i}.jsonl"
    t = time.perf_counter()
    p = subprocess.run([tool, "build", "-q", "-m", str(mods), "-j", str(jobs), "--arch", arch,
                        "--cache-dir", str(root), "--split-compile", split, "--job-trace", str(trace)],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    assert p.returncode == 0, p.stderr
    seen = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    units = sorted((j for j in seen if j.get("step", "").startswith("compiling")),
                   key=lambda j: (j.get("admission", 0), j["start"], j["step"]))
    heavy = [k for k, j in enumerate(units) if "heavy" in j["step"]]
    h = units[heavy[0]] if heavy else {}
    est = [j for j in units if "estimate" in j]
    return {
        "wall": wall,
        "cpu": sum(j.get("cpu", 0) for j in seen),
        "heavy_s": h.get("end", 0) - h.get("start", 0),
        "heavy_place": heavy[0] + 1 if heavy else 0,
        "heavy_split": h.get("split", 0),
        "heavy_source": h.get("estimate_source", ""),
        "peak_threads": peak_threads_while_full(units),
        "rho": spearman([j["estimate"] for j in est], [j["cpu"] for j in est]),
        "order": [Path(j["step"].split(" ", 1)[1]).name for j in units],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--heavy", type=int, default=24)
    ap.add_argument("--light", type=int, default=6)
    ap.add_argument("--arch", default="9.0")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tvmffi-jit-split-cold-"))
    module(work, "zheavy", a.heavy)
    names = ["zheavy"] + [f"light{i}" for i in range(a.light)]
    for n in names[1:]:
        module(work, n, 2)
    for label, listed in (("forward", names), ("reversed", names[::-1])):
        (work / f"mods-{label}.json").write_text(json.dumps(
            {"modules": [f"manifests/{n}.json" for n in listed]}))
    rows = {}
    orders = {}
    for i in range(a.rounds):
        for split in (("off", "auto") if i % 2 == 0 else ("auto", "off")):
            for label in ("forward", "reversed"):
                r = run(a.tool, work, f"{split}-{label}", a.jobs, a.arch, split, work / f"mods-{label}.json", i)
                rows.setdefault((split, label), []).append(r)
                orders.setdefault(split, {}).setdefault(label, []).append(r["order"])
                rho = "n/a" if r["rho"] is None else f"{r['rho']:.2f}"
                print(f"--split-compile {split}, {label}: wall {r['wall']:.1f} s, CPU {r['cpu']:.1f} s, heavy unit "
                      f"{r['heavy_s']:.1f} s, started {r['heavy_place']}/{len(r['order'])} "
                      f"(estimate {r['heavy_source'] or '-'}, split {r['heavy_split']}), "
                      f"peak threads while full {r['peak_threads']} (-j {a.jobs}), estimate rank rho {rho}",
                      flush=True)
    for split, by in orders.items():
        same = all(f[:a.jobs] == by["reversed"][k][:a.jobs] or sorted(f[:a.jobs]) == sorted(by["reversed"][k][:a.jobs])
                   for k, f in enumerate(by["forward"]))
        print(f"--split-compile {split}: the reversed batch started the same first {a.jobs} units: {same}; "
              f"forward order {by['forward'][0]}")
    print(f"\n| -j {a.jobs}, cold, 1 heavy + {a.light} light modules | wall s | CPU s | heavy unit s | heavy started |")
    print("|---|---|---|---|---|")
    for (split, label), rs in rows.items():
        print(f"| `--split-compile {split}`, {label} (median of {len(rs)}) | "
              f"{statistics.median(r['wall'] for r in rs):.1f} | {statistics.median(r['cpu'] for r in rs):.1f} | "
              f"{statistics.median(r['heavy_s'] for r in rs):.1f} | {rs[0]['heavy_place']} |")


if __name__ == "__main__":
    main()
