#!/usr/bin/env bash
# Sets everything up, builds the tests, then runs every test: unit + integration
# + fuzz-corpus replays (ctest), then the unit tests and corpus replays again
# under ASan+UBSan. Each phase prints its wall time.
#
# The tests leave the machine as they found it: the ctest phases run with HOME,
# XDG_CACHE_HOME and TMPDIR pointing into one fresh folder, and the run fails if
# anything the allowlist does not name appears there (scripts/home-guard.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
source scripts/home-guard.sh

# Each phase's wall time goes to stderr as it ends, and all of them again at
# the end (also of a failed run), so a CI log shows where the minutes go
# (docs/benchmarks.md, "Build and CI time").
PHASES=()
timed() {
  local name=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  PHASES+=("$(printf '%5d s  %s' $((SECONDS - start)) "$name")")
  echo "== $name: $((SECONDS - start)) s" >&2
  return $rc
}
on_exit() {
  local rc=$?
  echo "== phases (wall time):" >&2
  [ ${#PHASES[@]} -eq 0 ] || printf '%s\n' "${PHASES[@]}" >&2
  echo "== $([ $rc = 0 ] && echo 'all tests passed' || echo "FAILED (exit $rc)") in $SECONDS s" >&2
  guard_leave
}
trap on_exit EXIT

# ccache (installed by setup.sh) under every build here. Paths are made
# relative to the checkout so the build trees share entries.
export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD} CCACHE_NOHASHDIR=1
# Our own code compiles without warnings here (CI); users' builds stay tolerant
# of the warnings newer compilers add (TVMFFI_JIT_WERROR defaults to OFF).
WERROR=-DTVMFFI_JIT_WERROR=ON

CMAKE_ARGS="${CMAKE_ARGS:-} $WERROR" \
  timed "setup.sh (packages + the CLI)" bash scripts/setup.sh --with-test-deps  # + hipcc and what only tests use

# The tool's settings from the caller's shell never reach the tests: an
# inherited TVMFFI_JIT_CACHE_DIR would be the user's real cache, a
# TVMFFI_JIT_REMOTE their team's. Each test sets what it needs.
for v in $(compgen -e | grep -E '^(TVMFFI_JIT_|TVM_FFI_CACHE_DIR$|CUDA_CACHE_PATH$)' || true); do
  echo "test.sh: ignoring $v from the environment (tests set their own)" >&2
  unset "$v"
done

cmake -S . -B build $WERROR >/dev/null
timed "build (tests, fuzz replays, engine)" cmake --build build -j "$JOBS" >&2

guard_enter
echo "== ctest (RelWithDebInfo), HOME=TMPDIR=XDG_CACHE_HOME in $GUARD_DIR" >&2
rc=0
timed "ctest (RelWithDebInfo)" guard_run ctest --test-dir build --output-on-failure -j "$JOBS" ${CTEST_ARGS:-} || rc=$?
guard_check || rc=1
[ "$rc" = 0 ] || exit "$rc"

echo "== ASan+UBSan: unit tests and fuzz-corpus replays" >&2
if [ ! -f build-asan/build.ninja ]; then
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTVMFFI_JIT_ENABLE_SANITIZERS=ON \
    -DTVMFFI_JIT_STATIC_DEPS=OFF $WERROR >&2
else
  cmake -S . -B build-asan $WERROR >/dev/null
fi
# Only what the run below executes: the unit tests, the corpus replayers, the
# fake driver, and the tool itself (the driver unit tests run it as their
# probe child, so that code runs under the sanitizers too). Anything else a
# full build would add (e.g. libraries only the Python package loads) is left out.
timed "ASan build" cmake --build build-asan -j "$JOBS" \
  --target unit_tests fuzz_replay_devcode fuzz_replay_blob fakecuda tvmffi-jit >&2
# intercept_tls_get_addr=0: GCC 12's sanitizer runtime (Debian 12) takes a
# dynamic TLS block (libnvrtc's, dlopened by the NVRTC tests) for a pre-2.25
# glibc one whenever its address is sizeof(that header) past a page boundary,
# reads a bogus range from the two words before it, and LeakSanitizer's tracer
# then crashes at exit ("Tracer caught signal 11", "DTLS ... at 0x2c6a-0x2000003d6c"
# with LSAN_OPTIONS=verbosity=1:log_threads=1) after the test passed: the
# coincidence came and went with unrelated code changes. Without the
# interceptor LeakSanitizer does not scan dynamically allocated TLS: that can
# only add a leak report (memory reachable only from such a block), never hide one.
timed "ASan ctest (unit + fuzz)" guard_run env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -j "$JOBS" -L 'unit|fuzz' || rc=$?
guard_check || rc=1
[ "$rc" = 0 ] || exit "$rc"
