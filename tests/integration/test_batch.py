"""Batch AOT builds: several manifests (-m a -m b, a directory, a glob, a
"modules" manifest) built in one job pool, with --keep-going, the summary
table on stderr, paths or JSON lines on stdout."""

import json
import os
import subprocess
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")


def run(*args, env=None, check=None, timeout=600):
    p = subprocess.run([TOOL, *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


@pytest.fixture
def mods(tmp_path):
    """Three small C++ modules (no tvm-ffi headers: quick compiles), one manifest each."""
    d = tmp_path / "mods"
    d.mkdir()
    env = dict(os.environ, TVMFFI_JIT_CACHE_DIR=str(tmp_path / "cache"))
    for k in ("TVMFFI_JIT_CXX_LAUNCHER", "TVMFFI_JIT_CUDA_LAUNCHER", "CXX", "CC"):
        env.pop(k, None)

    def write(name, code):
        (d / f"{name}.json").write_text(json.dumps({"name": name, "cpp_sources": code}))
        return d / f"{name}.json"

    class M:
        pass

    m = M()
    m.dir, m.env, m.write, m.cache = d, env, write, tmp_path / "cache"
    m.a = write("mod_a", "int a() { return 1; }")
    m.b = write("mod_b", "int b() { return 2; }")
    m.c = write("mod_c", "int c() { return 3; }")
    return m


def test_a_batch_with_one_failing_module_and_keep_going_builds_the_rest_and_exits_1(mods):
    bad = mods.write("mod_bad", "int broken( { return ; }")
    p = run("build", "-m", mods.a, "-m", bad, "-m", mods.b, "-m", mods.c, "--keep-going", "-j", "2", env=mods.env,
            check=1)
    # One line per module in input order; the failed one's is empty.
    lines = p.stdout.split("\n")[:-1]
    assert [Path(x).name for x in lines] == ["mod_a.so", "", "mod_b.so", "mod_c.so"]
    assert all(Path(x).stat().st_size > 0 for x in lines if x)
    # The failure is shown with its module, and the summary table closes stderr.
    assert "mod_bad" in p.stderr and "broken" in p.stderr
    table = p.stderr[p.stderr.index("module  "):]
    rows = {line.split()[0]: line.split()[1] for line in table.splitlines()[1:5]}
    assert rows == {"mod_a": "built", "mod_bad": "failed", "mod_b": "built", "mod_c": "built"}
    assert "4 modules: 3 built, 0 hit, 1 failed, 0 skipped" in table


def test_without_keep_going_a_failure_stops_new_modules_and_reports_them_skipped(mods):
    # Modules of equal (unknown) cost start by name, never by input order: this one first.
    bad = mods.write("mod_0bad", "int broken( {")
    p = run("build", "-m", bad, "-m", mods.a, "-m", mods.b, "-m", mods.c, "-j", "1", env=mods.env, check=1)
    assert "1 failed" in p.stderr
    assert "skipped" in p.stderr
    lines = p.stdout.split("\n")[:-1]
    assert len(lines) == 4 and lines[0] == ""  # one line per module, empty when it failed or was skipped
    assert len([x for x in lines if x]) < 3


def test_json_lines_one_per_module_and_a_second_run_hits_everything(mods):
    p = run("build", "-m", mods.dir, "--json", env=mods.env, check=0)
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [(j["name"], j["status"], j["cache"]) for j in lines] == [
        ("mod_a", "built", "miss"), ("mod_b", "built", "miss"), ("mod_c", "built", "miss")]
    assert all(j["origin"].endswith(".json") and os.path.isfile(j["path"]) for j in lines)
    again = run("build", "-m", str(mods.dir / "*.json"), "--json", env=mods.env, check=0)
    assert [json.loads(x)["status"] for x in again.stdout.splitlines()] == ["hit", "hit", "hit"]
    assert "3 modules: 0 built, 3 hit" in again.stderr


def test_a_modules_manifest_lists_paths_and_inline_modules(mods, tmp_path):
    all_json = tmp_path / "all.json"
    all_json.write_text(json.dumps({"modules": ["mods/mod_a.json", {"name": "inline_m", "cpp_sources": "int z;"}]}))
    p = run("build", "-m", all_json, env=mods.env, check=0)
    assert [Path(x).name for x in p.stdout.splitlines()] == ["mod_a.so", "inline_m.so"]


def test_a_bad_manifest_in_a_batch_is_exit_2_and_nothing_is_built(mods):
    bad = mods.dir / "zz_bad.json"
    bad.write_text(json.dumps({"name": "zz", "cpp_sources": "int q;", "extra_cflag": ["-O3"]}))
    p = run("build", "-m", mods.dir, env=mods.env, check=2)
    assert "zz_bad.json" in p.stderr and "extra_cflag" in p.stderr
    assert not (mods.cache.exists() and any(mods.cache.rglob("*.so")))


def test_one_module_options_are_refused_in_a_batch(mods, tmp_path):
    p = run("build", "-m", mods.a, "-m", mods.b, "-o", tmp_path / "x.so", env=mods.env, check=2)
    assert "--output" in p.stderr


def test_a_source_shared_by_two_modules_is_compiled_once(mods, tmp_path):
    shared = tmp_path / "shared.cc"
    shared.write_text("int shared_value() { return 5; }\n")
    for name in ("s1", "s2"):
        (mods.dir / f"{name}.json").write_text(json.dumps({"name": name, "sources": [str(shared)],
                                                           "cpp_sources": f"int {name}_own() {{ return 1; }}"}))
    p = run("build", "-m", mods.dir / "s1.json", "-m", mods.dir / "s2.json", "--json", "-j", "2", env=mods.env,
            check=0)
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    # Two own units and one shared: three compiles, one reuse, whichever module got there first.
    assert sum(j["objects_compiled"] for j in lines) == 3
    assert sum(j["objects_reused"] for j in lines) == 1
