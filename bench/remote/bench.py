#!/usr/bin/env python3
"""Remote cache tier benchmark for docs/benchmarks.md and docs/remote.md.

The README example module (share/tvmffi-jit/examples/cuda_add_one; a
two-source C++ module when nvcc is not on PATH) is copied to checkout A and
checkout B at different paths. Measured as whole processes, in one run:

  cold build      checkout A, empty root (every compile and the link)   anchor
  local hit       checkout A, its own root
  remote hit      checkout B, --remote redis://... / http://... / s3://... (GET, verify every
                  SHA-256, re-hash the headers, publish), into a new empty root per run
                  (which first identifies the toolchain: compilers' --version, tvm-ffi)
                  and into a warm root (toolchain memos present, the entry absent)
  unreachable     a server whose connect never completes: the warning's own
                  measurement of what it cost the build

Usage: bench.py TOOL [--runs N] [--cold-runs N] [--work DIR]
"""

import argparse
import json
import re
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(HERE))
import remote_servers  # noqa: E402
from common import build_argv, clean_env, make_checkouts, strip_to_warm_root, timed  # noqa: E402


def ms(x):
    return f"{x * 1000:.1f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--cold-runs", type=int, default=2)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    tool = str(Path(a.tool).resolve())
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = clean_env()
    what, ckA, ckB = make_checkouts(work)
    mA, mB = ckA / "manifest.json", ckB / "manifest.json"

    def build(manifest, root, *extra):
        return build_argv(tool, manifest, root, *extra)

    with remote_servers.server("redis", work / "redis") as redis, remote_servers.server("http", work / "nginx") as nginx, \
            remote_servers.server("s3", work / "seaweedfs") as s3:
        s3_url = s3.url(prefix="bench")
        env = dict(env, **s3.env("writer"))  # read only by s3:// remotes
        # Cold builds (each into an empty root; uploads to every server on the first).
        cold = []
        for i in range(a.cold_runs):
            extra = ["--remote", redis.url, "--remote", nginx.url, "--remote", s3_url] if i == 0 else []
            cold.append(timed(build(mA, work / f"cold{i}", *extra), cwd=ckA, env=env)[0])
        cold_m = statistics.median(cold)
        rootA = work / "cold0"
        for _ in range(3):
            timed(build(mA, rootA), cwd=ckA, env=env)
        local = [timed(build(mA, rootA), cwd=ckA, env=env)[0] for _ in range(a.runs)]
        local_m = statistics.median(local)
        size = None
        remote = {}
        for name, url in (("redis", redis.url), ("nginx (WebDAV)", nginx.url), ("S3 (SeaweedFS)", s3_url)):
            # A warm second root: a runner's node-local cache that has identified
            # the compilers and tvm-ffi before, but not this entry.
            slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
            template = work / f"tpl-{slug}"
            timed(build(mB, template, "--remote", url), cwd=ckB, env=env)
            strip_to_warm_root(template)
            for kind in ("empty", "warm"):
                times = []
                for i in range(a.runs):
                    root = work / f"b-{slug}-{kind}-{i}"
                    if kind == "warm":
                        shutil.copytree(template, root, symlinks=True)
                    dt, p = timed(build(mB, root, "--remote", url, "--json"), cwd=ckB, env=env)
                    j = json.loads(p.stdout)
                    assert j["cache"] == "remote-hit" and j["commands"] == [], j
                    size = size or json.loads(timed([tool, "cache", "stats", "--json", "--cache-dir", str(root)],
                                                    env=env)[1].stdout)["remote_bytes_received"]
                    times.append(dt)
                    shutil.rmtree(root)
                remote[(name, kind)] = statistics.median(times)
        with remote_servers.unresponsive_port() as port:
            _, p = timed(build(mA, work / "down", "--remote", f"redis://127.0.0.1:{port}"), cwd=ckA, env=env)
            down_ms = [float(x) for x in re.findall(r"after (\d+) ms", p.stderr)]

    print(f"module: {what}; blob {size} bytes; median of {a.runs} processes (cold: {a.cold_runs})\n")
    print("| measurement | time | anchor (cold build) | ratio |")
    print("|---|---|---|---|")
    print(f"| cold build, empty root | {ms(cold_m)} | {ms(cold_m)} | 1 |")
    print(f"| local hit | {ms(local_m)} | {ms(cold_m)} | {local_m / cold_m:.4f} |")
    for (name, kind), t in remote.items():
        where = ("new empty root (first use: identifies nvcc, the host compiler and tvm-ffi)" if kind == "empty"
                 else "warm root (toolchain known, entry absent)")
        print(f"| remote hit, {name} on 127.0.0.1, second checkout, {where} | {ms(t)} | {ms(cold_m)} | "
              f"{t / cold_m:.4f} ({t / local_m:.1f}x the local hit) |")
    print(f"| unreachable server (connect never completes): cost reported by the warning | "
          f"{', '.join(f'{x:.0f} ms' for x in down_ms) or '?'} | | |")


if __name__ == "__main__":
    main()
