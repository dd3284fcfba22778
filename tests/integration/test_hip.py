"""Backend hip, as tvm_ffi.cpp builds it: C++-only sources with the ROCm
include directory and libamdhip64, HIP sources (inline CUDA, .cu or .hip
files) with hipcc for a gfx target, no GPU needed to build or to load the
module's host code; the backend from --backend, the manifest, a .hip source or
Python's backend=; arch errors that name the fixes (docs/build.md "HIP").

Needs hipcc (Debian 12: `apt-get install hipcc`, which scripts/setup.sh
--with-test-deps installs); skipped without it.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
HIPCC = shutil.which("hipcc")
pytestmark = pytest.mark.skipif(HIPCC is None, reason="no hipcc (scripts/setup.sh --with-test-deps installs it)")

ADD = "int64_t add(int64_t a, int64_t b) { return a + b; }\n"
HIP_SOURCE = r"""
#include <hip/hip_runtime.h>
__global__ void add_one_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
int64_t threads_per_block() { return 256; }
"""


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e["TVMFFI_JIT_CACHE_DIR"] = str(tmp_path / "cache")
    for k in ("TVM_FFI_ROCM_ARCH_LIST", "TVM_FFI_GPU_BACKEND", "ROCM_HOME", "ROCM_PATH"):
        e.pop(k, None)
    return e


def run(*args, env, check=0):
    p = subprocess.run([TOOL, *map(str, args)], env=env, capture_output=True, text=True)
    assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def manifest(folder, **keys):
    path = Path(folder) / "m.json"
    path.write_text(json.dumps(keys))
    return path


def call(module, fn, *args):
    code = f"import tvm_ffi,sys; print(tvm_ffi.load_module(sys.argv[1]).{fn}(*map(int, sys.argv[2:])))"
    return int(subprocess.run([sys.executable, "-c", code, str(module), *map(str, args)], check=True,
                              capture_output=True, text=True).stdout)


def offload_targets(module):
    """The gfx targets of the HIP code objects bundled into the module (its .hip_fatbin section)."""
    with tempfile.TemporaryDirectory() as d:
        dump = Path(d) / "hip_fatbin"
        section = subprocess.run(["objcopy", "--dump-section", f".hip_fatbin={dump}", str(module), str(Path(d) / "copy")],
                                 capture_output=True, text=True)
        assert section.returncode == 0, section.stderr
        data = dump.read_bytes()
    return sorted({t.decode() for t in re.findall(rb"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)", data)})


def test_cpp_only_module_with_backend_hip_builds_as_tvm_ffi_does(tmp_path, env):
    m = manifest(tmp_path, name="hcpp", cpp_sources=ADD, functions=["add"], backend="hip")
    info = json.loads(run("build", "--json", "-m", m, "--build-dir", tmp_path / "b", env=env).stdout)
    assert info["backend"] == "hip" and info["compiler"] is None and info["archs"] == []
    compile_argv, link_argv = (c["argv"] for c in info["commands"])
    rocm_home = Path(HIPCC).resolve().parent.parent
    assert f"-I{rocm_home / 'include'}" in compile_argv and compile_argv[0].endswith("c++")
    assert link_argv[-4:-2] == ["-lamdhip64", "-o"] or "-lamdhip64" in link_argv
    assert f"-L{rocm_home / 'lib'}" in link_argv
    assert call(info["path"], "add", 2, 3) == 5


def test_hip_module_builds_for_one_gfx_target_without_a_gpu(tmp_path, env):
    m = manifest(tmp_path, name="hk", cuda_sources=HIP_SOURCE, functions=["threads_per_block"], backend="hip",
                 rocm_arch="gfx90a")
    b = tmp_path / "b"
    info = json.loads(run("build", "--json", "-m", m, "--build-dir", b, env=env).stdout)
    assert (info["compiler"], info["backend"], info["archs"], info["arch_source"]) == ("hipcc", "hip", ["gfx90a"], "manifest")
    compile_argv = info["commands"][0]["argv"]
    assert compile_argv[0] == str(Path(HIPCC).resolve().parent / "hipcc") or compile_argv[0].endswith("/hipcc")
    assert {"-D__HIP_PLATFORM_AMD__=1", "-fno-gpu-rdc", "--offload-arch=gfx90a", "-fPIC"} <= set(compile_argv)
    assert offload_targets(info["path"]) == ["gfx90a"]
    assert call(info["path"], "threads_per_block") == 256  # the host side loads and runs without a GPU
    # hipcc's depfile makes the build directory incremental too.
    assert json.loads(run("build", "--json", "-m", m, "--build-dir", b, env=env).stdout)["commands"] == []


def test_hip_file_source_selects_hip_and_arch_comes_from_the_environment(tmp_path, env):
    src = tmp_path / "kern.hip"
    src.write_text(HIP_SOURCE)
    info = json.loads(run("build", "--json", src, "--function", "threads_per_block", env=dict(
        env, TVM_FFI_ROCM_ARCH_LIST="gfx908")).stdout)
    assert (info["backend"], info["archs"], info["arch_source"]) == ("hip", ["gfx908"], "TVM_FFI_ROCM_ARCH_LIST")
    assert offload_targets(info["path"]) == ["gfx908"]
    assert call(info["path"], "threads_per_block") == 256


def test_missing_rocm_arch_names_the_fixes(tmp_path, env):
    m = manifest(tmp_path, name="noarch", cuda_sources=HIP_SOURCE, functions=["threads_per_block"], backend="hip")
    p = run("build", "-m", m, env=env, check=4)
    for fix in ("TVM_FFI_ROCM_ARCH_LIST", "extra_cuda_cflags", "--offload-arch=gfx90a", "--arch gfx90a", "rocm_arch"):
        assert fix in p.stderr, p.stderr
    # The Python way out works: the flag carries the target.
    m2 = manifest(tmp_path, name="noarch", cuda_sources=HIP_SOURCE, functions=["threads_per_block"], backend="hip",
                  extra_cuda_cflags=["--offload-arch=gfx90a"])
    info = json.loads(run("build", "--json", "-m", m2, env=env).stdout)
    assert info["arch_source"] == "extra_cuda_cflags" and offload_targets(info["path"]) == ["gfx90a"]


def test_backend_mismatches_are_refused_before_anything_runs(tmp_path, env):
    src = tmp_path / "kern.hip"
    src.write_text(HIP_SOURCE)
    p = run("build", src, "--backend", "cuda", "--name", "x", env=env, check=2)
    assert "backend hip" in p.stderr and "--backend" in p.stderr
    p = run("build", src, "--arch", "9.0", "--name", "x", env=env, check=2)
    assert "ROCm targets" in p.stderr
    m = manifest(tmp_path, name="y", cpp_sources=ADD, backend="rocm")
    assert "expected cuda or hip" in run("build", "-m", m, env=env, check=2).stderr


def test_python_backend_hip(tmp_path, env, monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TVMFFI_JIT_BIN", TOOL)
    sys.path.insert(0, str(SOURCE_DIR / "python"))
    import tvmffi_jit

    mod = tvmffi_jit.load_inline("pyhip", cpp_sources=ADD, functions=["add"], backend="hip")
    assert mod.add(2, 3) == 5
    path = tvmffi_jit.build_inline("pyhipk", cuda_sources=HIP_SOURCE, functions=["threads_per_block"], backend="hip",
                                   extra_cuda_cflags=["--offload-arch=gfx90a"])
    assert offload_targets(path) == ["gfx90a"]
    with pytest.raises(tvmffi_jit.BuildError) as e:
        tvmffi_jit.build_inline("pyhipn", cuda_sources=HIP_SOURCE, functions=["threads_per_block"], backend="hip")
    assert e.value.exit_code == 4 and "TVM_FFI_ROCM_ARCH_LIST" in str(e.value) and "extra_cuda_cflags" in str(e.value)
    with pytest.raises(ValueError):
        tvmffi_jit.build_inline("bad", cpp_sources=ADD, backend="rocm")
