#!/usr/bin/env bash
# Whole-process `tvmffi-jit inspect --load` on a small cubin against the floor
# (floor.c: the same driver calls in one minimal C process). Needs a GPU.
#
#   bench/driver/run.sh [FILE]     FILE defaults to a 5-kernel sm_XY cubin built
#                                  from tests/gpu/kernels.cu with nvcc
# Environment: TVMFFI_JIT_BIN (default build/tvmffi-jit), RUNS (default 15), CC (default cc).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${TVMFFI_JIT_BIN:-$ROOT/build/tvmffi-jit}
W=$(mktemp -d "${TMPDIR:-/tmp}/tvmffi-jit-bench-driver.XXXXXX")
trap 'rm -rf "$W"' EXIT
"${CC:-cc}" -O2 -o "$W/floor" "$ROOT/bench/driver/floor.c" -ldl
FILE=${1:-}
if [[ -z $FILE ]]; then
  arch=sm_$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader -i 0 | tr -d ' .')
  nvcc -cubin -arch="$arch" -o "$W/bench.cubin" "$ROOT/tests/gpu/kernels.cu"
  FILE=$W/bench.cubin
fi
echo "== text output"
python3 "$ROOT/bench/driver/bench.py" --runs "${RUNS:-15}" --tool "$BIN" --floor "$W/floor" "$FILE"
echo "== --json"
python3 "$ROOT/bench/driver/bench.py" --json --runs "${RUNS:-15}" --tool "$BIN" --floor "$W/floor" "$FILE"
