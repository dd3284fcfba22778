#!/usr/bin/env bash
# Clean-build time of the tvmffi-jit binary, two revisions back to back, for
# docs/benchmarks.md ("Build and CI time").
#
#   bench/buildtime/clean_build.sh [BASE_REV [HEAD_REV]]    (default: HEAD~1, HEAD)
#
# Each revision is exported (git archive) to a temp dir, configured like
# scripts/setup.sh does (Ninja, RelWithDebInfo) and built from scratch with
# `ninja -j JOBS tvmffi-jit`, ccache off. Both builds run inside one hold of
# the shared build lock (BUILD_LOCK, default /tmp/tvmffi-build.lock) so they
# see the same machine; `uptime` before and after each shows the load.
# Prints a Markdown table on stdout: wall time, objects, the sum of the
# per-object compile times (.ninja_log), the slowest objects.
# Environment: JOBS (default 2), BUILD_LOCK, KEEP=1 keeps the temp dirs.
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE=${1:-HEAD~1}
HEAD_REV=${2:-HEAD}
JOBS=${JOBS:-2}
LOCK=${BUILD_LOCK:-/tmp/tvmffi-build.lock}
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH" CCACHE_DISABLE=1
unset CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER

work=$(mktemp -d)
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$work"' EXIT
declare -A rev=([base]=$BASE [head]=$HEAD_REV)
for t in base head; do
  mkdir -p "$work/$t"
  git archive "${rev[$t]}" | tar -x -C "$work/$t"
  cmake -S "$work/$t" -B "$work/$t/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$work/$t.configure.log" 2>&1
done

# One lock hold for both builds: the same conditions, and nobody else's build in between.
exec 9>"$LOCK"
flock 9
for t in base head; do
  uptime >"$work/$t.load-before"
  start=$(date +%s.%N)
  ninja -C "$work/$t/build" -j "$JOBS" tvmffi-jit >"$work/$t.build.log" 2>&1 || {
    echo "clean_build: building ${rev[$t]} failed: see $work/$t.build.log" >&2; KEEP=1; exit 1; }
  end=$(date +%s.%N)
  echo "$start $end" >"$work/$t.wall"
  uptime >"$work/$t.load-after"
done
flock -u 9

python3 - "$work" "$BASE" "$HEAD_REV" "$JOBS" <<'EOF'
import sys, pathlib
work, base, head, jobs = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
rows = {}
for t in ("base", "head"):
    s, e = map(float, (work / f"{t}.wall").read_text().split())
    times = {}
    for line in (work / t / "build/.ninja_log").read_text().splitlines()[1:]:
        a, b, _, out, _ = line.split("\t")
        if out.endswith(".o"):
            times[out] = (int(b) - int(a)) / 1000
    load = lambda f: (work / f).read_text().split("load average:")[1].split(",")[0].strip()
    rows[t] = (e - s, times, load(f"{t}.load-before"), load(f"{t}.load-after"))
print(f"| | {base} | {head} |\n|---|---|---|")
print(f"| wall, `ninja -j {jobs} tvmffi-jit` | {rows['base'][0]:.1f} s | {rows['head'][0]:.1f} s "
      f"({rows['head'][0] / rows['base'][0]:.2f}x) |")
print(f"| objects | {len(rows['base'][1])} | {len(rows['head'][1])} |")
sb, sh = sum(rows['base'][1].values()), sum(rows['head'][1].values())
print(f"| sum of compile times | {sb:.0f} s | {sh:.0f} s ({sh / sb:.2f}x) |")
print(f"| 1-min load before / after | {rows['base'][2]} / {rows['base'][3]} | {rows['head'][2]} / {rows['head'][3]} |")
for t in ("base", "head"):
    top = sorted(rows[t][1].items(), key=lambda kv: -kv[1])[:6]
    print(f"\nslowest objects, {t}: " + ", ".join(f"{k.split('/')[-1]} {v:.1f} s" for k, v in top))
EOF
