#!/usr/bin/env bash
# Benchmarks the module cache (docs/benchmarks.md, section "cache"):
#   1. hit latency: median of RUNS (>= 50) whole `tvmffi-jit build` processes for a
#      2-source manifest in the cache; target <= 5 ms (spawn floor shown beside it);
#   2. cold build (a miss: every unit compiled and published) against the same
#      compiler commands run directly, both -j1; target <= 3 % overhead;
#   3. one of eight sources changed: one compile + link, against all eight.
#   4. re-hashing the module artifact on a hit; 5. the README CUDA hit with its
#      link-input and shadow records against without them (RECORDS_ONLY=1: 5 alone).
#
# Usage: bench/cache/run.sh [BUILD_DIR]   (env: RUNS=60, COLD_RUNS=5, BENCH_DIR=<temp dir>)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$BUILD" --target tvmffi-jit -j "$(nproc)" >&2
WORK=${BENCH_DIR:-$(mktemp -d /tmp/tvmffi-jit-bench-cache-XXXXXX)}
exec python3 bench/cache/bench.py "$BUILD/tvmffi-jit" --runs "${RUNS:-60}" --cold-runs "${COLD_RUNS:-5}" --work "$WORK" \
  ${RECORDS_ONLY:+--records-only}
