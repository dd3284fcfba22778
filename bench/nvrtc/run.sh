#!/usr/bin/env bash
# NVRTC against nvcc, source to cubin: a 1-kernel file and a generated
# 200-kernel file. Prints a Markdown table (figures for docs/benchmarks.md).
#   bench/nvrtc/run.sh [tvmffi-jit binary] [extra bench.py options, e.g. --repeat 9 --arch 8.0]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TOOL=${1:-${TVMFFI_JIT_BIN:-$ROOT/build/tvmffi-jit}}
shift || true
echo "# $(nvcc --version | tail -n1); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec "${PYTHON:-python3}" "$ROOT/bench/nvrtc/bench.py" --tool "$TOOL" "$@"
