"""SIGINT, SIGTERM and SIGHUP during a build: the compilers (and what they
started) are stopped, staging and --no-cache temp dirs are removed, and the
exit code is 128 + the signal.

The compiler is a shell script (selected through CXX) that answers --version
at once and otherwise starts a background `sleep` (a grandchild of
tvmffi-jit, which ignores SIGINT as every background job of a non-interactive
shell does, so only the SIGKILL after the grace period ends it) and waits
for it. Each test takes a few seconds.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")

SLOW_COMPILER = """#!/bin/sh
case "$1" in --version|-v|-dumpversion) echo "slowcc 1.0 (tvmffi-jit signal test)"; exit 0;; esac
sleep 300 &
echo "$! $$" >> "$SLOWCC_PIDS"
wait
"""


@pytest.fixture
def slow_build(tmp_path):
    """An environment whose C++ compiler never finishes, and two sources for it."""
    compiler = tmp_path / "slowcc"
    compiler.write_text(SLOW_COMPILER)
    compiler.chmod(0o755)
    (tmp_path / "a.cc").write_text("int a() { return 1; }\n")
    (tmp_path / "b.cc").write_text("int b() { return 2; }\n")
    (tmp_path / "tmp").mkdir()
    env = dict(os.environ)
    env.update({"CXX": str(compiler), "SLOWCC_PIDS": str(tmp_path / "pids"), "TMPDIR": str(tmp_path / "tmp"),
                "TVMFFI_JIT_CACHE_DIR": str(tmp_path / "cache")})
    return tmp_path, env


def alive(pid):
    """True while `pid` runs (a zombie waiting for a reaper does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def compiler_pids(pid_file, expected, timeout=60):
    """Waits until `expected` compilers have started; returns every pid they and their children have."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = pid_file.read_text().splitlines() if pid_file.exists() else []
        if len(lines) >= expected:
            return [int(p) for line in lines for p in line.split()]
        time.sleep(0.05)
    pytest.fail(f"the fake compiler did not start {expected} times in {timeout} s")


@pytest.mark.parametrize("sig,code,extra", [
    (signal.SIGINT, 130, []),
    (signal.SIGTERM, 143, ["--no-cache"]),
    (signal.SIGHUP, 129, []),
    (signal.SIGINT, 130, ["--no-cache"]),
], ids=["SIGINT-cached", "SIGTERM-no-cache", "SIGHUP-cached", "SIGINT-no-cache"])
def test_a_signal_stops_every_compiler_process_removes_temporaries_and_exits_128_plus_it(slow_build, sig, code, extra):
    tmp_path, env = slow_build
    # A new session, as a terminal's foreground job: the signal goes to that
    # process group, which the compilers (in groups of their own) are not in.
    p = subprocess.Popen([TOOL, "build", str(tmp_path / "a.cc"), str(tmp_path / "b.cc"), "--name", "slow", "-j", "2",
                          *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        pids = compiler_pids(tmp_path / "pids", 2)
        os.killpg(p.pid, sig)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == code, err
    assert out == "", "a stopped build prints no artifact path"
    assert "interrupted by " + signal.Signals(sig).name in err, err
    survivors = [pid for pid in pids if alive(pid)]
    for pid in survivors:
        os.kill(pid, signal.SIGKILL)
    assert survivors == [], f"compiler processes outlived tvmffi-jit: {survivors}"
    assert list((tmp_path / "tmp").iterdir()) == [], "--no-cache temp dirs are removed"
    staging = tmp_path / "cache" / "tmp"
    assert not staging.exists() or list(staging.iterdir()) == [], "staging dirs are removed"
    assert not list((tmp_path / "cache").glob("slow_*")), "nothing was published"

