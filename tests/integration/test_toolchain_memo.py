"""What a new cache root learns from the user's shared toolchain memo
($XDG_CACHE_HOME/tvmffi-jit-toolchain): the tvm-ffi location, without running
tvm-ffi-config (~80 ms of Python) again. A logging tvm-ffi-config wrapper on
PATH counts the runs."""

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")

pytestmark = pytest.mark.skipif(not shutil.which("tvm-ffi-config"), reason="tvm-ffi-config comes from apache-tvm-ffi")


def test_a_new_cache_root_takes_the_tvm_ffi_location_from_the_users_memo(tmp_path):
    real = shutil.which("tvm-ffi-config")
    tools = tmp_path / "bin"
    tools.mkdir()
    log = tmp_path / "config.log"
    wrapper = tools / "tvm-ffi-config"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    xdg = tmp_path / "xdg"
    env = dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", XDG_CACHE_HOME=str(xdg))
    for v in ("TVMFFI_JIT_CACHE_DIR", "TVM_FFI_ROOT"):
        env.pop(v, None)
    src = tmp_path / "m.cc"
    src.write_text("#include <tvm/ffi/function.h>\nint64_t f(int64_t x) { return x; }\n"
                   "TVM_FFI_DLL_EXPORT_TYPED_FUNC(f, f);\n")

    def build(root):
        p = subprocess.run([TOOL, "build", str(src), "--name", "memo_m", "--cache-dir", str(tmp_path / root), "--json"],
                           env=env, capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    def runs():
        return len(log.read_text().splitlines()) if log.exists() else 0

    build("root-1")
    assert runs() == 1
    memo = xdg / "tvmffi-jit-toolchain" / "tvm-ffi.json"
    assert stat.S_IMODE(memo.stat().st_mode) == 0o600
    assert stat.S_IMODE(memo.parent.stat().st_mode) == 0o700
    # A new, empty root: the location comes from the user's memo.
    assert build("root-2")["cache"] == "miss"
    assert runs() == 1
    # A memo directory that others may write is not believed.
    memo.parent.chmod(0o777)
    build("root-3")
    assert runs() == 2
    memo.parent.chmod(0o700)
    # Nor is a memo made under another PATH (another tvm-ffi-config).
    other = tmp_path / "bin2"
    shutil.copytree(tools, other)
    env["PATH"] = f"{other}:{os.environ['PATH']}"
    build("root-4")
    assert runs() == 3


def test_a_second_tvm_ffi_installed_in_the_user_site_is_noticed_by_the_location_memo(tmp_path):
    """`pip install --user apache-tvm-ffi` puts a tvm_ffi in front of the one
    the memo recorded: the memo records Python's search directories' stamps
    and is not believed once one changes."""
    real = shutil.which("tvm-ffi-config")
    tools = tmp_path / "bin"
    tools.mkdir()
    log = tmp_path / "config.log"
    (tools / "tvm-ffi-config").write_text(f'#!/bin/sh\necho "$@" >> "{log}"\nexec "{real}" "$@"\n')
    (tools / "tvm-ffi-config").chmod(0o755)
    userbase = tmp_path / "userbase"
    env = dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", XDG_CACHE_HOME=str(tmp_path / "xdg"),
               PYTHONUSERBASE=str(userbase))
    for v in ("TVMFFI_JIT_CACHE_DIR", "TVM_FFI_ROOT", "PYTHONNOUSERSITE"):
        env.pop(v, None)
    src = tmp_path / "m.cc"
    src.write_text("#include <tvm/ffi/function.h>\nint64_t f(int64_t x) { return x; }\n"
                   "TVM_FFI_DLL_EXPORT_TYPED_FUNC(f, f);\n")

    def build(root):
        p = subprocess.run([TOOL, "build", str(src), "--name", "memo_m", "--cache-dir", str(tmp_path / root), "--json"],
                           env=env, capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    def runs():
        return len(log.read_text().splitlines()) if log.exists() else 0

    build("root-1")
    build("root-2")
    assert runs() == 1  # the memo answers
    site_dir = subprocess.run([shutil.which("python3"), "-c", "import site; print(site.getusersitepackages())"],
                              env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert site_dir.startswith(str(userbase))
    import tvm_ffi
    Path(site_dir).mkdir(parents=True)
    shutil.copytree(Path(tvm_ffi.__file__).parent, Path(site_dir) / "tvm_ffi")  # 13 MB: a real second install
    first = build("root-3")
    assert runs() == 2, "the memo still answered with the tvm_ffi the user site now shadows"
    shown = subprocess.run([TOOL, "cache", "show", first["entry_dir"].rsplit("/", 1)[1], "--json",
                            "--cache-dir", str(tmp_path / "root-3")], env=env, capture_output=True, text=True)
    assert site_dir in shown.stdout, shown.stdout
