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
# compiles as unity batches beside the ctest phase at the lowest priority, on
# the CPU the tests leave idle while they wait, and its ctest starts as soon as
# it is built; ctest runs two tests per core.
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
TIMES=$(mktemp -d "${TMPDIR:-/tmp}/tvmffi-jit-test-times-XXXXXX")  # phase times, the ASan logs
# CPU seconds (user+sys) of every child the shell PID has waited for.
children_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%d", ($16 + $17) / hz }' "/proc/$1/stat"; }
# measured FILE CMD...: runs CMD, then writes its wall and CPU seconds to FILE.
measured() {
  local file=$1 start=$SECONDS me=$BASHPID rc=0 before
  shift
  before=$(children_cpu "$me")
  "$@" || rc=$?
  echo "$((SECONDS - start)) $(($(children_cpu "$me") - before))" >"$file"
  return $rc
}
phase() {  # NAME TIMES-FILE: the line for the log, and the summary at the end
  local wall cpu
  read -r wall cpu <"$2"
  PHASES+=("$(printf '%5d s %6d s  %s' "$wall" "$cpu" "$1")")
  echo "== $1: $wall s (CPU $cpu s)" >&2
}
timed() {  # NAME CMD...
  local name=$1 rc=0
  shift
  # In a subshell: the CPU it counts is this phase's, not the ASan jobs'
  # beside the ctest phase.
  (measured "$TIMES/phase" "$@") || rc=$?
  phase "$name" "$TIMES/phase"
  return $rc
}
ASAN_PID=
on_exit() {
  local rc=$?
  # A failed run stops the ASan jobs (their own process group).
  [ -z "$ASAN_PID" ] || kill -TERM -- -"$ASAN_PID" 2>/dev/null || true
  echo "== phases (wall time, CPU time):" >&2
  [ ${#PHASES[@]} -eq 0 ] || printf '%s\n' "${PHASES[@]}" >&2
  echo "== $([ $rc = 0 ] && echo 'all tests passed' || echo "FAILED (exit $rc)") in $SECONDS s (CPU $(children_cpu $$) s)" >&2
  rm -rf "$TIMES"
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

# The ASan+UBSan build, configured now and built beside the ctest phase, at
# the lowest priority (nice 19): the tests wait on servers and child processes
# for much of that phase, and the compiles take the CPU they leave idle and
# none that a test wants. Only what its ctest run executes: the unit tests, the
# corpus replayers, the fake driver, and the tool itself (the driver unit tests
# run it as their probe child, so that code runs under the sanitizers too);
# anything else a full build would add (e.g. libraries only the Python package
# loads) is left out. Unity batches (CMAKE_UNITY_BUILD): each batch parses the
# headers its files share (json, fmt, spdlog, Catch2, CLI11) once.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTVMFFI_JIT_ENABLE_SANITIZERS=ON \
  -DTVMFFI_JIT_STATIC_DEPS=OFF -DCMAKE_UNITY_BUILD=ON $WERROR >/dev/null
# intercept_tls_get_addr=0: GCC 12's sanitizer runtime (Debian 12) takes a
# dynamic TLS block (libnvrtc's, dlopened by the NVRTC tests) for a pre-2.25
# glibc one whenever its address is sizeof(that header) past a page boundary,
# reads a bogus range from the two words before it, and LeakSanitizer's tracer
# then crashes at exit ("Tracer caught signal 11", "DTLS ... at 0x2c6a-0x2000003d6c"
# with LSAN_OPTIONS=verbosity=1:log_threads=1) after the test passed: the
# coincidence came and went with unrelated code changes. Without the
# interceptor LeakSanitizer does not scan dynamically allocated TLS: that can
# only add a leak report (memory reachable only from such a block), never hide one.
asan_jobs() {  # the ASan build, then its ctest (unit tests and corpus replays), as soon as it is built
  measured "$TIMES/asan-build" nice -n 19 cmake --build build-asan -j "$JOBS" \
    --target unit_tests fuzz_replay_devcode fuzz_replay_blob fuzz_replay_entry_bin fakecuda tvmffi-jit >"$TIMES/asan-build.log" 2>&1 || return
  measured "$TIMES/asan-ctest" guard_run env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$JOBS" -L 'unit|fuzz' >"$TIMES/asan-ctest.log" 2>&1
}

guard_enter
set -m  # the ASan jobs in their own process group, which a failed run stops
asan_jobs &
ASAN_PID=$!
set +m
# Twice as many tests as cores: most of them spend much of their time waiting
# (servers, child processes, compilers they started), so two per core keep the
# cores busy (docs/benchmarks.md, "Build and CI time").
echo "== ctest (Release, -j $((2 * JOBS))), HOME=TMPDIR=XDG_CACHE_HOME in $GUARD_DIR;" \
  "beside it: the ASan+UBSan build (nice 19), then its ctest (unit + fuzz)" >&2
rc=0
timed "ctest (Release)" guard_run ctest --test-dir build --output-on-failure -j $((2 * JOBS)) ${CTEST_ARGS:-} || rc=$?
if [ "$rc" != 0 ]; then
  guard_check || true
  exit "$rc"
fi
# Nothing else runs now: what is left of the ASan build needs no lower
# priority (renice may raise it where allowed: root, CAP_SYS_NICE; elsewhere
# it stays at 19, which on an otherwise idle machine is full speed too).
renice -n 0 -g "$ASAN_PID" >/dev/null 2>&1 || true
wait_start=$SECONDS
wait "$ASAN_PID" || rc=$?
ASAN_PID=
echo "== ASan+UBSan: build, then unit tests and fuzz-corpus replays ($((SECONDS - wait_start)) s of it after ctest)" >&2
cat "$TIMES/asan-build.log" >&2
[ ! -f "$TIMES/asan-build" ] || phase "ASan build (beside ctest, nice 19)" "$TIMES/asan-build"
if [ -f "$TIMES/asan-ctest.log" ]; then
  cat "$TIMES/asan-ctest.log"
  [ ! -f "$TIMES/asan-ctest" ] || phase "ASan ctest (unit + fuzz)" "$TIMES/asan-ctest"
fi
guard_check || rc=1
[ "$rc" = 0 ] || exit "$rc"
