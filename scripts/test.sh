#!/usr/bin/env bash
# Sets everything up, then runs every test: unit + integration + fuzz-corpus
# replays (ctest), then the unit tests and corpus replays again under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

# ccache (installed by setup.sh) under every build here: the pip-wheel test
# builds the CLI again in build-wheel/ with the same flags, and hits. Paths
# are made relative to the checkout so both build trees share entries.
export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=1

# Each phase's wall time goes to stderr, so a CI log shows where the minutes
# go (docs/benchmarks.md, "Build and CI time").
timed() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "== $name: $((SECONDS - start)) s" >&2
}

timed "setup.sh (packages + build/)" bash scripts/setup.sh --with-test-deps  # + hipcc, for the backend-hip tests

# Tests never touch the user's real cache.
export TVMFFI_JIT_CACHE_DIR="${TVMFFI_JIT_CACHE_DIR:-$(mktemp -d)/tvmffi-jit-cache}"

echo "== ctest (RelWithDebInfo)" >&2
timed "ctest (RelWithDebInfo)" ctest --test-dir build --output-on-failure -j "$JOBS" ${CTEST_ARGS:-}

echo "== ASan+UBSan: unit tests and fuzz-corpus replays" >&2
if [ ! -f build-asan/build.ninja ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTVMFFI_JIT_ENABLE_SANITIZERS=ON -DTVMFFI_JIT_STATIC_DEPS=OFF >&2
fi
# Only what the run below executes: the unit tests, the corpus replayers, the
# fake driver, and the tool itself (the driver unit tests run it as their
# probe child, so that code runs under the sanitizers too). Anything else a
# full build would add (e.g. libraries only the Python package loads) is left out.
timed "ASan build" cmake --build build-asan -j "$JOBS" \
  --target unit_tests fuzz_replay_devcode fuzz_replay_blob fakecuda tvmffi-jit >&2
timed "ASan ctest (unit + fuzz)" env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$JOBS" -L 'unit|fuzz'
echo "== all tests passed in $SECONDS s" >&2
