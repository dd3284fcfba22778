"""CUDA builds with the real nvcc (no GPU needed): modules for --arch 9.0 that
compile, link and export __tvm_ffi_<f> for every declared function, and the
device-code emits (cubin, fatbin, PTX). Each configuration is built once
(module-scoped fixtures); nvcc calls are the expensive part of this suite.
"""

import json
import os
import struct
import subprocess
from pathlib import Path

import pytest
from tvm_ffi.cpp.extension import _decorate_with_tvm_ffi

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
EXAMPLES = SOURCE_DIR / "share" / "tvmffi-jit" / "examples"
CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
NVCC = CUDA_HOME / "bin" / "nvcc"

pytestmark = pytest.mark.skipif(not NVCC.exists(), reason=f"no nvcc at {NVCC}")

KERNEL = r"""
__global__ void scale_kernel(float* x, float f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= f;
}
"""


def run(*args, cwd=None, env=None, check=None):
    p = subprocess.run([TOOL, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def build_json(*args, cwd=None):
    p = run("build", *args, "--json", cwd=cwd, check=0)
    info = json.loads(p.stdout)
    assert Path(info["path"]).is_file()
    return info


def dynamic_exports(so):
    out = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.split() and line.split()[-2] in ("T", "W")}


def needed_libraries(so):
    out = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True, check=True).stdout
    return [l.split("[")[1].split("]")[0] for l in out.splitlines() if "(NEEDED)" in l]


def fatbin_entries(data):
    """(kind, sm) for every entry of every fatbin container in `data` (a .fatbin
    file or a host ELF's .nv_fatbin section bytes); docs/formats.md, "Fatbin"."""
    entries, pos = [], 0
    while True:
        pos = data.find(struct.pack("<I", 0xBA55ED50), pos)
        if pos < 0:
            return entries
        header_size = struct.unpack_from("<H", data, pos + 6)[0]
        fat_size = struct.unpack_from("<Q", data, pos + 8)[0]
        p, end = pos + header_size, pos + header_size + fat_size
        while p < end:
            kind, _, entry_header, size = struct.unpack_from("<HHIQ", data, p)
            arch = struct.unpack_from("<I", data, p + 28)[0]
            entries.append(({1: "ptx", 2: "elf"}.get(kind, str(kind)), arch))
            p += entry_header + size
        pos = end


def elf_section(path, name):
    """The bytes of one section of an ELF64 little-endian file."""
    data = Path(path).read_bytes()
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i):
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    strtab_off = header(shstrndx)[4]
    for i in range(shnum):
        sh_name, _, _, _, off, size = header(i)
        end = data.index(b"\0", strtab_off + sh_name)
        if data[strtab_off + sh_name:end].decode() == name:
            return data[off:off + size]
    return b""


@pytest.fixture(scope="module")
def example_module(tmp_path_factory):
    """The bundled cuda_add_one example (a .cu file with a kernel and a TensorView function)."""
    d = tmp_path_factory.mktemp("cuda_example")
    return build_json("-m", EXAMPLES / "cuda_add_one" / "manifest.json", "--arch", "9.0", "--build-dir", d)


@pytest.fixture(scope="module")
def mixed_module(tmp_path_factory):
    """Inline C++ declaring functions that inline CUDA defines (load_inline's test_load_inline_both)."""
    d = tmp_path_factory.mktemp("cuda_mixed")
    cpp = "#include <cstdint>\nvoid scale(tvm::ffi::TensorView x, double f);\nint64_t launches();\n"
    cuda = (KERNEL + "#include <cstdint>\nstatic int64_t g_launches = 0;\n"
            "void scale(tvm::ffi::TensorView x, double f) {\n"
            "  scale_kernel<<<1, 32>>>(static_cast<float*>(x.data_ptr()), float(f), int(x.size(0)));\n"
            "  ++g_launches;\n}\n"
            "int64_t launches() { return g_launches; }\n")
    manifest = d / "manifest.json"
    manifest.write_text(json.dumps({"name": "mixed", "cpp_sources": cpp, "cuda_sources": cuda,
                                    "functions": {"scale": "x *= f on the GPU", "launches": ""}}))
    info = build_json("-m", manifest, "--arch", "9.0", "--build-dir", d / "build")
    return info, cpp, cuda, d / "build"


def test_cuda_example_module_exports_its_function(example_module):
    so = Path(example_module["path"])
    assert so.name == "cuda_add_one.so"
    assert "__tvm_ffi_add_one_cuda" in dynamic_exports(so)
    assert any(n.startswith("libcudart.so") for n in needed_libraries(so))
    assert any(n.startswith("libtvm_ffi.so") for n in needed_libraries(so))
    assert example_module["archs"] == ["9.0"] and example_module["arch_source"] == "--arch"
    nvcc = [c["argv"] for c in example_module["commands"] if c["argv"] and c["argv"][0].endswith("nvcc")]
    assert len(nvcc) == 1 and "-gencode=arch=compute_90,code=sm_90" in nvcc[0]
    assert fatbin_entries(elf_section(so, ".nv_fatbin")) == [("elf", 90)]


def test_mixed_module_exports_every_function_from_the_cpp_unit(mixed_module):
    info, cpp, cuda, build_dir = mixed_module
    exports = dynamic_exports(info["path"])
    assert {"__tvm_ffi_scale", "__tvm_ffi_launches"} <= exports
    # Byte-identical to what tvm_ffi.cpp.build_inline writes for the same inputs.
    functions = {"scale": "x *= f on the GPU", "launches": ""}
    assert (build_dir / "main.cpp").read_text() == _decorate_with_tvm_ffi(cpp, functions)
    assert (build_dir / "cuda.cu").read_text() == _decorate_with_tvm_ffi(cuda, {})


def test_cuda_only_inline_module_puts_exports_in_the_cuda_unit(tmp_path):
    cuda = KERNEL + "#include <cstdint>\nint64_t answer() { return 42; }\n"
    info = build_json("--name", "only_cuda", "--function", "answer", "--arch", "9.0", "--emit", "object",
                      "--build-dir", tmp_path, "-m", _manifest(tmp_path, {"name": "only_cuda", "cuda_sources": cuda}))
    assert (tmp_path / "cuda.cu").read_text() == _decorate_with_tvm_ffi(cuda, {"answer": ""})
    assert not (tmp_path / "main.cpp").exists()
    syms = subprocess.run(["nm", info["path"]], capture_output=True, text=True, check=True).stdout
    assert " T __tvm_ffi_answer" in syms


def _manifest(folder, keys):
    path = Path(folder) / "in.json"
    path.write_text(json.dumps(keys))
    return path


def test_fatbin_example_holds_every_arch_and_the_ptx(tmp_path):
    info = build_json("-m", EXAMPLES / "fatbin" / "manifest.json", "--build-dir", tmp_path)
    assert info["emit"] == "fatbin" and info["archs"] == ["8.0", "9.0+PTX"]
    entries = fatbin_entries(Path(info["path"]).read_bytes())
    assert sorted(entries) == [("elf", 80), ("elf", 90), ("ptx", 90)]


def test_cubin_and_ptx_emits(tmp_path):
    (tmp_path / "k.cu").write_text(KERNEL)
    cubin = build_json("k.cu", "--emit", "cubin", "--arch", "9.0a", "--build-dir", tmp_path / "c", cwd=tmp_path)
    data = Path(cubin["path"]).read_bytes()
    assert data[:4] == b"\x7fELF"
    assert int.from_bytes(data[18:20], "little") == 190  # EM_CUDA
    ptx = build_json("k.cu", "--emit", "ptx", "--arch", "9.0", "--cuda-cflag=-lineinfo", "--build-dir", tmp_path / "p",
                     cwd=tmp_path)
    text = Path(ptx["path"]).read_text()
    assert ".target sm_90" in text and ".entry" in text and "scale_kernel" in text
    assert "-lineinfo" in ptx["commands"][0]["argv"]


def test_cubin_for_several_archs_is_exit_2_suggesting_fatbin(tmp_path):
    (tmp_path / "k.cu").write_text(KERNEL)
    p = run("build", "k.cu", "--emit", "cubin", "--arch", "8.0", "--arch", "9.0", "--build-dir", tmp_path / "x",
            cwd=tmp_path, check=2)
    assert "fatbin" in p.stderr
    assert not (tmp_path / "x").exists()


def test_cuda_compile_error_is_exit_1_with_file_and_line(tmp_path):
    (tmp_path / "bad.cu").write_text("__global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n")
    p = run("build", "bad.cu", "--emit", "ptx", "--arch", "9.0", cwd=tmp_path, check=1)
    assert "bad.cu(2)" in p.stderr or "bad.cu:2" in p.stderr
    assert "undefined_name" in p.stderr


def test_split_compile_auto_gives_nvcc_the_gates_jobserver_and_the_trace_says_so(tmp_path):
    """--split-compile auto with the real nvcc: its job holds one slot and runs
    --split-compile=16 --jobserver with the gate's MAKEFLAGS (docs/build.md,
    "Split compilation"); nvcc takes the three idle slots of -j 4 and builds."""
    trace = tmp_path / "trace.jsonl"
    info = build_json("-m", EXAMPLES / "cuda_add_one" / "manifest.json", "--arch", "9.0", "--build-dir",
                      tmp_path / "b", "--split-compile", "auto", "-j", "4", "--job-trace", trace)
    compiles = [c["argv"] for c in info["commands"] if c["argv"] and c["argv"][0].endswith("nvcc") and "-c" in c["argv"]]
    assert len(compiles) == 1
    assert "--split-compile=16" in compiles[0] and "--jobserver" in compiles[0]
    jobs = [json.loads(line) for line in trace.read_text().splitlines()]
    unit = [j for j in jobs if j["step"].startswith("compiling")]
    assert len(unit) == 1 and unit[0]["split"] == 16 and unit[0]["split_lent"] is True and unit[0]["slots"] == 1
    assert "__tvm_ffi_add_one_cuda" in dynamic_exports(info["path"])
    # Without auto: no jobserver, no split.
    plain = build_json("-m", EXAMPLES / "cuda_add_one" / "manifest.json", "--arch", "9.0", "--build-dir",
                       tmp_path / "p", "-j", "4")
    argv = [a for c in plain["commands"] for a in c["argv"]]
    assert "--jobserver" not in argv and not any(a.startswith("--split-compile") for a in argv)
