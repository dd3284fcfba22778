#!/usr/bin/env bash
# Sets everything up, builds the tests, then runs every test: unit + integration
# + fuzz-corpus replays (ctest), then the unit tests and corpus replays again
# under ASan+UBSan. Each phase prints its wall time and the CPU time of what it
# ran (user+sys of every process it waited for).
#
# Where the minutes go (docs/benchmarks.md, "Build and CI time"): the project
# is compiled three times, for the tests (build/), for the wheel inside the
# wheel test's `pip wheel .`, and under ASan (build-asan/). build/ is a Release
# build, the wheel's own configuration, so the wheel's objects are ccache hits
# of build/'s (test_python_wheel.py passes the same -Werror); the ASan build
# runs beside the ctest phase at the lowest priority, on the CPU the tests
# leave idle while they wait on their servers, and compiles as unity batches.
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
TIMES=$(mktemp "${TMPDIR:-/tmp}/tvmffi-jit-test-times-XXXXXX")
# CPU seconds (user+sys) of the children this (sub)shell has waited for.
children_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($16 + $17) / hz }' "/proc/$BASHPID/stat"; }
phase() {  # name, wall seconds, CPU seconds
  PHASES+=("$(printf '%5d s %6d s  %s' "$2" "$3" "$1")")
  echo "== $1: $2 s (CPU $3 s)" >&2
}
timed() {
  local name=$1 start=$SECONDS rc=0
  shift
  # In a subshell, so that its CPU count holds what this phase ran and nothing
  # else (not the ASan build beside the ctest phase).
  ( rc=0; "$@" || rc=$?; children_cpu >"$TIMES"; exit $rc ) || rc=$?
  phase "$name" $((SECONDS - start)) "$(cat "$TIMES")"
  return $rc
}
ASAN_BUILD_PID=
on_exit() {
  local rc=$?
  # A failed ctest phase leaves the ASan build running in its own session.
  [ -z "$ASAN_BUILD_PID" ] || kill -TERM -- -"$ASAN_BUILD_PID" 2>/dev/null || true
  echo "== phases (wall time, CPU time):" >&2
  [ ${#PHASES[@]} -eq 0 ] || printf '%s\n' "${PHASES[@]}" >&2
  echo "== $([ $rc = 0 ] && echo 'all tests passed' || echo "FAILED (exit $rc)") in $SECONDS s (CPU $(children_cpu) s)" >&2
  rm -f "$TIMES"
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
# Release (-O3, no -g), as the wheel is built (pyproject.toml): the wheel test's
# `pip wheel .` then finds every object in ccache instead of compiling the
# project a second time (cmake/wheel.cmake), and the tests run the
# configuration that ships.
BUILD_TYPE=-DCMAKE_BUILD_TYPE=Release

CMAKE_ARGS="${CMAKE_ARGS:-} $BUILD_TYPE $WERROR" \
  timed "setup.sh (packages + the CLI)" bash scripts/setup.sh --with-test-deps  # + hipcc and what only tests use

# The tool's settings from the caller's shell never reach the tests: an
# inherited TVMFFI_JIT_CACHE_DIR would be the user's real cache, a
# TVMFFI_JIT_REMOTE their team's. Each test sets what it needs.
for v in $(compgen -e | grep -E '^(TVMFFI_JIT_|TVM_FFI_CACHE_DIR$|CUDA_CACHE_PATH$)' || true); do
  echo "test.sh: ignoring $v from the environment (tests set their own)" >&2
  unset "$v"
done

cmake -S . -B build $BUILD_TYPE $WERROR >/dev/null
timed "build (tests, fuzz replays, engine)" cmake --build build -j "$JOBS" >&2

# The ASan+UBSan build, started now and run beside the ctest phase: most of
# that phase's tests wait on servers and child processes rather than compute,
# so the compiles run at the lowest priority (nice 19) on what CPU the tests
# leave idle, and take it back from no test. In its own session (setsid), so
# that a failed run stops it. Only what its ctest run below executes: the unit
# tests, the corpus replayers, the fake driver, and the tool itself (the driver
# unit tests run it as their probe child, so that code runs under the
# sanitizers too); anything else a full build would add (e.g. libraries only
# the Python package loads) is left out. Unity batches (CMAKE_UNITY_BUILD):
# each batch parses the headers every file of a layer includes (json, fmt,
# spdlog, Catch2, CLI11) once.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTVMFFI_JIT_ENABLE_SANITIZERS=ON \
  -DTVMFFI_JIT_STATIC_DEPS=OFF -DCMAKE_UNITY_BUILD=ON $WERROR >/dev/null
ASAN_BUILD_START=$SECONDS
export -f children_cpu
setsid bash -c 'rc=0; nice -n 19 "$@" >build-asan/build.log 2>&1 || rc=$?; children_cpu >build-asan/build.cpu; exit $rc' \
  asan-build cmake --build build-asan -j "$JOBS" \
  --target unit_tests fuzz_replay_devcode fuzz_replay_blob fakecuda tvmffi-jit &
ASAN_BUILD_PID=$!

guard_enter
echo "== ctest (Release), HOME=TMPDIR=XDG_CACHE_HOME in $GUARD_DIR; the ASan build beside it (build-asan/build.log)" >&2
rc=0
timed "ctest (Release)" guard_run ctest --test-dir build --output-on-failure -j "$JOBS" ${CTEST_ARGS:-} || rc=$?
guard_check || rc=1
[ "$rc" = 0 ] || exit "$rc"

echo "== ASan+UBSan: unit tests and fuzz-corpus replays" >&2
# Nothing else runs now: what is left of the ASan build needs no lower
# priority (where renice may raise it: root, CAP_SYS_NICE; elsewhere it stays
# at 19, which on an otherwise idle machine is full speed too).
renice -n 0 -g "$ASAN_BUILD_PID" >/dev/null 2>&1 || true
wait_start=$SECONDS
wait "$ASAN_BUILD_PID" || rc=$?
ASAN_BUILD_PID=
cat build-asan/build.log >&2
phase "ASan build (beside ctest; $((SECONDS - wait_start)) s of it after)" $((SECONDS - ASAN_BUILD_START)) \
  "$(cat build-asan/build.cpu 2>/dev/null || echo 0)"
[ "$rc" = 0 ] || exit "$rc"
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
