"""What bench.py and signing.py share: the tool runner, a clean environment,
the two checkouts of one module at different paths, and a "warm root" (a
cache root that has identified the toolchain but holds no entry)."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent

# Settings a developer's shell may carry that would change what is measured.
TOOL_SETTINGS = ("TVMFFI_JIT_CACHE_DIR", "TVMFFI_JIT_REMOTE", "TVMFFI_JIT_REMOTE_READ_ONLY", "TVMFFI_JIT_BASE_DIR",
                 "TVMFFI_JIT_REMOTE_SIGN_KEY", "TVMFFI_JIT_REMOTE_TRUSTED_KEYS", "AWS_ENDPOINT_URL",
                 "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION")


def clean_env():
    env = dict(os.environ)
    for v in TOOL_SETTINGS:
        env.pop(v, None)
    return env


def timed(argv, cwd=None, env=None):
    """Runs argv; (seconds, CompletedProcess); exits the bench on failure."""
    t = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(map(str, argv))}\n{p.stderr}")
    return dt, p


def make_checkouts(work):
    """The README CUDA example (a two-source C++ module where nvcc is missing)
    in checkout A, and a copy at another path (checkout B). (description, A, B)."""
    ck_a = work / "alice" / "proj"
    if shutil.which("nvcc"):
        what = "README example (cuda_add_one)"
        shutil.copytree(REPO / "share" / "tvmffi-jit" / "examples" / "cuda_add_one", ck_a)
    else:
        what = "2-source C++ module (no nvcc)"
        ck_a.mkdir(parents=True)
        (ck_a / "a.cc").write_text('#include <tvm/ffi/function.h>\nint64_t f(int64_t x) { return x + 1; }\n'
                                   "TVM_FFI_DLL_EXPORT_TYPED_FUNC(f, f);\n")
        (ck_a / "b.cc").write_text("int g() { return 2; }\n")
        (ck_a / "manifest.json").write_text(json.dumps({"name": "bench_mod", "sources": ["a.cc", "b.cc"]}))
    ck_b = work / "ci" / "runner-3" / "checkout"
    shutil.copytree(ck_a, ck_b)
    return what, ck_a, ck_b


def build_argv(tool, manifest, root, *extra):
    return [tool, "build", "-m", str(manifest), "--cache-dir", str(root), *map(str, extra)]


def strip_to_warm_root(root):
    """Removes the entries and stats a build left in `root`, keeping the
    toolchain memos: what a runner's node-local cache looks like before its
    first use of this entry."""
    for d in root.iterdir():
        if re.fullmatch(r".+_[0-9a-f]{16}", d.name) or d.name.startswith("stats"):
            shutil.rmtree(d) if d.is_dir() else d.unlink()
