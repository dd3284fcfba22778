#!/usr/bin/env bash
# Benchmarks tvmffi_jit.load_inline/build_inline against tvm_ffi.cpp's, hit and
# cold, each in fresh Python processes (docs/benchmarks.md, section "python").
#
# Usage: bench/python/run.sh [BUILD_DIR]   (env: RUNS=20, COLD_RUNS=3, BENCH_DIR=<temp dir>)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
# The engine library too: without it beside the binary every hit would run the binary.
cmake --build "$BUILD" --target tvmffi-jit tvmffi_jit_engine -j "$(nproc)" >&2
WORK=${BENCH_DIR:-$(mktemp -d /tmp/tvmffi-jit-bench-python-XXXXXX)}
exec python3 bench/python/bench.py "$BUILD/tvmffi-jit" --runs "${RUNS:-20}" --cold-runs "${COLD_RUNS:-3}" --work "$WORK"
