"""The CI scripts' own logic: scripts/home-guard.sh (the guard scripts/test.sh
runs the ctest phases under, issue 31) and scripts/build-wheel.sh's check for
the tools it needs. Each runs the real script in bash, in this test's folders."""

import os
import subprocess
import sys
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
GUARD = SOURCE_DIR / "scripts" / "home-guard.sh"


def guarded(tmp_path, command):
    """Runs `command` (bash) under the guard as test.sh does; returns (exit code of guard_check, stderr, the
    folder it used, whether the folder was gone after guard_leave)."""
    script = f"""
set -euo pipefail
source {GUARD}
guard_enter
guard_run bash -c {command!r}
rc=0
guard_check || rc=$?
echo "dir=$GUARD_DIR"
guard_leave
[ -e "$GUARD_DIR" ] && echo kept || echo removed
exit $rc
"""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    p = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    return p.returncode, p.stderr, Path(lines[-2].removeprefix("dir=")), lines[-1]


def test_guard_passes_when_the_command_writes_only_what_the_allowlist_names(tmp_path):
    rc, err, folder, after = guarded(tmp_path, 'mkdir -p "$HOME/.nv/ComputeCache" "$XDG_CACHE_HOME/pip/http" '
                                               '"$HOME/.config/ccache"; touch "$HOME/.nv/ComputeCache/index" '
                                               '"$XDG_CACHE_HOME/pip/http/x" "$HOME/.config/ccache/ccache.conf"')
    assert rc == 0, err
    assert folder.parent == tmp_path and after == "removed"


def test_guard_fails_listing_each_path_written_into_home_xdg_cache_or_tmpdir(tmp_path):
    rc, err, folder, after = guarded(
        tmp_path,
        'mkdir -p "$XDG_CACHE_HOME/tvmffi-jit/mod_a_1" "$XDG_CACHE_HOME/tvmffi-jit-toolchain" "$HOME/.config/x"; '
        'touch "$XDG_CACHE_HOME/tvmffi-jit/mod_a_1/m.so" "$HOME/.config/x/y"; mkdir "$TMPDIR/tvmffi-jit-m-abc"')
    assert rc == 1, err
    listed = [line.split(" (")[0].strip() for line in err.splitlines() if line.startswith("  ") and line[2] != " "]
    # The highest path that should not be there, once: not every file under it.
    assert listed == [".cache/tvmffi-jit", ".cache/tvmffi-jit-toolchain", ".config/x", "tmp/tvmffi-jit-m-abc"], err
    assert after == "removed"  # read-only leftovers too (below)


def test_guard_removes_its_folder_even_with_read_only_folders_in_it(tmp_path):
    rc, err, folder, after = guarded(tmp_path, 'mkdir -p "$TMPDIR/ro/sub"; touch "$TMPDIR/ro/sub/f"; '
                                               'chmod 0500 "$TMPDIR/ro/sub" "$TMPDIR/ro"')
    assert rc == 1 and "tmp/ro" in err, err
    assert after == "removed" and not folder.exists()


def test_guard_pins_ccache_pip_user_site_and_rustup_before_home_moves(tmp_path):
    script = f"""
set -euo pipefail
unset CCACHE_DIR PIP_CACHE_DIR PYTHONUSERBASE RUSTUP_HOME CARGO_HOME
mkdir -p "$HOME/.rustup"
source {GUARD}
guard_enter
guard_run bash -c 'echo "$HOME|${{CCACHE_DIR:-}}|${{PIP_CACHE_DIR:-}}|$PYTHONUSERBASE|$RUSTUP_HOME|${{CARGO_HOME:-unset}}"'
guard_leave
"""
    env = dict(os.environ, TMPDIR=str(tmp_path), HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    p = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    home, ccache, pip, userbase, rustup, cargo = p.stdout.strip().split("|")
    assert home.startswith(str(tmp_path / "tvmffi-jit-test-home-"))
    for pinned in (ccache, pip):  # where they were before HOME moved, if the tool is there
        assert not pinned or pinned.startswith(str(tmp_path / "xdg")), pinned
    assert userbase == str(tmp_path / "home" / ".local")
    assert rustup == str(tmp_path / "home" / ".rustup") and cargo == "unset"  # pinned only where it exists


def test_build_wheel_names_the_missing_tools_and_the_pip_command(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    env = dict(os.environ, PYTHON=str(venv / "bin" / "python"))
    p = subprocess.run(["bash", SOURCE_DIR / "scripts" / "build-wheel.sh", tmp_path / "dist"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 4, p.stderr
    assert "missing for" in p.stderr and "pip" in p.stderr and "auditwheel" in p.stderr, p.stderr
    assert "ensurepip" in p.stderr, p.stderr
    assert "No module named" not in p.stderr, p.stderr
    assert not (tmp_path / "dist").exists()
