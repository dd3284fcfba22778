"""What kernel libraries pass in their manifests (#28): -isystem directories,
module names of 140-169 characters, the CUDA runtime and driver for C++ units
without CPATH/LIBRARY_PATH, user flags that replace the defaults, and bad
input (exit 2 naming the key, nothing written). Also: the cost log the batch
learns its schedule from."""

import json
import os
import subprocess
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
NVCC = CUDA_HOME / "bin" / "nvcc"

# A template in a header that narrows a non-constant value: a warning from a
# -I header (an error under -Werror=narrowing), nothing from an -isystem one.
NARROW_H = "template <typename T> int narrow(T v) { int a[] = {v}; return a[0]; }\n"
USER = '#include "narrow.h"\nint use(double d) { return narrow(d); }\n'


def run(*args, env, check=None):
    p = subprocess.run([TOOL, *map(str, args)], env=env, capture_output=True, text=True, timeout=600)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, TVMFFI_JIT_CACHE_DIR=str(tmp_path / "cache"))
    for k in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "TVMFFI_JIT_CXX_LAUNCHER",
              "TVMFFI_JIT_CUDA_LAUNCHER", "CXX", "CC"):
        e.pop(k, None)
    return e


def write_manifest(path, **keys):
    path.write_text(json.dumps(keys))
    return path


def test_system_include_paths_hide_a_narrowing_error_that_extra_include_paths_show(tmp_path, env):
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "narrow.h").write_text(NARROW_H)
    (tmp_path / "use.cc").write_text(USER)
    common = dict(sources=["use.cc"], extra_cflags=["-Werror=narrowing"])
    as_i = write_manifest(tmp_path / "as_i.json", name="as_i", extra_include_paths=["vendor"], **common)
    as_isystem = write_manifest(tmp_path / "as_isystem.json", name="as_isystem", system_include_paths=["vendor"], **common)
    p = run("build", "-m", as_i, env=env, check=1)
    assert "narrowing" in p.stderr
    p = run("build", "-m", as_isystem, "--json", env=env, check=0)
    info = json.loads(p.stdout)
    compile_argv = next(c["argv"] for c in info["commands"] if "use.cc" in " ".join(c["argv"]))
    i = compile_argv.index("-isystem")
    assert compile_argv[i + 1] == str(tmp_path / "vendor")
    # The header is keyed like any other: changing it misses.
    (tmp_path / "vendor" / "narrow.h").write_text(NARROW_H + "// changed\n")
    again = json.loads(run("build", "-m", as_isystem, "--json", env=env, check=0).stdout)
    assert again["cache"] == "miss", again.get("miss_reason")
    # The command-line flag does the same.
    p = run("build", tmp_path / "use.cc", "--name", "cli_isystem", "--isystem", tmp_path / "vendor",
            "--cflag=-Werror=narrowing", env=env, check=0)


def test_a_160_character_module_name_builds_hits_and_keeps_its_name(tmp_path, env):
    name = "batch_prefill_with_kv_cache_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_qk_128_" \
           "head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False_f16qk_False"
    assert len(name) >= 160
    (tmp_path / "k.cc").write_text("int answer() { return 42; }\n")
    m = write_manifest(tmp_path / "m.json", name=name, sources=["k.cc"], functions=["answer"])
    first = json.loads(run("build", "-m", m, "--json", env=env, check=0).stdout)
    assert Path(first["path"]).name == name + ".so" and Path(first["path"]).is_file()
    assert len(Path(first["entry_dir"]).name) <= 128
    second = json.loads(run("build", "-m", m, "--json", env=env, check=0).stdout)
    assert second["cache"] == "hit" and second["path"] == first["path"]
    run("cache", "verify", env=env, check=0)


def test_user_o3_and_std_replace_the_defaults_in_the_planned_commands(tmp_path, env):
    (tmp_path / "k.cc").write_text("int f() { return 1; }\n")
    m = write_manifest(tmp_path / "m.json", name="flags", sources=["k.cc"], extra_cflags=["-O3", "-std=c++17"])
    info = json.loads(run("build", "-m", m, "--json", "--no-cache", env=env, check=0).stdout)
    argv = next(c["argv"] for c in info["commands"] if "k.cc" in " ".join(c["argv"]))
    assert "-O2" not in argv and argv.count("-O3") == 1
    assert argv.count("-std=c++17") == 1


@pytest.mark.skipif(not NVCC.exists(), reason=f"no CUDA toolkit at {CUDA_HOME}")
def test_cuda_runtime_and_driver_keys_build_a_cpp_unit_with_no_environment(tmp_path, env):
    (tmp_path / "host.cc").write_text(
        "#include <cuda.h>\n#include <cuda_runtime.h>\n"
        "int devices() { int n = 0; cuInit(0); cudaGetDeviceCount(&n); return n; }\n")
    m = write_manifest(tmp_path / "m.json", name="host_cuda", sources=["host.cc"], functions=["devices"],
                       cuda_runtime=True, cuda_driver=True)
    env["CUDA_HOME"] = str(CUDA_HOME)
    info = json.loads(run("build", "-m", m, "--json", env=env, check=0).stdout)
    needed = subprocess.run(["readelf", "-d", info["path"]], capture_output=True, text=True, check=True).stdout
    assert "libcuda.so.1" in needed and "libcudart.so" in needed
    argv = {c["description"]: c["argv"] for c in info["commands"]}
    compile_argv = next(a for d, a in argv.items() if d.startswith("compiling"))
    assert compile_argv[compile_argv.index("-isystem") + 1] == str(CUDA_HOME / "include")
    link_argv = next(a for d, a in argv.items() if d.startswith("linking"))
    assert f"-L{CUDA_HOME / 'lib64' / 'stubs'}" in link_argv and "-lcuda" in link_argv


@pytest.mark.parametrize("case", ["missing_isystem", "isystem_is_a_file", "long_path", "long_name"])
def test_bad_kernel_library_input_is_exit_2_naming_the_key_and_writes_nothing(tmp_path, env, case):
    (tmp_path / "k.cc").write_text("int f() { return 1; }\n")
    keys = dict(name="m", sources=["k.cc"])
    pointer = {"missing_isystem": "/system_include_paths/0", "isystem_is_a_file": "/system_include_paths/0",
               "long_path": "/system_include_paths/0", "long_name": "/name"}[case]
    if case == "missing_isystem":
        keys["system_include_paths"] = ["nope"]
    elif case == "isystem_is_a_file":
        keys["system_include_paths"] = ["k.cc"]
    elif case == "long_path":
        keys["system_include_paths"] = ["x" * 300]
    else:
        keys["name"] = "n" * 224
    m = write_manifest(tmp_path / "m.json", **keys)
    p = run("build", "-m", m, env=env, check=2)
    assert f"m.json: {pointer}:" in p.stderr, p.stderr
    assert not Path(env["TVMFFI_JIT_CACHE_DIR"]).exists()
