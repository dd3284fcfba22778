#!/usr/bin/env python3
"""Several results per key must not slow a hit (docs/benchmarks.md, "cache:
results per key"). Whole `tvmffi-jit build` processes, median of RUNS:

  one result     the key holds 1 result; the header is rewritten (same bytes)
                 before each hit, as in every row, so each hit re-hashes it;
  8, newest      the key holds 8 results (header revisions 0..7); the hit is
                 the most recently used one (tried first);
  8, alternating header revisions 6 and 7 in turn: each hit is the second
                 result tried (a header switched back, the issue's case);
  8, oldest      revisions 0..5 in turn while 6 and 7 are used every round:
                 each hit is the least recently used, tried last (the worst case);

interleaved (one hit of each row in turn), so machine load hits every row
alike. Then the README CUDA example's local hit (`build -m
share/tvmffi-jit/examples/cuda_add_one/manifest.json`), when nvcc is there.

    python3 bench/cache/results.py build/tvmffi-jit [--runs 60] [--work DIR]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench import ms, wall  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SOURCE = """#include <tvm/ffi/function.h>
#include "rev.h"
int64_t rev(int64_t x) { return x + REV; }
TVM_FFI_DLL_EXPORT_TYPED_FUNC(rev, rev);
"""


class Project:
    def __init__(self, folder, tool, env):
        self.dir, self.tool, self.env = folder, tool, env
        folder.mkdir(parents=True)
        (folder / "k.cc").write_text(SOURCE)
        (folder / "m.json").write_text(json.dumps({"name": "results_bench", "sources": ["k.cc"]}))
        self.root = folder / "cache"
        self.argv = [tool, "build", "-q", "-m", str(folder / "m.json"), "--cache-dir", str(self.root)]

    def set(self, rev):
        (self.dir / "rev.h").write_text(f"#define REV {rev}\n")

    def build_json(self):
        p = subprocess.run([*self.argv, "--json"], capture_output=True, text=True, env=self.env)
        if p.returncode != 0:
            sys.exit(p.stderr)
        return json.loads(p.stdout)

    def hit(self, rev):
        self.set(rev)
        return wall(self.argv, env=self.env)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="tvmffi-jit-bench-results-"))
    env = dict(os.environ)
    for v in ("TVMFFI_JIT_REMOTE", "TVMFFI_JIT_CACHE_DIR", "TVMFFI_JIT_BASE_DIR"):
        env.pop(v, None)

    one = Project(work / "one", args.tool, env)
    one.set(0)
    assert one.build_json()["cache"] == "miss"
    eight = Project(work / "eight", args.tool, env)
    for r in range(8):
        eight.set(r)
        assert eight.build_json()["cache"] == "miss"
    results = len(list((eight.root).glob("results_bench_*/*/entry.json")))
    assert results == 8, results
    for r in (0, 7):
        eight.set(r)
        assert eight.build_json()["cache"] == "hit"

    rows = {"one result": [], "8 results, newest (tried first)": [], "8 results, alternating (tried second)": [],
            "8 results, oldest (tried last)": []}
    oldest = 0
    for _ in range(3):
        one.hit(0)
    for i in range(args.runs):
        rows["one result"].append(one.hit(0))
        eight.set(7)
        eight.build_json()  # 7 is now the newest
        rows["8 results, newest (tried first)"].append(eight.hit(7))
        rows["8 results, alternating (tried second)"].append(eight.hit(6 if i % 2 == 0 else 7))
        # The revision not used for longest: tried after the 7 others.
        oldest = (oldest + 1) % 6  # 6 and 7 are used every round: 0..5 in turn is always the LRU
        rows["8 results, oldest (tried last)"].append(eight.hit(oldest))
    base = statistics.median(rows["one result"])
    print(f"| key holds | hit (median of {args.runs} processes, wall) | vs one result |")
    print("|---|---|---|")
    for name, times in rows.items():
        m = statistics.median(times)
        print(f"| {name} | {ms(m)} | {m / base:.2f}x |")

    nvcc = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"
    if nvcc.exists():
        root = work / "readme-cache"
        argv = [args.tool, "build", "-q", "-m", str(ROOT / "share/tvmffi-jit/examples/cuda_add_one/manifest.json"),
                "--cache-dir", str(root)]
        subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
        for _ in range(3):
            wall(argv, env=env)
        times = [wall(argv, env=env) for _ in range(args.runs)]
        print(f"\nREADME CUDA example (cuda_add_one, arch 9.0), local hit: median {ms(statistics.median(times))}, "
              f"min {ms(min(times))} over {args.runs} processes")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
