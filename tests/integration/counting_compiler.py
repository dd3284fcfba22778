"""A C++ compiler that counts its compile runs, and an environment free of the
tool's own settings: what the remote and batch tests use to observe "spawns
no compiler" rather than infer it from the tool's JSON."""

import os
import shutil

REAL_CXX = shutil.which("g++") or shutil.which("c++")

# Settings a developer's shell may carry that would change what a test observes.
TOOL_SETTINGS = ("CC", "TVMFFI_JIT_REMOTE", "TVMFFI_JIT_REMOTE_READ_ONLY", "TVMFFI_JIT_REMOTE_NAMESPACE",
                 "TVMFFI_JIT_BASE_DIR", "TVMFFI_JIT_CACHE_DIR", "TVMFFI_JIT_REMOTE_SIGN_KEY",
                 "TVMFFI_JIT_REMOTE_TRUSTED_KEYS", "TVMFFI_JIT_CXX_LAUNCHER", "TVMFFI_JIT_CUDA_LAUNCHER",
                 "TVMFFI_JIT_CGROUP_ROOT")


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
    return env, log


def compiles(log):
    """How many compiles the counting compiler has run."""
    return len(log.read_text().splitlines()) if log.exists() else 0
