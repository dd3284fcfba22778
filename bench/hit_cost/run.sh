#!/usr/bin/env bash
# What a cache hit costs against the artifact's size, after a metadata-only
# change, and against tvm_ffi.cpp in-process (docs/benchmarks.md, "hit cost").
#
# Usage: bench/hit_cost/run.sh [BUILD_DIR]   (env: RUNS=30, BENCH_DIR=<temp dir>, CHMOD_SYSTEM=1: chmod system
#        inputs too, as root on a throwaway machine)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$BUILD" --target tvmffi-jit tvmffi_jit_engine -j "$(nproc)" >&2
WORK=${BENCH_DIR:-$(mktemp -d /tmp/tvmffi-jit-bench-hit-XXXXXX)}
exec python3 bench/hit_cost/bench.py "$BUILD/tvmffi-jit" --runs "${RUNS:-30}" --work "$WORK" ${CHMOD_SYSTEM:+--chmod-system}
