#!/usr/bin/env python3
"""What the tvm-ffi precompiled header (docs/build.md, "Precompiled headers")
saves a user who builds small C++ modules one after another, as a notebook or
a test suite does: N one-function modules, each a cold miss (its own source),
built by separate `tvmffi-jit build` commands with the default flags, with the
PCH (`TVMFFI_JIT_PCH_DIR` in a fresh folder: the first compile notes the flag
set, the second builds the PCH, the rest load it) and without (`off`). Also
the floor: tvm_ffi.cpp.build's own compile of the same source
(`g++ -std=c++17 -fPIC -O2 -I... -c`, no link), timed once per module.

Usage: python3 bench/pch/cold_modules.py build/tvmffi-jit [--modules 12] [--rounds 2]
Prints wall and CPU seconds per mode (sum over the modules) and the ratio.
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu_of_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv, env, cwd):
    c0, t0 = cpu_of_children(), time.perf_counter()
    p = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, argv))} failed:\n{p.stderr}")
    return time.perf_counter() - t0, cpu_of_children() - c0


def run_mode(tool, n, pch, work, tag):
    env = dict(os.environ, TVMFFI_JIT_PCH_DIR=pch)
    wall = cpu = 0.0
    for i in range(n):
        src = work / f"{tag}_{i}.cc"
        src.write_text(f"int64_t f{i}(int64_t x) {{ return x + {i}; }}\n")
        w, c = timed([tool, "build", src, "--function", f"f{i}", "--cache-dir", work / f"cache-{tag}"], env, work)
        wall, cpu = wall + w, cpu + c
    return wall, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--modules", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    tool = str(Path(a.tool).resolve())
    inc = subprocess.run(["tvm-ffi-config", "--includedir"], capture_output=True, text=True, check=True).stdout.strip()
    results = {"pch": [], "off": [], "floor": []}
    for r in range(a.rounds):
        with tempfile.TemporaryDirectory() as d:
            work = Path(d)
            results["pch"].append(run_mode(tool, a.modules, str(work / "pch"), work, f"pch{r}"))
            results["off"].append(run_mode(tool, a.modules, "off", work, f"off{r}"))
            wall = cpu = 0.0
            for i in range(a.modules):
                src = work / f"floor_{i}.cc"
                src.write_text("#include <tvm/ffi/container/tensor.h>\n#include <tvm/ffi/function.h>\n"
                               f"int64_t f{i}(int64_t x) {{ return x + {i}; }}\n"
                               f"TVM_FFI_DLL_EXPORT_TYPED_FUNC(f{i}, f{i});\n")
                w, c = timed(["g++", "-std=c++17", "-fPIC", "-O2", f"-I{inc}", "-c", src, "-o", work / f"floor_{i}.o"],
                             os.environ, work)
                wall, cpu = wall + w, cpu + c
            results["floor"].append((wall, cpu))
    print(f"{a.modules} cold one-function C++ modules, separate commands, best of {a.rounds} rounds")
    best = {k: min(v) for k, v in results.items()}
    for k in ("off", "pch", "floor"):
        print(f"  {k:6s} wall {best[k][0]:6.2f} s  CPU {best[k][1]:6.2f} s")
    print(f"  pch/off wall {best['pch'][0] / best['off'][0]:.2f}x, pch/floor wall {best['pch'][0] / best['floor'][0]:.2f}x")


if __name__ == "__main__":
    main()
