#!/usr/bin/env python3
"""The command-line local hit of the README CUDA example built for four
architectures, against the process start-up floor, in the same rounds
(docs/benchmarks.md, "local hit"):

    python3 bench/hit_cost/cli_hit.py TOOL [--rounds 3] [--calls 40] [--work DIR]

Builds share/tvmffi-jit/examples/cuda_add_one with --arch 8.0,9.0,10.0,12.0
into a fresh cache root (nvcc needed), waits until the entry's stamps are
settled (2 s: the first hits would re-hash otherwise), then times `build -q`
hits, `tvmffi-jit --version` and /bin/true, each a fresh process, interleaved.
Prints one Markdown row per round and the medians.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "share/tvmffi-jit/examples/cuda_add_one/manifest.json"
ARCHS = "8.0,9.0,10.0,12.0"


def timed(argv, env):
    t = time.perf_counter()
    p = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.decode(errors='replace')}")
    return elapsed * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tool")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--work")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="tvmffi-jit-cli-hit-"))
    env = {**os.environ, "TVMFFI_JIT_CACHE_DIR": str(work / "cache")}
    build = [args.tool, "build", "-q", "-m", str(MANIFEST), "--arch", ARCHS]
    p = subprocess.run(build, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"the first build failed (exit {p.returncode}):\n{p.stderr}")
    time.sleep(2.5)  # the stamps settle (util/stamp.h: 2 s), so a hit re-hashes nothing
    timed(build, env)  # the first hit after settling writes the stamps back
    print("| round | hit median ms (p25-p75) | --version ms | /bin/true ms |")
    print("|---|---|---|---|")
    hits_all = []
    for r in range(args.rounds):
        hits, versions, trues = [], [], []
        for _ in range(args.calls):
            hits.append(timed(build, env))
            versions.append(timed([args.tool, "--version"], env))
            trues.append(timed(["/bin/true"], env))
        q = statistics.quantiles(hits, n=4)
        hits_all.append(statistics.median(hits))
        print(f"| {r + 1} | {statistics.median(hits):.2f} ({q[0]:.2f}-{q[2]:.2f}) | "
              f"{statistics.median(versions):.2f} | {statistics.median(trues):.2f} |")
    print(f"\nmedian of round medians: {statistics.median(hits_all):.2f} ms (target <= 5 ms)")


if __name__ == "__main__":
    main()
