#!/usr/bin/env bash
# Times what a user of a checkout waits for (docs/benchmarks.md, "python"):
#   1. `pip install .` in a fresh clone of HEAD (into a new venv; pip's build
#      isolation installs scikit-build-core into a new temp folder), and
#   2. a second `pip wheel .` in that clone, nothing changed (a new isolated
#      environment again: what used to recompile everything),
# each with its wall time, the CPU time of the whole process tree (user+sys of
# pip and every compiler it waited for) and the number of compile commands
# ninja ran (the .ninja_log of build-wheel/ and build-wheel-tree/). CPU / cores is the wall time
# to expect on an idle machine of that many cores when the build keeps them busy,
# which is the figure to compare with a target on a machine shared with other work.
# CCACHE_DISABLE=1 measures a compile from scratch; without it, ccache serves
# what it has seen (the pip build uses ccache when it is installed).
#
# Usage: bench/python/wheel.sh   (env: CCACHE_DISABLE, PIP_FIND_LINKS/PIP_NO_INDEX for an offline wheelhouse)
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tvmffi-jit-bench-wheel-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
git clone -q . "$WORK/src"
python3 -m venv --system-site-packages "$WORK/venv"
PY="$WORK/venv/bin/python"
compiles() { cat "$WORK"/src/build-wheel/.ninja_log "$WORK"/src/build-wheel-tree/.ninja_log 2>/dev/null | cut -f4 | grep -c '\.o$' || true; }
timed() {  # label, command...: wall seconds, the process tree's CPU seconds, compile commands
  local label=$1; shift
  local before; before=$(compiles)
  /usr/bin/time -f "%e %U %S" -o "$WORK/time" "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
  read -r wall user sys <"$WORK/time"
  echo "$label: wall ${wall} s, CPU ${user}+${sys} s (idle $(nproc)-core estimate $(python3 -c "print(round(($user+$sys)/$(nproc)))") s), $(( $(compiles) - before )) compile commands"
}
echo "$(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg), CCACHE_DISABLE=${CCACHE_DISABLE:-}, $(git rev-parse --short HEAD)"
timed "pip install . (fresh clone)" "$PY" -m pip install -q --no-deps "$WORK/src"
cd "$WORK/src"
timed "second pip wheel . (same clone)" "$PY" -m pip wheel -q --no-deps . -w "$WORK/dist"
"$PY" -c "import tvmffi_jit; print('installed', tvmffi_jit.__version__)"
