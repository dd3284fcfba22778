"""The JSON contract: `build --json` (one object; batch lines, failed ones
included) and every `cache <command> --json` validated against
share/tvmffi-jit/{build,cache}.schema.json with real output; `compiler` of a
C++-only module; a cache hit's own `seconds` (docs/build.md "JSON output",
docs/cache.md "JSON output").
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
SHARE = SOURCE_DIR / "share" / "tvmffi-jit"
HAVE_NVCC = (Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc").exists() or shutil.which("nvcc")

ADD = "int64_t add(int64_t a, int64_t b) { return a + b; }\n"


def validator(name, definition=None):
    schema = json.loads((SHARE / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    if definition:  # one shape of the schema, with its $defs in reach
        schema = {**schema, "$ref": f"#/$defs/{definition}"}
        schema.pop("anyOf", None)
    return jsonschema.Draft202012Validator(schema)


def run(*args, env, check=0):
    p = subprocess.run([TOOL, *map(str, args)], env=env, capture_output=True, text=True)
    assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e["TVMFFI_JIT_CACHE_DIR"] = str(tmp_path / "cache")
    for k in ("TVMFFI_JIT_REMOTE", "TVM_FFI_GPU_BACKEND"):
        e.pop(k, None)
    return e


def manifest(folder, name, **keys):
    path = Path(folder) / f"{name}.json"
    path.write_text(json.dumps({"name": name, **keys}))
    return path


def test_build_json_single_results_match_the_schema(tmp_path, env):
    v = validator("build.schema.json", "result")
    m = manifest(tmp_path, "one", cpp_sources=ADD, functions=["add"])
    miss = json.loads(run("build", "--json", "-m", m, env=env).stdout)
    hit = json.loads(run("build", "--json", "-m", m, env=env).stdout)
    off = json.loads(run("build", "--json", "-m", m, "--build-dir", tmp_path / "b", env=env).stdout)
    nocache = json.loads(run("build", "--json", "-m", m, "--no-cache", env=env).stdout)
    for doc in (miss, hit, off, nocache):
        v.validate(doc)
        assert doc["schema_version"] == 1
    assert (miss["cache"], hit["cache"], off["cache"], nocache["cache"]) == ("miss", "hit", "off", "off")
    # A module of C++ sources only ran no device compiler.
    assert miss["compiler"] is None and miss["backend"] == "cuda" and miss["archs"] == []
    # A hit reports its own time: measured, and far below the build it replaced.
    assert 0 < hit["seconds"] < miss["seconds"] and hit["commands"] == []
    # The schema is not a rubber stamp.
    bad = dict(miss, compiler="gcc")
    assert not v.is_valid(bad)
    assert not v.is_valid({k: x for k, x in miss.items() if k != "schema_version"})


@pytest.mark.skipif(not HAVE_NVCC, reason="no nvcc")
def test_build_json_of_a_cuda_module_names_nvcc(tmp_path, env):
    m = manifest(tmp_path, "cu", cuda_sources="__global__ void k(float* x) { x[0] = 1; }\n"
                 "int64_t add(int64_t a, int64_t b) { return a + b; }", functions=["add"], cuda_arch="9.0")
    doc = json.loads(run("build", "--json", "-m", m, env=env).stdout)
    validator("build.schema.json", "result").validate(doc)
    assert doc["compiler"] == "nvcc" and doc["archs"] == ["9.0"]


def test_build_json_batch_lines_match_the_schema(tmp_path, env):
    v = validator("build.schema.json", "batch_line")
    whole = validator("build.schema.json")
    mods = tmp_path / "mods"
    mods.mkdir()
    manifest(mods, "a_ok", cpp_sources=ADD, functions=["add"])
    manifest(mods, "b_bad", cpp_sources="this is not C++", functions=["add"])
    manifest(mods, "c_ok", cpp_sources="int64_t sub(int64_t a, int64_t b) { return a - b; }", functions=["sub"])
    p = run("build", "--json", "-k", "-m", mods, env=env, check=1)
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    assert [d["status"] for d in lines] == ["built", "failed", "built"]
    for d in lines:
        v.validate(d)
        whole.validate(d)
    assert lines[1]["exit_code"] == 1 and "b_bad" in lines[1]["name"]
    again = [json.loads(line) for line in run("build", "--json", "-k", "-m", mods, env=env, check=1).stdout.splitlines()]
    assert [d["status"] for d in again] == ["hit", "failed", "hit"]
    for d in again:
        v.validate(d)
    assert not v.is_valid(dict(lines[1], status="failed", exit_code=None))
    assert not v.is_valid({k: x for k, x in lines[1].items() if k != "exit_code"})


def test_cache_json_of_every_command_matches_the_schema(tmp_path, env):
    v = validator("cache.schema.json")
    m = manifest(tmp_path, "cached", cpp_sources=ADD, functions=["add"])
    run("build", "-m", m, env=env)
    docs = {}
    for cmd in (["path"], ["list"], ["show", "cached"], ["verify"], ["stats"]):
        docs[cmd[0]] = json.loads(run("cache", *cmd, "--json", env=env).stdout)
    docs["export"] = json.loads(run("cache", "export", tmp_path / "x.tar.zst", "--json", env=env).stdout)
    other = dict(env, TVMFFI_JIT_CACHE_DIR=str(tmp_path / "other"))
    docs["import"] = json.loads(run("cache", "import", tmp_path / "x.tar.zst", "--json", env=other).stdout)
    docs["keygen"] = json.loads(run("cache", "keygen", "ci_key", "--out", tmp_path, "--json", env=env).stdout)
    docs["gc"] = json.loads(run("cache", "gc", "--max-size", "1G", "--json", env=env).stdout)
    docs["clean"] = json.loads(run("cache", "clean", "--json", env=env).stdout)
    docs["clean-missing"] = json.loads(run("cache", "clean", "--json", env=dict(env, TVMFFI_JIT_CACHE_DIR=str(tmp_path / "none"))).stdout)
    for name, doc in docs.items():
        v.validate(doc)
        assert doc["schema_version"] == 1 and doc["command"] == name.split("-")[0], name
    assert docs["list"]["entries"][0]["name"] == "cached" and docs["stats"]["misses"] == 1
    assert docs["verify"]["checked"] >= 1 and docs["export"]["exported"] == 1
    assert not v.is_valid(dict(docs["stats"], hits="many"))
    assert not v.is_valid({k: x for k, x in docs["verify"].items() if k != "bad"})
