"""A batch into a new, empty cache root: its modules create the root, mark it
and probe it for writability at the same moment, in threads of one process,
and several processes may do the same. None of them may conclude that the root
is unwritable because of another (that module would be left unstored, and its
artifact in a $TMPDIR directory nobody deletes)."""

import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")


def make_modules(d, n):
    d.mkdir()
    for i in range(n):
        (d / f"fresh_{i}.json").write_text(json.dumps({"name": f"fresh_{i}", "cpp_sources": f"int f{i}() {{ return {i}; }}"}))


def test_a_batch_into_a_new_root_stores_every_module_whatever_the_interleaving(tmp_path):
    mods = tmp_path / "mods"
    make_modules(mods, 8)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TVMFFI_JIT_") or k == "TVMFFI_JIT_BIN"}
    for k in ("CXX", "CC"):
        env.pop(k, None)
    for attempt in range(3):
        root = tmp_path / f"new-{attempt}" / "nested" / "cache"
        tmpdir = tmp_path / f"tmp-{attempt}"
        tmpdir.mkdir()
        run_env = dict(env, TVMFFI_JIT_CACHE_DIR=str(root), TMPDIR=str(tmpdir))

        def one(_):
            return subprocess.run([TOOL, "build", "-m", str(mods), "--json", "-j", "8"], env=run_env,
                                  capture_output=True, text=True, timeout=600)

        # Two processes at once, each a batch of eight threads.
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(one, range(2)))
        for p in results:
            assert p.returncode == 0, p.stderr
            assert "cannot write" not in p.stderr and "without caching" not in p.stderr, p.stderr
            lines = [json.loads(x) for x in p.stdout.splitlines()]
            assert len(lines) == 8
            assert all(str(root) in j["path"] for j in lines), lines  # served from the cache, not $TMPDIR
        assert list(tmpdir.iterdir()) == []
        again = subprocess.run([TOOL, "build", "-m", str(mods), "--json"], env=run_env, capture_output=True,
                               text=True, timeout=600)
        assert [json.loads(x)["status"] for x in again.stdout.splitlines()] == ["hit"] * 8, again.stderr
