#!/usr/bin/env bash
# Benchmarks `tvmffi-jit inspect` (docs/benchmarks.md, section "inspect"):
#   1. a generated 2000-kernel, two-architecture fatbin (target: inspect --json <= 50 ms);
#   2. the toolkit's libcublasLt.so (541 MB, 5449 zstd ELF entries), against the
#      decompression floor (bench/inspect/floor.cpp: walk .nv_fatbin and decompress
#      every ELF entry, nothing else). Targets: -j1 within 1.5x of the floor; peak RSS <= 300 MB
#      at every -j (-j1, -j2, all cores, -j16 and -j32 are run); all cores >= 10x faster than
#      cuobjdump -res-usage.
# When cuobjdump is on PATH it is timed too and its kernel lists are compared with ours.
#
# Usage: bench/inspect/run.sh [BUILD_DIR]   (env: RUNS=5, BENCH_DIR=/tmp/tvmffi-jit-bench-inspect,
#                                            CUBLASLT=/usr/local/cuda/lib64/libcublasLt.so,
#                                            TOOL=prebuilt tvmffi-jit, FLOOR=prebuilt floor)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
RUNS=${RUNS:-5}
WORK=${BENCH_DIR:-/tmp/tvmffi-jit-bench-inspect}
CUBLASLT=${CUBLASLT:-/usr/local/cuda/lib64/libcublasLt.so}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
mkdir -p "$WORK"

# TOOL=path and FLOOR=path use prebuilt binaries (a machine without the build
# dependencies, e.g. the GPU machine, where cuobjdump is).
if [ -z "${TOOL:-}" ]; then
  if [ ! -f "$BUILD/build.ninja" ] && [ ! -f "$BUILD/Makefile" ]; then
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
  fi
  cmake --build "$BUILD" --target tvmffi-jit -j "$(nproc)" >&2
  TOOL=$BUILD/tvmffi-jit
fi
if [ -z "${FLOOR:-}" ]; then
  FLOOR=$WORK/floor
  if [ ! -x "$FLOOR" ] || [ bench/inspect/floor.cpp -nt "$FLOOR" ]; then
    ${CXX:-c++} -O2 -o "$FLOOR" bench/inspect/floor.cpp -lzstd -llz4
  fi
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

# The machine may be shared: every case runs RUNS times, the cases interleaved
# round-robin so that load changes hit them alike; the best wall time and the
# largest peak RSS (/usr/bin/time -v "Maximum resident set size") are kept.
declare -a NAMES CMDS
declare -A BEST RSS
add_case() { NAMES+=("$1"); shift; CMDS+=("$*"); }
measure() {  # index
  local cmd=${CMDS[$1]} t0 t1 m
  t0=$EPOCHREALTIME
  /usr/bin/time -o "$WORK/time.txt" -f "%M" $cmd >/dev/null 2>&1 || true
  t1=$EPOCHREALTIME
  m=$(tail -1 "$WORK/time.txt")
  local t; t=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}")
  if [ -z "${BEST[$1]:-}" ] || awk "BEGIN{exit !($t < ${BEST[$1]})}"; then BEST[$1]=$t; fi
  if [ "$m" -gt "${RSS[$1]:-0}" ]; then RSS[$1]=$m; fi
}

add_case "k2000.fatbin: inspect --json -j1" "$TOOL" inspect --json -j1 "$FATBIN"
add_case "k2000.fatbin: inspect --json (all cores)" "$TOOL" inspect --json "$FATBIN"
FLOOR_CASE=-
if [ -f "$CUBLASLT" ]; then
  FLOOR_CASE=${#NAMES[@]}
  add_case "libcublasLt: floor (decompress ELF entries)" "$FLOOR" "$CUBLASLT"
  add_case "libcublasLt: inspect --json -j1" "$TOOL" inspect --json -j1 "$CUBLASLT"
  J1_CASE=$((${#NAMES[@]} - 1))
  add_case "libcublasLt: inspect --json -j1 --no-ptx" "$TOOL" inspect --json -j1 --no-ptx "$CUBLASLT"
  add_case "libcublasLt: inspect --json -j2" "$TOOL" inspect --json -j2 "$CUBLASLT"
  ALL_CASE=${#NAMES[@]}
  add_case "libcublasLt: inspect --json (all $(nproc) cores)" "$TOOL" inspect --json "$CUBLASLT"
  TEXT_CASE=${#NAMES[@]}
  add_case "libcublasLt: inspect, text (all $(nproc) cores)" "$TOOL" inspect "$CUBLASLT"
  # Memory must not grow with threads, whatever the core count.
  add_case "libcublasLt: inspect --json -j16" "$TOOL" inspect --json -j16 "$CUBLASLT"
  add_case "libcublasLt: inspect --json -j32" "$TOOL" inspect --json -j32 "$CUBLASLT"
fi
if command -v cuobjdump >/dev/null; then
  add_case "k2000.fatbin: cuobjdump -res-usage" cuobjdump -res-usage "$FATBIN"
  if [ -f "$CUBLASLT" ]; then
    CUOBJDUMP_CASE=${#NAMES[@]}
    add_case "libcublasLt: cuobjdump -res-usage" cuobjdump -res-usage "$CUBLASLT"
  fi
fi
for _ in $(seq "$RUNS"); do
  for i in "${!NAMES[@]}"; do measure "$i"; done
done

echo
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), best of $RUNS interleaved runs"
echo
echo "| case | wall s | peak RSS | vs floor |"
echo "|---|---|---|---|"
for i in "${!NAMES[@]}"; do
  ratio=-
  case "${NAMES[$i]}" in libcublasLt:*) [ "$FLOOR_CASE" != - ] && ratio=$(awk "BEGIN{printf \"%.2fx\", ${BEST[$i]} / ${BEST[$FLOOR_CASE]}}") ;; esac
  printf "| %-44s | %6s | %6s MB | %6s |\n" "${NAMES[$i]}" "${BEST[$i]}" "$((RSS[$i] / 1024))" "$ratio"
done

if [ "$FLOOR_CASE" != - ]; then
  echo
  max_rss=0
  for i in "${!NAMES[@]}"; do
    case "${NAMES[$i]}" in "libcublasLt: inspect"*) [ "${RSS[$i]}" -gt "$max_rss" ] && max_rss=${RSS[$i]} ;; esac
  done
  awk "BEGIN{printf \"-j1 vs floor: %.2fx (target <= 1.5x)\n\", ${BEST[$J1_CASE]} / ${BEST[$FLOOR_CASE]}}"
  echo "largest inspect peak RSS over every -j: $((max_rss / 1024)) MB (target <= 300 MB)"
  if [ -n "${CUOBJDUMP_CASE:-}" ]; then
    awk "BEGIN{printf \"cuobjdump -res-usage vs inspect on all cores: %.1fx faster (target >= 10x)\n\", ${BEST[$CUOBJDUMP_CASE]} / ${BEST[$ALL_CASE]}}"
    awk "BEGIN{printf \"cuobjdump -res-usage vs inspect (text) on all cores: %.1fx faster\n\", ${BEST[$CUOBJDUMP_CASE]} / ${BEST[$TEXT_CASE]}}"
  fi
fi

if command -v cuobjdump >/dev/null; then
  echo
  for f in "$FATBIN" "$CUBLASLT"; do
    [ -f "$f" ] || continue
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
  echo "(cuobjdump not on PATH: cuobjdump timing and kernel-list comparison skipped)"
fi
