#!/usr/bin/env python3
"""Where an in-process hit's time goes (docs/benchmarks.md, "python").

One process, the README inline example, after a build and a warm-up:
  * build_inline's hit, whole (what a user calls);
  * the engine alone, asked with the argv build_inline sends (ctypes, JSON);
  * the Python around it: the first minus the second;
  * the engine's own view: the same argv with `--json` timings off, asked
    through the C ABI without Python's JSON (the ctypes call only);
then cProfile of --calls build_inline hits, the top functions by own time.
With --import-torch, torch is imported first (as on a GPU user's machine).

Usage: hit_profile.py [TOOL] [--calls N] [--import-torch] [--work DIR]
  TOOL: a build tree's tvmffi-jit (the engine library beside it).
"""

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[2]
README_SOURCE = "int64_t add(int64_t a, int64_t b) { return a + b; }"


def median_ms(fn, calls):
    ts = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool", nargs="?")
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--import-torch", action="store_true")
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="hit-profile-"))
    os.environ["TVMFFI_JIT_CACHE_DIR"] = str(work / "cache")
    if args.tool:
        os.environ["TVMFFI_JIT_BIN"] = str(Path(args.tool).resolve())
        sys.path.insert(0, str(SOURCE_DIR / "python"))
    if args.import_torch:
        import torch  # noqa: F401

    import tvmffi_jit as jit
    from tvmffi_jit import _api, _engine

    def hit():
        jit.build_inline("readme_add", cpp_sources=README_SOURCE, functions=["add"])

    hit()  # builds (a miss) or hits
    time.sleep(2.2)  # stamps are trusted once 2 s old
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:
        hit()

    # The argv build_inline sends, recorded from one call.
    sent = []
    real_run = _engine.run
    _engine.run = lambda argv: sent.append(argv) or real_run(argv)
    hit()
    _engine.run = real_run
    argv = sent[0]

    whole = median_ms(hit, args.calls)
    engine = median_ms(lambda: _engine.run(argv), args.calls)
    lib, ctypes = _engine._load()
    import json

    request = json.dumps({"argv": argv}).encode()

    def bare():
        out = ctypes.c_void_p()
        lib.tvmffi_jit_run(request, ctypes.byref(out))
        lib.tvmffi_jit_free(out)

    c_only = median_ms(bare, args.calls)
    manifest_only = median_ms(lambda: _api._write_manifest({"name": "x", "cpp_sources": [README_SOURCE]}), args.calls)
    print(f"python {sys.version.split()[0]}, torch imported: {'torch' in sys.modules}, calls {args.calls}")
    print(f"build_inline hit, whole        {whole:.3f} ms")
    print(f"engine via _engine.run         {engine:.3f} ms")
    print(f"engine, ctypes call only       {c_only:.3f} ms")
    print(f"python around the engine       {whole - engine:.3f} ms")
    print(f"_write_manifest (memo hit)     {manifest_only:.3f} ms")

    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.calls):
        hit()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(25)
    print(s.getvalue())


if __name__ == "__main__":
    main()
