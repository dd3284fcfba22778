"""Compiler launchers (--cxx-launcher/--cuda-launcher, manifest keys, env,
CXX="ccache g++") with the real ccache and sccache.

Hits are counted from the launchers' own statistics (ccache --print-stats,
sccache --show-stats --stats-format json), each test with a private
CCACHE_DIR / SCCACHE_DIR and sccache server port, never the team's cache.
"""

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
CCACHE = shutil.which("ccache")
SCCACHE = shutil.which("sccache")
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


def run(*args, env, check=0, timeout=600):
    p = subprocess.run([TOOL, *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def build_json(*args, env, check=0):
    p = run("build", *args, "--json", env=env, check=check)
    return json.loads(p.stdout) if check == 0 else p


def clean_env(tmp_path):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("CCACHE_", "SCCACHE_", "TVMFFI_JIT_CXX_LAUNCHER", "TVMFFI_JIT_CUDA_LAUNCHER")):
            del env[k]
    env.pop("CXX", None)
    env.pop("CC", None)
    env["TVMFFI_JIT_CACHE_DIR"] = str(tmp_path / "jit-cache")
    if NVCC:
        env["PATH"] = os.path.dirname(NVCC) + os.pathsep + env.get("PATH", "")
    return env


def write_sources(src, n_cpp):
    src.mkdir(exist_ok=True)
    files = []
    for i in range(n_cpp):
        f = src / f"u{i}.cc"
        f.write_text(f"int value_{i}() {{ return {i}; }}\n")
        files.append(f)
    return files


def compile_commands(result):
    return [c for c in result["commands"] if c["description"].startswith("compiling ")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- ccache


def ccache_env(tmp_path):
    env = clean_env(tmp_path)
    env["CCACHE_DIR"] = str(tmp_path / "ccache")
    env["CCACHE_CONFIGPATH"] = str(tmp_path / "ccache.conf")  # no system or user config
    (tmp_path / "ccache.conf").write_text("")
    return env


def ccache_stats(env):
    out = subprocess.run([CCACHE, "--print-stats"], env=env, capture_output=True, text=True, check=True).stdout
    stats = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
    num = lambda k: int(stats.get(k, "0"))
    return {"hits": num("direct_cache_hit") + num("preprocessed_cache_hit"), "misses": num("cache_miss"),
            "uncacheable": num("called_for_link") + num("multiple_source_files") + num("unsupported_compiler_option")}


@pytest.mark.skipif(not CCACHE, reason="ccache not installed (scripts/setup.sh installs it)")
def test_ccache_launcher_hits_every_unchanged_object_after_a_one_file_edit(tmp_path):
    env = ccache_env(tmp_path)
    files = write_sources(tmp_path / "src", 3)
    args = [*files, "--name", "m", "--cxx-launcher", "ccache", "--no-cache"]
    first = build_json(*args, env=env)
    assert ccache_stats(env) == {"hits": 0, "misses": 3, "uncacheable": 0}
    cmds = compile_commands(first)
    assert all(os.path.basename(c["argv"][0]) == "ccache" for c in cmds)
    link = [c for c in first["commands"] if c["description"].startswith("linking")]
    assert link and "ccache" not in os.path.basename(link[0]["argv"][0])  # never the link
    assert first["launcher_fallbacks"] == 0

    files[1].write_text("int value_1() { return 42; }\n")
    build_json(*args, env=env)
    assert ccache_stats(env) == {"hits": 2, "misses": 4, "uncacheable": 0}


@pytest.mark.skipif(not CCACHE, reason="ccache not installed")
def test_cxx_variable_with_a_launcher_word_runs_compiles_through_it(tmp_path):
    env = ccache_env(tmp_path)
    env["CXX"] = "ccache " + (shutil.which("g++") or "c++")
    files = write_sources(tmp_path / "src", 2)
    r = build_json(*files, "--name", "m", "--no-cache", env=env)
    assert ccache_stats(env)["misses"] == 2
    assert [os.path.basename(c["argv"][0]) for c in compile_commands(r)] == ["ccache", "ccache"]


@pytest.mark.skipif(not (CCACHE and NVCC), reason="needs ccache and nvcc")
def test_ccache_caches_nvcc_objects_but_passes_cubin_through_uncached(tmp_path):
    env = ccache_env(tmp_path)
    k = tmp_path / "k.cu"
    k.write_text("__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n")
    obj = ["--emit", "object", "--arch", "8.0", "--cuda-launcher", "ccache", "--no-cache", "--name", "k"]
    build_json(k, *obj, env=env)
    build_json(k, *obj, env=env)
    s = ccache_stats(env)
    assert (s["hits"], s["misses"]) == (1, 1)  # nvcc -c behind ccache 4.7 needs -MD -MF: it got them
    r = build_json(k, "--emit", "cubin", "--arch", "8.0", "--cuda-launcher", "ccache", "--no-cache", env=env)
    assert Path(r["path"]).read_bytes()[:4] == b"\x7fELF"
    assert ccache_stats(env)["uncacheable"] == 1  # ccache's known limit: -cubin/-fatbin/-ptx run uncached


# ---------------------------------------------------------------- fallback and the key


def write_launcher(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_a_launcher_that_exits_0_without_outputs_falls_back_and_is_counted(tmp_path):
    env = clean_env(tmp_path)
    liar = write_launcher(tmp_path / "liar", "exit 0\n")  # claims success, writes nothing
    files = write_sources(tmp_path / "src", 2)
    r = build_json(*files, "--name", "m", "--cxx-launcher", liar, env=env)
    assert r["launcher_fallbacks"] == 2
    assert Path(r["path"]).stat().st_size > 0
    assert all(c["argv"][0] != str(liar) for c in compile_commands(r))  # what finally ran
    stats = json.loads(run("cache", "stats", "--json", env=env).stdout)
    assert stats["launcher_fallbacks"] == 2


def test_an_empty_object_from_a_launcher_also_falls_back(tmp_path):
    env = clean_env(tmp_path)
    # Runs the compiler, then truncates the object: "exists" is not enough.
    bad = write_launcher(tmp_path / "truncating", '"$@" || exit $?\nfor a; do last=$a; done\n: > "$last"\n')
    files = write_sources(tmp_path / "src", 1)
    r = build_json(*files, "--name", "m", "--cxx-launcher", bad, "--no-cache", env=env)
    assert r["launcher_fallbacks"] == 1


def test_a_failing_launcher_fails_the_build_like_the_compiler(tmp_path):
    env = clean_env(tmp_path)
    failing = write_launcher(tmp_path / "failing", "echo launcher broke >&2\nexit 3\n")
    files = write_sources(tmp_path / "src", 1)
    p = run("build", *files, "--name", "m", "--cxx-launcher", failing, env=env, check=1)
    assert "launcher broke" in p.stderr and str(failing) in p.stderr


def test_launchers_are_not_in_the_cache_key(tmp_path):
    env = clean_env(tmp_path)
    passthrough = write_launcher(tmp_path / "passthrough", 'exec "$@"\n')
    files = write_sources(tmp_path / "src", 1)
    a = build_json(*files, "--name", "m", "--cxx-launcher", passthrough, env=env)
    b = build_json(*files, "--name", "m", env=env)
    env["TVMFFI_JIT_CXX_LAUNCHER"] = str(passthrough)
    c = build_json(*files, "--name", "m", env=env)
    assert a["cache"] == "miss" and b["cache"] == "hit" and c["cache"] == "hit"
    assert a["key"] == b["key"] == c["key"]


def test_launcher_from_the_environment_and_manifest_and_an_empty_one_turns_it_off(tmp_path):
    env = clean_env(tmp_path)
    log = tmp_path / "launch.log"
    logging = write_launcher(tmp_path / "logging", f'echo "$@" >> {log}\nexec "$@"\n')
    files = write_sources(tmp_path / "src", 1)
    env["TVMFFI_JIT_CXX_LAUNCHER"] = str(logging)
    build_json(*files, "--name", "m", "--no-cache", env=env)
    assert len(log.read_text().splitlines()) == 1
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"name": "m", "sources": [str(files[0])], "cxx_launcher": ""}))
    build_json("-m", manifest, "--no-cache", env=env)
    assert len(log.read_text().splitlines()) == 1  # the manifest's empty launcher wins over the environment
    build_json("-m", manifest, "--no-cache", "--cxx-launcher", logging, env=env)
    assert len(log.read_text().splitlines()) == 2


def test_a_missing_launcher_is_exit_4_naming_it(tmp_path):
    env = clean_env(tmp_path)
    env["TVMFFI_JIT_CXX_LAUNCHER"] = "no-such-launcher-xyz"
    files = write_sources(tmp_path / "src", 1)
    p = run("build", *files, "--name", "m", env=env, check=4)
    assert "no-such-launcher-xyz" in p.stderr and "TVMFFI_JIT_CXX_LAUNCHER" in p.stderr


# ---------------------------------------------------------------- sccache


@pytest.fixture
def sccache_env(tmp_path):
    if not SCCACHE:
        pytest.skip("sccache not installed (scripts/setup.sh installs it from PyPI)")
    env = clean_env(tmp_path)
    env["SCCACHE_DIR"] = str(tmp_path / "sccache")
    env["SCCACHE_SERVER_PORT"] = str(free_port())
    env["SCCACHE_IDLE_TIMEOUT"] = "300"
    env["SCCACHE_CONF"] = str(tmp_path / "sccache.toml")  # no user config
    (tmp_path / "sccache.toml").write_text("")
    subprocess.run([SCCACHE, "--start-server"], env=env, check=True, capture_output=True, timeout=60)
    yield env
    subprocess.run([SCCACHE, "--stop-server"], env=env, capture_output=True, timeout=60)


def sccache_stats(env):
    out = subprocess.run([SCCACHE, "--show-stats", "--stats-format", "json"], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    s = json.loads(out)["stats"]
    return s["cache_hits"]["counts"], s["cache_misses"]["counts"], s["compile_fails"]


@pytest.mark.skipif(not NVCC, reason="needs nvcc")
def test_sccache_launcher_hits_every_unchanged_object_after_a_one_file_edit(tmp_path, sccache_env):
    env = sccache_env
    files = write_sources(tmp_path / "src", 2)
    cu = tmp_path / "src" / "k.cu"
    cu.write_text("__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\nvoid launch(float* x) { k<<<1, 1>>>(x); }\n")
    args = [*files, cu, "--name", "m", "--arch", "8.0", "--cxx-launcher", "sccache", "--cuda-launcher", "sccache",
            "--no-cache"]
    first = build_json(*args, env=env)
    assert first["launcher_fallbacks"] == 0
    hits, misses, fails = sccache_stats(env)
    assert fails == 0
    assert misses.get("C/C++") == 2 and misses.get("CUDA") == 1, misses
    assert not hits.get("C/C++") and not hits.get("CUDA"), hits

    files[0].write_text("int value_0() { return 7; }\n")
    second = build_json(*args, env=env)
    assert second["launcher_fallbacks"] == 0
    hits, misses, fails = sccache_stats(env)
    assert fails == 0
    assert hits.get("C/C++") == 1 and hits.get("CUDA") == 1, hits  # the unchanged .cc and the .cu
    assert misses.get("C/C++") == 3, misses  # plus the edited one
