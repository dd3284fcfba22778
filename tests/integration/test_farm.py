"""The sccache-dist loopback farm (bench/farm/sccache_dist_loopback.py) with
C++ units only, so it stays quick on CI: a scheduler and two build servers on
127.0.0.1, tvmffi-jit's --cxx-launcher sccache, compiles on both servers, no
failure and no launcher fallback. Skipped, with the script's precise reason,
where the farm cannot run (not root, no bubblewrap namespaces)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
SCRIPT = SOURCE_DIR / "bench" / "farm" / "sccache_dist_loopback.py"


def test_sccache_dist_loopback_farm_distributes_compiles_to_both_servers():
    env = dict(os.environ, FARM_MODULES="2", FARM_CUDA="0", FARM_JOBS="4")
    p = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=900)
    if p.returncode == 2:
        pytest.skip(p.stderr.strip())
    assert p.returncode == 0, f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in p.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| what")}
    servers = [v for k, v in rows.items() if k.startswith("compiles on server")]
    assert len(servers) == 2 and all(int(v) > 0 for v in servers), rows
    assert rows["dist_errors"] == "0" and rows["compile_fails"] == "0" and rows["launcher fallbacks (tvmffi-jit)"] == "0"
