#!/usr/bin/env bash
# Benchmarks `tvmffi-jit inspect` (docs/benchmarks.md, section "inspect"):
#   1. a generated 2000-kernel, two-architecture fatbin (target: inspect --json <= 50 ms);
#   2. the toolkit's libcublasLt.so (541 MB, 5449 zstd ELF entries), against the
#      decompression floor (bench/inspect/floor.cpp: walk .nv_fatbin and decompress
#      every ELF entry, nothing else). Targets: -j1 within 1.5x of the floor, peak RSS <= 300 MB.
# When cuobjdump is on PATH it is timed too and its kernel lists are compared with ours.
#
# Usage: bench/inspect/run.sh [BUILD_DIR]   (env: RUNS=5, BENCH_DIR=/tmp/tvmffi-jit-bench-inspect,
#                                            CUBLASLT=/usr/local/cuda/lib64/libcublasLt.so)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
RUNS=${RUNS:-5}
WORK=${BENCH_DIR:-/tmp/tvmffi-jit-bench-inspect}
CUBLASLT=${CUBLASLT:-/usr/local/cuda/lib64/libcublasLt.so}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$WORK"

if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$BUILD" --target tvmffi-jit -j "$(nproc)" >&2
TOOL=$BUILD/tvmffi-jit
FLOOR=$WORK/floor
if [ ! -x "$FLOOR" ] || [ bench/inspect/floor.cpp -nt "$FLOOR" ]; then
  ${CXX:-c++} -O2 -o "$FLOOR" bench/inspect/floor.cpp -lzstd -llz4
fi

# 2000 kernels (explicit template instantiations), sm_90 + sm_100a SASS.
FATBIN=$WORK/k2000.fatbin
if [ ! -f "$FATBIN" ]; then
  {
    echo 'template <int N> __global__ void kern(float* o, int n) { if (threadIdx.x < n) o[threadIdx.x] += N; }'
    for i in $(seq 0 1999); do echo "template __global__ void kern<$i>(float*, int);"; done
  } > "$WORK/k2000.cu"
  echo "generating $FATBIN (nvcc, about a minute)" >&2
  "$NVCC" -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_100a,code=sm_100a \
    -o "$FATBIN" "$WORK/k2000.cu"
fi

# best_of CMD... -> "<min wall s> <max RSS KB>" over $RUNS runs (output discarded).
best_of() {
  local best="" rss=0 line t m
  for _ in $(seq "$RUNS"); do
    line=$( { /usr/bin/time -f "%e %M" "$@" >/dev/null 2>/dev/null; } 2>&1 | tail -1)
    t=${line% *}; m=${line#* }
    if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  echo "$best $rss"
}
# /usr/bin/time prints the command's stderr before its own line; keep only ours.
row() {  # name floor_s result
  local name=$1 floor=$2 t=${3% *} m=${3#* }
  local ratio=-
  [ "$floor" != - ] && ratio=$(awk "BEGIN{printf \"%.2fx\", $t / $floor}")
  printf "| %-44s | %8s | %9s | %8s |\n" "$name" "$t" "$((m / 1024)) MB" "$ratio"
}

echo
echo "| case | wall s (best of $RUNS) | peak RSS | vs floor |"
echo "|---|---|---|---|"
r=$(best_of "$TOOL" inspect --json -j1 "$FATBIN"); row "k2000.fatbin: inspect --json -j1" - "$r"
r=$(best_of "$TOOL" inspect --json "$FATBIN"); row "k2000.fatbin: inspect --json (all cores)" - "$r"
if [ -f "$CUBLASLT" ]; then
  f=$(best_of "$FLOOR" "$CUBLASLT"); floor=${f% *}
  row "libcublasLt: floor (decompress ELF entries)" "$floor" "$f"
  r=$(best_of "$TOOL" inspect --json -j1 "$CUBLASLT"); row "libcublasLt: inspect --json -j1" "$floor" "$r"
  r=$(best_of "$TOOL" inspect --json -j1 --no-ptx "$CUBLASLT"); row "libcublasLt: inspect --json -j1 --no-ptx" "$floor" "$r"
  r=$(best_of "$TOOL" inspect --json "$CUBLASLT"); row "libcublasLt: inspect --json (all cores)" "$floor" "$r"
fi

if command -v cuobjdump >/dev/null; then
  for f in "$FATBIN" "$CUBLASLT"; do
    [ -f "$f" ] || continue
    r=$(best_of cuobjdump -res-usage "$f"); row "$(basename "$f"): cuobjdump -res-usage" - "$r"
    cuobjdump -res-usage "$f" > "$WORK/cuobjdump.txt" 2>&1 || true
    "$TOOL" inspect --json "$f" > "$WORK/inspect.json" || true
    python3 - "$WORK/cuobjdump.txt" "$WORK/inspect.json" <<'PY'
import json, re, sys
theirs = sorted(re.findall(r"^ Function ([^:]+):$", open(sys.argv[1]).read(), re.M))
doc = json.load(open(sys.argv[2]))["files"][0]
ours = sorted(k["name"] for e in doc["entries"] if e["kind"] == "elf" for k in e["kernels"])
print(f"kernel lists: cuobjdump {len(theirs)}, inspect {len(ours)}: {'identical' if theirs == ours else 'DIFFERENT'}")
PY
  done
else
  echo
  echo "(cuobjdump not on PATH: comparison skipped)"
fi
