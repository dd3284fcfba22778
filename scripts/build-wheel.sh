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
raw=$(mktemp -d "${TMPDIR:-/tmp}/tvmffi-jit-wheel-XXXXXX")
trap 'rm -rf "$raw"' EXIT
"$PY" -m pip wheel . --no-deps -w "$raw" >&2
mkdir -p "$DIST"
# --plat: fail rather than tag higher than promised if a new glibc symbol crept in.
"$PY" -m auditwheel repair --plat "$PLAT" -w "$DIST" "$raw"/tvmffi_jit-*.whl >&2
ls "$DIST"/tvmffi_jit-*"$PLAT"*.whl
