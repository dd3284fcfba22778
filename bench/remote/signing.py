#!/usr/bin/env python3
"""What verifying a signature adds to a remote hit (docs/benchmarks.md,
"remote: signed entries"; target <= 1 ms).

The README example module (share/tvmffi-jit/examples/cuda_add_one; a
two-source C++ module when nvcc is not on PATH) is built in checkout A with
--remote-sign-key and uploaded, signed, to redis-server on 127.0.0.1. Then
whole `tvmffi-jit build` processes from checkout B (another path) take a remote
hit into a warm second root (toolchain memos present, the entry absent), the
same signed blob each time, alternately
  without trusted keys   (the signature is carried, not checked)
  with --remote-trusted-key (key file read, ed25519 verified over the manifest)
so the difference of the medians is what the check costs, measured under the
same machine state.

Usage: bench/remote/signing.py TOOL [--runs N] [--work DIR]
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(HERE))
import remote_servers  # noqa: E402
from common import build_argv, clean_env, make_checkouts, strip_to_warm_root, timed  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    tool = str(Path(a.tool).resolve())
    work = Path(a.work or tempfile.mkdtemp(prefix="tvmffi-jit-bench-signing-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = clean_env()
    what, ckA, ckB = make_checkouts(work)
    keys = work / "keys"
    keys.mkdir()
    timed([tool, "cache", "keygen", "ci", "--out", str(keys)], env=env)

    def build(manifest, root, *extra):
        return build_argv(tool, manifest, root, *extra)

    with remote_servers.server("redis", work / "redis") as redis:
        timed(build(ckA / "manifest.json", work / "rootA", "--remote", redis.url, "--remote-sign-key",
                    keys / "ci.sec"), cwd=ckA, env=env)
        template = work / "template"
        timed(build(ckB / "manifest.json", template, "--remote", redis.url, "--remote-read-only"), cwd=ckB, env=env)
        strip_to_warm_root(template)
        modes = {"unchecked": [], "verified": []}
        for i in range(a.runs):
            for mode in (("unchecked", "verified") if i % 2 == 0 else ("verified", "unchecked")):
                root = work / f"b-{mode}-{i}"
                shutil.copytree(template, root, symlinks=True)
                extra = ["--remote-trusted-key", keys / "ci.pub"] if mode == "verified" else []
                dt, p = timed(build(ckB / "manifest.json", root, "--remote", redis.url, "--remote-read-only", "--json",
                                    *extra), cwd=ckB, env=env)
                assert json.loads(p.stdout)["cache"] == "remote-hit", p.stderr
                modes[mode].append(dt)
                shutil.rmtree(root)

    u, v = statistics.median(modes["unchecked"]), statistics.median(modes["verified"])
    print(f"module: {what}; Redis on 127.0.0.1, warm second root; median of {a.runs} processes each, interleaved\n")
    print("| remote hit | median | p25-p75 |")
    print("|---|---|---|")
    for name, t in (("signed blob, no trusted key (signature not checked)", modes["unchecked"]),
                    ("signed blob, --remote-trusted-key (ed25519 verified)", modes["verified"])):
        q = statistics.quantiles(t, n=4)
        print(f"| {name} | {statistics.median(t) * 1000:.2f} ms | {q[0] * 1000:.2f}-{q[2] * 1000:.2f} ms |")
    print(f"\nadded by verification: {(v - u) * 1000:+.2f} ms (target <= 1 ms)")


if __name__ == "__main__":
    main()
