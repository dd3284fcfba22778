#!/usr/bin/env bash
# GPU validation of the NVRTC backend and of cubin embedding (docs/gpu-validation.md).
#
#   tests/gpu/nvrtc_embed.sh prepare DIR [ARCH]   build the artifacts into DIR (needs tvmffi-jit,
#                                                the CUDA toolkit and tvm-ffi; no GPU)
#   tests/gpu/nvrtc_embed.sh run DIR             load and launch them (needs a GPU, numpy,
#                                                torch and apache-tvm-ffi; no toolkit)
#   tests/gpu/nvrtc_embed.sh all DIR [ARCH]      both, on a GPU machine that has everything
#
# ARCH is X.Y (default: the first GPU's compute capability from nvidia-smi, else 9.0).
# Environment: TVMFFI_JIT_BIN (default: build/tvmffi-jit), PYTHON (default: python3).
# The artifacts, all from share/tvmffi-jit/examples/embed_cubin/kernels.cu:
#   embed_example.so             the example manifest: launcher.cu + kernels.cu embedded as a cubin
#   kernels.{nvrtc,nvcc}.cubin   --emit cubin, each backend
#   kernels.{nvrtc,nvcc}.ptx     --emit ptx, each backend (the driver JIT-compiles them)
#   kernels.nvcc.fatbin          --emit fatbin for ARCH (SASS)
#   kernels.nvcc.jit.fatbin      --emit fatbin for 8.0+PTX: on a newer GPU only the PTX can run
# Output: one PASS/FAIL line per check; exit status 1 if anything failed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${TVMFFI_JIT_BIN:-$ROOT/build/tvmffi-jit}
PY=${PYTHON:-python3}
EXAMPLE=$ROOT/share/tvmffi-jit/examples/embed_cubin

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

detect_arch() {
  local cap
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' ') || true
  echo "${cap:-9.0}"
}

# build OUT_FILE tvmffi-jit-build-arguments...: builds into a private directory
# and copies the artifact (the path build prints on stdout) to OUT_FILE.
build_to() {
  local out=$1; shift
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/nvrtc_embed.XXXXXX")
  local artifact
  if ! artifact=$("$BIN" build "$@" --build-dir "$dir"); then
    echo "FAIL build $(basename "$out"): tvmffi-jit build $* failed" >&2
    return 1
  fi
  cp "$artifact" "$out"
  rm -rf "$dir"
  echo "built $(basename "$out")" >&2
}

prepare() {
  local out=$1 arch=$2
  [ -x "$BIN" ] || { echo "FAIL prepare: no tvmffi-jit at $BIN (set TVMFFI_JIT_BIN)" >&2; return 1; }
  mkdir -p "$out"
  local ok=0
  build_to "$out/embed_example.so" -m "$EXAMPLE/tvmffi-jit.json" --arch "$arch" || ok=1
  for backend in nvrtc nvcc; do
    build_to "$out/kernels.$backend.cubin" "$EXAMPLE/kernels.cu" --compiler "$backend" --emit cubin --arch "$arch" || ok=1
    build_to "$out/kernels.$backend.ptx" "$EXAMPLE/kernels.cu" --compiler "$backend" --emit ptx --arch "$arch" || ok=1
  done
  build_to "$out/kernels.nvcc.fatbin" "$EXAMPLE/kernels.cu" --emit fatbin --arch "$arch" || ok=1
  build_to "$out/kernels.nvcc.jit.fatbin" "$EXAMPLE/kernels.cu" --emit fatbin --arch "8.0+PTX" || ok=1
  # What was built, for the record (offline; no GPU needed).
  "$BIN" inspect "$out"/kernels.* "$out/embed_example.so" >"$out/inspect.txt" 2>&1 || ok=1
  return $ok
}

run_checks() {
  "$PY" "$ROOT/tests/gpu/embed_launch.py" --artifacts "$1"
}

[ $# -ge 2 ] || usage
cmd=$1 dir=$2
arch=${3:-}
case $cmd in
  prepare) prepare "$dir" "${arch:-$(detect_arch)}" ;;
  run) run_checks "$dir" ;;
  all) prepare "$dir" "${arch:-$(detect_arch)}" && run_checks "$dir" ;;
  *) usage ;;
esac
