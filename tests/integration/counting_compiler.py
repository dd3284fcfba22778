"""A C++ compiler that counts its compile runs, and an environment free of the
tool's own settings: what the remote and batch tests use to observe "spawns
no compiler" rather than infer it from the tool's JSON.

The environment's caches are the test's own, under its tmp_path and empty at
first (a count of compiles, or `built`/`miss`, needs a cold cache): the tool's
cache root, its toolchain memo ($XDG_CACHE_HOME/tvmffi-jit-toolchain), tvm_ffi's
cache, and the TMPDIR where --no-cache builds go."""

import os
import shutil

REAL_CXX = shutil.which("g++") or shutil.which("c++")

# Settings a developer's shell may carry that would change what a test observes.
TOOL_SETTINGS = ("CC", "TVMFFI_JIT_REMOTE", "TVMFFI_JIT_REMOTE_READ_ONLY", "TVMFFI_JIT_REMOTE_NAMESPACE",
                 "TVMFFI_JIT_BASE_DIR", "TVMFFI_JIT_CACHE_DIR", "TVMFFI_JIT_REMOTE_SIGN_KEY",
                 "TVMFFI_JIT_REMOTE_TRUSTED_KEYS", "TVMFFI_JIT_CXX_LAUNCHER", "TVMFFI_JIT_CUDA_LAUNCHER",
                 "TVMFFI_JIT_CGROUP_ROOT")
# Where a build without --cache-dir writes, each a folder of the test's own.
OWN_FOLDERS = {"TVMFFI_JIT_CACHE_DIR": "env-cache", "XDG_CACHE_HOME": "env-xdg-cache",
               "TVM_FFI_CACHE_DIR": "env-tvm-ffi-cache", "TMPDIR": "env-tmp"}


def counting_cxx_env(tmp_path):
    """(env, log): env runs tmp_path/tools/cxx as CXX, which appends one line
    per compile (`-c`) to log and otherwise is the real compiler."""
    log = tmp_path / "cxx.log"
    cxx = tmp_path / "tools" / "cxx"
    cxx.parent.mkdir(exist_ok=True)
    cxx.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then exec {REAL_CXX} --version; fi
case " $* " in *" -c "*) echo "$$ $*" >> "$CXX_LOG";; esac
exec {REAL_CXX} "$@"
""")
    cxx.chmod(0o755)
    env = dict(os.environ, CXX=str(cxx), CXX_LOG=str(log))
    for v in TOOL_SETTINGS:
        env.pop(v, None)
    for var, name in OWN_FOLDERS.items():
        (tmp_path / name).mkdir(exist_ok=True)
        env[var] = str(tmp_path / name)
    return env, log


def compiles(log):
    """How many compiles the counting compiler has run."""
    return len(log.read_text().splitlines()) if log.exists() else 0
