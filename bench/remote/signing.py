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
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))
import remote_servers  # noqa: E402


def timed(argv, cwd=None, env=None):
    t = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(map(str, argv))}\n{p.stderr}")
    return dt, p


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
    env = dict(os.environ)
    for v in ("TVMFFI_JIT_CACHE_DIR", "TVMFFI_JIT_REMOTE", "TVMFFI_JIT_REMOTE_READ_ONLY", "TVMFFI_JIT_BASE_DIR",
              "TVMFFI_JIT_REMOTE_SIGN_KEY", "TVMFFI_JIT_REMOTE_TRUSTED_KEYS"):
        env.pop(v, None)

    example = REPO / "share" / "tvmffi-jit" / "examples" / "cuda_add_one"
    ckA = work / "alice" / "proj"
    if shutil.which("nvcc"):
        what = "README example (cuda_add_one)"
        shutil.copytree(example, ckA)
    else:
        what = "2-source C++ module (no nvcc)"
        ckA.mkdir(parents=True)
        (ckA / "a.cc").write_text('#include <tvm/ffi/function.h>\nint64_t f(int64_t x) { return x + 1; }\n'
                                  "TVM_FFI_DLL_EXPORT_TYPED_FUNC(f, f);\n")
        (ckA / "b.cc").write_text("int g() { return 2; }\n")
        (ckA / "manifest.json").write_text(json.dumps({"name": "bench_mod", "sources": ["a.cc", "b.cc"]}))
    ckB = work / "ci" / "runner-3" / "checkout"
    shutil.copytree(ckA, ckB)
    keys = work / "keys"
    keys.mkdir()
    timed([tool, "cache", "keygen", "ci", "--out", str(keys)], env=env)

    def build(manifest, root, *extra):
        return [tool, "build", "-m", str(manifest), "--cache-dir", str(root), *map(str, extra)]

    with remote_servers.server("redis", work / "redis") as redis:
        timed(build(ckA / "manifest.json", work / "rootA", "--remote", redis.url, "--remote-sign-key",
                    keys / "ci.sec"), cwd=ckA, env=env)
        template = work / "template"
        timed(build(ckB / "manifest.json", template, "--remote", redis.url, "--remote-read-only"), cwd=ckB, env=env)
        for d in template.iterdir():
            if re.fullmatch(r".+_[0-9a-f]{16}", d.name) or d.name.startswith("stats"):
                shutil.rmtree(d) if d.is_dir() else d.unlink()
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
