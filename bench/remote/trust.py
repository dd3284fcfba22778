#!/usr/bin/env python3
"""What the trust checks cost a hit (docs/benchmarks.md, "remote: the trust
policy at every door"): provenance, the policy applied at the local door, the
paths an adopted entry may name, and the keyed flag inputs.

The README example module (a two-source C++ module when nvcc is not on PATH)
is built in checkout A with --remote-sign-key and uploaded, signed, to
redis-server on 127.0.0.1; checkout B adopts it with --remote-trusted-key into
its own root. Then whole `tvmffi-jit build` processes, interleaved, N each:

  local hit, no keys                        (B's root: the adopted entry)
  local hit, --remote-trusted-key           (the adopted entry's signature verified at the local door)
  local hit, --remote-sign-key              (A's root: the built entry's own signature verified)
  remote hit, warm root, --remote-trusted-key
  remote hit, warm root, no keys

With --baseline TOOL (a build of the main branch before these checks), the
two no-key rows are measured with it too, in the same interleaving, so the
difference is what the checks cost when no key is configured.

Usage: bench/remote/trust.py TOOL [--baseline TOOL] [--runs N] [--work DIR]
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
    ap.add_argument("--baseline", default=None)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    tools = {"new": str(Path(a.tool).resolve())}
    if a.baseline:
        tools["main"] = str(Path(a.baseline).resolve())
    work = Path(a.work or tempfile.mkdtemp(prefix="tvmffi-jit-bench-trust-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = clean_env()
    what, ck_a, ck_b = make_checkouts(work)
    keys = work / "keys"
    keys.mkdir()
    timed([tools["new"], "cache", "keygen", "ci", "--out", str(keys)], env=env)
    sign = ["--remote-sign-key", keys / "ci.sec"]
    trust = ["--remote-trusted-key", keys / "ci.pub"]
    times = {}

    def sample(name, argv, cwd, want):
        dt, p = timed(argv + ["--json"], cwd=cwd, env=env)
        got = json.loads(p.stdout)["cache"]
        assert got == want, f"{name}: {got}\n{p.stderr}"
        times.setdefault(name, []).append(dt)

    with remote_servers.server("redis", work / "redis") as redis:
        setups = {}
        for label, tool in tools.items():
            ns = ["--remote-namespace", label]
            root_a, root_b, warm = work / f"{label}-rootA", work / f"{label}-rootB", work / f"{label}-warm"
            a_sign = sign if label == "new" else []
            timed(build_argv(tool, ck_a / "manifest.json", root_a, "--remote", redis.url, *ns, *a_sign), cwd=ck_a,
                  env=env)
            b_trust = trust if label == "new" else []
            timed(build_argv(tool, ck_b / "manifest.json", root_b, "--remote", redis.url, "--remote-read-only", *ns,
                             *b_trust), cwd=ck_b, env=env)
            shutil.copytree(root_b, warm, symlinks=True)
            strip_to_warm_root(warm)
            setups[label] = (tool, ns, root_a, root_b, warm)
        for i in range(a.runs):
            order = list(setups.items()) if i % 2 == 0 else list(reversed(setups.items()))
            for label, (tool, ns, root_a, root_b, warm) in order:
                sample(f"{label}: local hit, no keys", build_argv(tool, ck_b / "manifest.json", root_b), ck_b, "hit")
                root = work / f"{label}-r{i}"
                shutil.copytree(warm, root, symlinks=True)
                sample(f"{label}: remote hit, warm root, no keys",
                       build_argv(tool, ck_b / "manifest.json", root, "--remote", redis.url, "--remote-read-only",
                                  *ns), ck_b, "remote-hit")
                shutil.rmtree(root)
                if label != "new":
                    continue
                sample("new: local hit, --remote-trusted-key (adopted entry verified)",
                       build_argv(tool, ck_b / "manifest.json", root_b, *trust), ck_b, "hit")
                sample("new: local hit, --remote-sign-key (own signature verified)",
                       build_argv(tool, ck_a / "manifest.json", root_a, *sign), ck_a, "hit")
                shutil.copytree(warm, root, symlinks=True)
                sample("new: remote hit, warm root, --remote-trusted-key",
                       build_argv(tool, ck_b / "manifest.json", root, "--remote", redis.url, "--remote-read-only",
                                  *ns, *trust), ck_b, "remote-hit")
                shutil.rmtree(root)

    print(f"module: {what}; Redis on 127.0.0.1; median of {a.runs} whole processes each, interleaved\n")
    print("| measurement | median | p25-p75 |")
    print("|---|---|---|")
    for name, t in times.items():
        q = statistics.quantiles(t, n=4)
        print(f"| {name} | {statistics.median(t) * 1000:.2f} ms | {q[0] * 1000:.2f}-{q[2] * 1000:.2f} ms |")


if __name__ == "__main__":
    main()
