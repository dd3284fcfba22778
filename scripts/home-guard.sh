# Sourced by scripts/test.sh (and by tests/integration/test_home_guard.py):
# the tests must leave the user's machine as they found it (issue 31). The
# ctest phases run with HOME, XDG_CACHE_HOME and TMPDIR pointing into one
# fresh folder; afterwards anything in it beyond GUARD_ALLOWED is a test that
# wrote outside its own temp folders, and the run fails listing the paths.
#
#   guard_enter            makes the folder (removed by the caller's EXIT trap:
#                          `trap guard_leave EXIT`), pins the user caches CI
#                          should keep (ccache, pip), the user site-packages and
#                          rustup's homes to where they are now
#   guard_run CMD...       runs CMD with HOME/XDG_CACHE_HOME/TMPDIR in the folder
#   guard_check            prints what appeared beyond the allowlist; fails if any
#   guard_leave            removes the folder

# What tools the tests run may leave there (relative to the fake HOME). Not
# ours, and harmless: compiler and package caches that live in HOME by design.
#   .nv                    the CUDA driver's JIT cache (~/.nv/ComputeCache)
#   .cache/pip             pip's cache (pinned to the real one below when known)
#   .cache/ccache .ccache  ccache (pinned to the real one below)
#   .config/ccache
GUARD_ALLOWED=(.nv .cache/pip .cache/ccache .ccache .config/ccache)
# The folders guard_enter itself makes: only their contents count.
GUARD_MADE=(.cache tmp)

guard_enter() {
  # Pinned before HOME moves: CI keeps its warm ccache, pip keeps its cache,
  # and Python still sees packages installed with `pip install --user`.
  if command -v ccache >/dev/null 2>&1; then
    export CCACHE_DIR=${CCACHE_DIR:-$(ccache -k cache_dir)}
  fi
  local py=${PYTHON:-python3} pip_cache
  if pip_cache=$("$py" -m pip cache dir 2>/dev/null); then
    export PIP_CACHE_DIR=${PIP_CACHE_DIR:-$pip_cache}
  fi
  export PYTHONUSERBASE=${PYTHONUSERBASE:-$("$py" -m site --user-base)}
  # rustup's proxies (cargo, rustc, ... on PATH) write settings into
  # $RUSTUP_HOME (~/.rustup) when anything runs them: keep the user's.
  if [ -d "$HOME/.rustup" ]; then export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}; fi
  if [ -d "$HOME/.cargo" ]; then export CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}; fi
  GUARD_DIR=$(mktemp -d "${TMPDIR:-/tmp}/tvmffi-jit-test-home-XXXXXX")
  local d
  for d in "${GUARD_MADE[@]}"; do mkdir -p "$GUARD_DIR/$d"; done
}

guard_run() {
  HOME=$GUARD_DIR XDG_CACHE_HOME=$GUARD_DIR/.cache TMPDIR=$GUARD_DIR/tmp "$@"
}

# One line per path that should not be there: the highest such path only
# (.cache/tvmffi-jit, not every entry under it), with its size.
guard_leftovers() {
  local p rel a listed=()
  while IFS= read -r -d '' p; do
    rel=${p#"$GUARD_DIR"/}
    for a in "${GUARD_ALLOWED[@]}" "${listed[@]}"; do
      [ "$rel" = "$a" ] || [ "${rel#"$a"/}" != "$rel" ] && continue 2  # allowed, or under one listed
    done
    for a in "${GUARD_MADE[@]}" "${GUARD_ALLOWED[@]}"; do
      [ "$rel" = "$a" ] || [ "${a#"$rel"/}" != "$a" ] && continue 2  # made here, or holds an allowed path
    done
    listed+=("$rel")
    echo "  $rel ($(du -sh "$p" 2>/dev/null | cut -f1))"
  done < <(find "$GUARD_DIR" -mindepth 1 -print0 | sort -z)
}

guard_check() {
  local found
  found=$(guard_leftovers)
  if [ -n "$found" ]; then
    echo "== FAILED: the tests wrote outside their own temp folders, into HOME/XDG_CACHE_HOME/TMPDIR" >&2
    echo "   ($GUARD_DIR; allowed: ${GUARD_ALLOWED[*]}):" >&2
    echo "$found" >&2
    return 1
  fi
}

guard_leave() {
  if [ -n "${GUARD_DIR:-}" ] && [ -d "$GUARD_DIR" ]; then
    chmod -R u+rwX "$GUARD_DIR" 2>/dev/null || true  # tests make read-only folders
    rm -rf "$GUARD_DIR"
  fi
  return 0
}
