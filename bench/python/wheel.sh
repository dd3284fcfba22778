#!/usr/bin/env bash
# Times what a user of a checkout waits for (docs/benchmarks.md, "python"):
#   1. `pip install .` in a fresh clone of HEAD (into a new venv; pip's build
#      isolation fetches scikit-build-core), and
#   2. a second `pip wheel .` in that clone, nothing changed,
# with the number of compile commands ninja ran for each (build-wheel/.ninja_log).
# CCACHE_DISABLE=1 measures a compile from scratch; without it, ccache serves
# what it has seen (the pip build uses ccache when it is installed).
#
# Usage: bench/python/wheel.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tvmffi-jit-bench-wheel-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
git clone -q . "$WORK/src"
python3 -m venv --system-site-packages "$WORK/venv"
PY="$WORK/venv/bin/python"
compiles() { grep -c '\.o$' <(cut -f4 "$WORK/src/build-wheel/.ninja_log" 2>/dev/null) || true; }
timed() {  # label, command...: wall seconds and the children's CPU seconds
  local label=$1; shift
  local before; before=$(compiles)
  /usr/bin/time -f "$label: wall %e s, CPU %U+%S s" "$@" 2>&1 | grep -v -i "warning" || true
  echo "$label: $(( $(compiles) - before )) compile commands"
}
echo "$(nproc) cores, load average $(cut -d' ' -f1 /proc/loadavg), CCACHE_DISABLE=${CCACHE_DISABLE:-}"
timed "pip install . (fresh clone)" "$PY" -m pip install -q --no-deps "$WORK/src"
cd "$WORK/src"
timed "second pip wheel . (same clone)" "$PY" -m pip wheel -q --no-deps . -w "$WORK/dist"
"$PY" -c "import tvmffi_jit; print('installed', tvmffi_jit.__version__)"
