#!/usr/bin/env bash
# `tvmffi-jit inspect` on hostile input (docs/benchmarks.md, section "inspect on hostile input"):
# every input of tests/integration/hostile_inputs.py (decompression bombs, huge entry, section and
# symbol counts, overlapping sections and blobs, fatbin lookalikes, archives sharing one long
# name) plus a FIFO, each run under /usr/bin/time. Targets: every case <= 1 s wall and <= 200 MB
# peak RSS on the 2-core CI machine, and the exit code and message the tests expect. The anchor is
# `inspect` of the a90.cubin oracle in the same run (process start-up and a real parse).
#
# Usage: bench/hostile/run.sh [BUILD_DIR]   (env: RUNS=3, BENCH_DIR=/tmp/tvmffi-jit-bench-hostile,
#                                            TOOL=prebuilt tvmffi-jit, BASELINE=an older tvmffi-jit to
#                                            compare with, run with a 20 s timeout per case)
# Exits 1 when a case misses a target (so CI can run it).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
RUNS=${RUNS:-3}
WORK=${BENCH_DIR:-/tmp/tvmffi-jit-bench-hostile}
MAX_S=${MAX_S:-1.0}
MAX_MB=${MAX_MB:-200}
if [ -z "${TOOL:-}" ]; then
  cmake --build "$BUILD" --target tvmffi-jit >&2
  TOOL=$BUILD/tvmffi-jit
fi
rm -rf "$WORK"
mkdir -p "$WORK/in"
python3 tests/integration/hostile_inputs.py "$WORK/in" > "$WORK/cases.txt"
mkfifo "$WORK/in/fifo.cubin"
echo 'fifo.cubin|0||3|not a regular file (a FIFO)' >> "$WORK/cases.txt"
ANCHOR=tests/fixtures/oracles/a90.cubin

# run TOOL CASE-ARGS... -> "wall_s rss_mb rc"; best wall and largest RSS over RUNS.
measure() {
  local tool=$1 timeout=$2; shift 2
  local best="" rss=0 rc t0 t1 t m
  for _ in $(seq "$RUNS"); do
    t0=$EPOCHREALTIME
    rc=0
    /usr/bin/time -o "$WORK/time.txt" -f "%M" timeout "$timeout" "$tool" inspect "$@" >/dev/null 2>"$WORK/err.txt" || rc=$?
    t1=$EPOCHREALTIME
    t=$(awk "BEGIN{printf \"%.3f\", $t1 - $t0}")
    m=$(tail -1 "$WORK/time.txt" | grep -Eo '^[0-9]+$' || echo 0)
    if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  echo "$best $((rss / 1024)) $rc"
}

read -r anchor_s anchor_mb _ <<< "$(measure "$TOOL" 20 "$ANCHOR")"
echo
echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), best of $RUNS runs; anchor: inspect a90.cubin ${anchor_s} s, ${anchor_mb} MB"
echo
header="| input | size | exit | wall s | vs anchor | peak RSS MB |"
sep="|---|---|---|---|---|---|"
if [ -n "${BASELINE:-}" ]; then header="$header before: wall s | before: RSS MB | before: exit |"; sep="$sep---|---|---|"; fi
echo "$header"
echo "$sep"
failed=0
while IFS='|' read -r name size args code expect; do
  file=$WORK/in/$name
  # shellcheck disable=SC2086
  read -r s mb rc <<< "$(measure "$TOOL" 20 -j2 $args "$file")"
  grep -qF -- "$expect" "$WORK/err.txt" || [ "$code" = 0 ] || { echo "  $name: message lacks '$expect': $(head -c 300 "$WORK/err.txt")" >&2; failed=1; }
  ok=""
  if [ "$rc" != "$code" ] || awk "BEGIN{exit !($s > $MAX_S)}" || [ "$mb" -gt "$MAX_MB" ]; then ok=" **MISSED**"; failed=1; fi
  row="| $name | $((size / 1024)) KB | $rc$ok | $s | $(awk "BEGIN{printf \"%.1fx\", $s / $anchor_s}") | $mb |"
  if [ -n "${BASELINE:-}" ]; then
    # shellcheck disable=SC2086
    read -r bs bmb brc <<< "$(RUNS=1 measure "$BASELINE" 20 -j2 $args "$file")"
    [ "$brc" = 124 ] && bs=">20 (killed)"
    row="$row $bs | $bmb | $brc |"
  fi
  echo "$row"
done < "$WORK/cases.txt"
echo
echo "targets: every case <= ${MAX_S} s and <= ${MAX_MB} MB with the expected exit code and message: $([ $failed = 0 ] && echo met || echo MISSED)"
exit $failed
