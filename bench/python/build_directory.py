"""Repeated build_inline(..., build_directory=D) with nothing changed:
tvmffi_jit against tvm_ffi.cpp, in one process, same source, each in its own
directory (docs/benchmarks.md, "python: build_directory").

Usage: python3 bench/python/build_directory.py BINARY [--runs 40] [--work DIR]
Prints one JSON object: median/min/max milliseconds per repeated call for both,
and the ratio (tvmffi_jit / tvm_ffi).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

SOURCE = r"""
void add_one_cpu(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  for (int64_t i = 0; i < x.size(0); ++i)
    static_cast<float*>(y.data_ptr())[i] = static_cast<float*>(x.data_ptr())[i] + 1;
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    os.environ["TVMFFI_JIT_BIN"] = os.path.abspath(a.binary)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    import tvm_ffi.cpp
    import tvmffi_jit

    work = Path(a.work or tempfile.mkdtemp(prefix="tvmffi-jit-bench-builddir-"))
    kw = dict(cpp_sources=SOURCE, functions=["add_one_cpu"])
    ours = lambda: tvmffi_jit.build_inline("bd_bench", build_directory=str(work / "jit"), **kw)  # noqa: E731
    theirs = lambda: tvm_ffi.cpp.build_inline("bd_bench", build_directory=str(work / "tvm_ffi"), **kw)  # noqa: E731
    first = {}
    for name, fn in (("tvmffi_jit", ours), ("tvm_ffi", theirs)):
        t = time.perf_counter()
        fn()  # the first call compiles
        first[name] = round(time.perf_counter() - t, 2)
    result = {"runs": a.runs, "first_call_s": first}
    # Interleaved rounds so that machine load hits both alike.
    samples = {"tvmffi_jit": [], "tvm_ffi": []}
    for _ in range(a.runs):
        for name, fn in (("tvmffi_jit", ours), ("tvm_ffi", theirs)):
            t = time.perf_counter()
            fn()
            samples[name].append((time.perf_counter() - t) * 1e3)
    for name, xs in samples.items():
        result[name] = {"median_ms": round(statistics.median(xs), 2), "min_ms": round(min(xs), 2),
                        "max_ms": round(max(xs), 2)}
    result["ratio_median"] = round(result["tvmffi_jit"]["median_ms"] / result["tvm_ffi"]["median_ms"], 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
