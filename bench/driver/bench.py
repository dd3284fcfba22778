#!/usr/bin/env python3
"""Whole-process cost of `tvmffi-jit inspect --load FILE` against the floor:
a minimal C program (floor.c) making the same driver calls in one process.

  bench/driver/bench.py --tool build/tvmffi-jit --floor ./floor FILE [--runs 15]

Runs the two alternately (so drift hits both), prints the median and min wall
time of each and the ratio of medians. Each run is a fresh process, so driver
initialisation (cuInit + primary context, ~0.3 s on an H200) is in every figure.
"""
import argparse
import statistics
import subprocess
import sys
import time


def wall(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
    return dt, r.returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--floor", required=True)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", action="store_true", help="time inspect --load --json instead of text output")
    ap.add_argument("file")
    a = ap.parse_args()
    tool_cmd = [a.tool, "inspect", "--load"] + (["--json"] if a.json else []) + [a.file]
    floor_cmd = [a.floor, a.file]
    # one warm-up each (page cache, JIT cache directory)
    for cmd in (tool_cmd, floor_cmd):
        _, rc = wall(cmd)
        if rc != 0:
            sys.exit(f"{cmd[0]} exited {rc} on {a.file}")
    tool, floor = [], []
    for _ in range(a.runs):
        tool.append(wall(tool_cmd)[0])
        floor.append(wall(floor_cmd)[0])
    mt, mf = statistics.median(tool), statistics.median(floor)
    print(f"file {a.file}, {a.runs} runs each")
    print(f"tvmffi-jit inspect --load  median {mt:.3f} s  min {min(tool):.3f} s")
    print(f"floor (C, same calls)      median {mf:.3f} s  min {min(floor):.3f} s")
    print(f"ratio of medians           {mt / mf:.2f}x")


if __name__ == "__main__":
    main()
