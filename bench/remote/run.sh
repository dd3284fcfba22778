#!/usr/bin/env bash
# Benchmarks the remote cache tier (docs/benchmarks.md and docs/remote.md,
# section "remote"): for the README example module (CUDA; a C++ module when
# nvcc is absent), whole `tvmffi-jit build` processes for
#   a remote hit from redis-server, nginx (WebDAV) and SeaweedFS (S3, SigV4) on 127.0.0.1,
#   each from a second checkout into a warm second cache root (target <= 15 ms)
#   and into a new empty one (target <= 60 ms),
#   a local hit, and a cold build (the anchor), all in one run;
# plus what an unreachable server costs a build (the connect timeout).
#
# Usage: bench/remote/run.sh [BUILD_DIR]   (env: RUNS=30, COLD_RUNS=2, BENCH_DIR=<temp dir>)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$BUILD" --target tvmffi-jit -j "$(nproc)" >&2
WORK=${BENCH_DIR:-$(mktemp -d /tmp/tvmffi-jit-bench-remote-XXXXXX)}
exec python3 bench/remote/bench.py "$BUILD/tvmffi-jit" --runs "${RUNS:-30}" --cold-runs "${COLD_RUNS:-2}" --work "$WORK"
