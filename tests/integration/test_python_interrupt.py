"""An interrupt of a Python build stops the build and leaves nothing behind.

Jupyter's interrupt sends SIGINT to the kernel process alone. A child Python
process calls build_inline / load / build / build_many (a cache miss); its C++ compiler is
a wrapper that says it started (the handshake: a file holding its pid) and
then compiles for 300 s. The test sends SIGINT to the Python process only:
within 5 s the process has ended with KeyboardInterrupt, no process works in
the cache root any more (the compiler is gone) and no staging folder is left
in the root's tmp/. Then: a staging folder left by a build killed with
SIGKILL (whose process is gone) is removed by the next build in that root,
one kept for the user after a failed compile is not, and `cache gc` removes
both once their process is gone.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")

SLOW_CXX = """#!/bin/sh
case " $* " in
  *" -c "*) echo $$ > "$HANDSHAKE.part" && mv "$HANDSHAKE.part" "$HANDSHAKE"; exec sleep 300;;
esac
exec c++ "$@"
"""

CHILD = """
import sys
sys.path.insert(0, {python!r})
import tvmffi_jit
try:
    {call}
except KeyboardInterrupt:
    sys.exit(42)
sys.exit(1)
"""

CALLS = {
    "build_inline": 'tvmffi_jit.build_inline("slow", cpp_sources="int f() {{ return 1; }}")',
    "load": 'tvmffi_jit.load("slow_file", sources=[{source!r}])',
    "build": 'tvmffi_jit.build("slow_file", sources=[{source!r}])',
    "build_many": 'tvmffi_jit.build_many([{{"name": "slow", "cpp_sources": "int f() {{ return 1; }}"}}])',
}


def alive(pid):
    """True while `pid` runs (a zombie waiting for its reaper does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def processes_in(root):
    """Processes whose working directory or command line is inside `root`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or not alive(name):
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(str(root)) or str(root) in cmdline:
            found.append((int(name), cmdline.replace("\0", " ")))
    return found


@pytest.fixture
def slow(tmp_path):
    cxx = tmp_path / "slow-c++"
    cxx.write_text(SLOW_CXX)
    cxx.chmod(0o755)
    (tmp_path / "slow.cc").write_text("int g() { return 2; }\n")
    root = tmp_path / "cache"
    env = dict(os.environ, CXX=str(cxx), HANDSHAKE=str(tmp_path / "compiling"), TVMFFI_JIT_CACHE_DIR=str(root),
               TMPDIR=str(tmp_path / "tmp"), TVMFFI_JIT_BIN=TOOL)
    (tmp_path / "tmp").mkdir()
    for v in ("CC", "TVMFFI_JIT_REMOTE", "TVMFFI_JIT_CXX_LAUNCHER"):
        env.pop(v, None)
    return tmp_path, root, env


def wait_for(path, proc, timeout=120):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the child ended before its compiler started: {proc.communicate()}"
        assert time.monotonic() < deadline, "the compiler never started"
        time.sleep(0.02)
    return int(path.read_text())


@pytest.mark.parametrize("call", list(CALLS))
def test_sigint_to_python_alone_stops_the_build_and_leaves_nothing_in_the_root(slow, call):
    tmp_path, root, env = slow
    code = CHILD.format(python=str(SOURCE_DIR / "python"), call=CALLS[call].format(source=str(tmp_path / "slow.cc")))
    child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)  # a group of its own: only the test signals it
    compiler = None
    try:
        compiler = wait_for(tmp_path / "compiling", child)
        os.kill(child.pid, signal.SIGINT)  # the kernel process only, as Jupyter does
        start = time.monotonic()
        out, err = child.communicate(timeout=30)
        assert child.returncode == 42, err  # KeyboardInterrupt reached the caller
        deadline = start + 5
        while (alive(compiler) or processes_in(root)) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not alive(compiler), "the compiler still runs after the interrupt"
        assert processes_in(root) == []
        assert time.monotonic() - start < 5
        staging = sorted(p.name for p in (root / "tmp").iterdir()) if (root / "tmp").exists() else []
        assert staging == [], staging
        assert list((tmp_path / "tmp").iterdir()) == []  # nor in the package's own temp folder
    finally:
        if child.poll() is None:
            child.kill()
        if compiler and alive(compiler):
            os.kill(compiler, signal.SIGKILL)


def test_a_killed_builds_staging_folder_is_removed_by_the_next_build_and_a_kept_one_by_gc(slow):
    tmp_path, root, env = slow
    # A build killed outright (SIGKILL: no clean-up) leaves its staging folder.
    tool = subprocess.Popen([TOOL, "build", str(tmp_path / "slow.cc")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    compiler = wait_for(tmp_path / "compiling", tool)
    tool.kill()
    tool.wait()
    os.kill(compiler, signal.SIGKILL)
    left = [p.name for p in (root / "tmp").iterdir()]
    assert len(left) == 1 and left[0].startswith(f"stage.{os.uname().nodename}.{tool.pid}."), left
    # Another host's folder of the same shape is not this host's to judge.
    other_host = root / "tmp" / "stage.another-host.1.abcdef"
    other_host.mkdir()
    # A failed compile keeps its folder for the user (to re-run the command).
    (tmp_path / "bad.cc").write_text("int broken( {\n")
    plain = dict(env)
    plain.pop("CXX")
    failed = subprocess.run([TOOL, "build", str(tmp_path / "bad.cc")], env=plain, capture_output=True, text=True)
    assert failed.returncode == 1 and "is kept" in failed.stderr
    # That build (a miss in the same root) removed the killed one's folder.
    names = sorted(p.name for p in (root / "tmp").iterdir())
    assert left[0] not in names and other_host.name in names and len(names) == 2, names
    kept = [n for n in names if n != other_host.name][0]
    # The next build leaves the kept one (its process is gone, but the user may still look).
    (tmp_path / "good.cc").write_text("int good() { return 3; }\n")
    subprocess.run([TOOL, "build", "-q", str(tmp_path / "good.cc")], env=plain, check=True, capture_output=True)
    assert sorted(p.name for p in (root / "tmp").iterdir()) == sorted([kept, other_host.name])
    # gc removes it; another host's young folder stays.
    subprocess.run([TOOL, "cache", "gc", "--max-size", "1G"], env=plain, check=True, capture_output=True)
    assert sorted(p.name for p in (root / "tmp").iterdir()) == [other_host.name]
