"""NVRTC backend and cubin embedding through the real binary.

* NVRTC and nvcc agree on the kernel set of a corpus with templates, extern "C",
  overloads, a static kernel and a non-inlined device function;
* cubin / PTX / fatbin outputs inspected offline (kernels, archs, PTX presence);
* --kernel-name lowering, NVRTC failures (exit 1 with the log), missing NVRTC (exit 4);
* a module with embedded cubins: __tvm_ffi__cubin_<name> local and not exported,
  the bytes between the symbols equal to the input, a C++ source using
  TVM_FFI_EMBED_CUBIN / TVM_FFI_EMBED_CUBIN_GET_KERNEL builds, links and loads,
  and the embedded file's bytes are part of the cache key.

The ELF reading below is deliberately independent of `tvmffi-jit inspect`, so
the two check each other.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
EXAMPLE_DIR = SOURCE_DIR / "share" / "tvmffi-jit" / "examples" / "embed_cubin"
CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))

CORPUS = r"""
namespace ops {
template <typename T, int N>
__global__ void unrolled(T* x) {
#pragma unroll
  for (int i = 0; i < N; ++i) x[threadIdx.x * N + i] += T(i);
}
template __global__ void unrolled<float, 4>(float*);
template __global__ void unrolled<double, 2>(double*);

struct Pair { float a, b; };
__global__ void by_struct(Pair p, float* out) { out[threadIdx.x] = p.a * p.b; }
}  // namespace ops

extern "C" __global__ void c_entry(int* x) { x[threadIdx.x] = static_cast<int>(threadIdx.x); }

__device__ __noinline__ int helper(int v) { return v * 3 + 1; }
__global__ void calls_helper(int* x) { x[threadIdx.x] = helper(x[threadIdx.x]); }

__global__ void overloaded(int* x) { x[0] = 1; }
__global__ void overloaded(float* x) { x[0] = 1.0f; }

static __global__ void internal_kernel(int* x) { x[0] = 7; }

__constant__ float table[4];
__device__ int counter;
__global__ void uses_globals(float* out) { out[0] = table[threadIdx.x % 4]; atomicAdd(&counter, 1); }
"""

CORPUS_KERNELS = {
    "_ZN3ops8unrolledIfLi4EEEvPT_",
    "_ZN3ops8unrolledIdLi2EEEvPT_",
    "_ZN3ops9by_structENS_4PairEPf",
    "c_entry",
    "_Z12calls_helperPi",
    "_Z10overloadedPi",
    "_Z10overloadedPf",
    "_Z15internal_kernelPi",
    "_Z12uses_globalsPf",
}

EXAMPLE_KERNELS = {"add_one", "_Z5scaleIfEvPT_S0_x"}

# The launcher side of an embed: what a user writes against tvm-ffi's header.
LAUNCHER = r"""
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/cuda/cubin_launcher.h>
#include <tvm/ffi/function.h>

TVM_FFI_EMBED_CUBIN(prebuilt);
TVM_FFI_EMBED_CUBIN(from_cu);

// Not called here (no GPU): referencing the kernels is what must compile and link.
void LaunchCEntry(tvm::ffi::TensorView x) {
  static auto kernel = TVM_FFI_EMBED_CUBIN_GET_KERNEL(prebuilt, "c_entry");
  void* ptr = x.data_ptr();
  void* args[] = {&ptr};
  TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(kernel.Launch(args, tvm::ffi::dim3(1), tvm::ffi::dim3(32), nullptr));
}
void LaunchAddOne(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  static auto kernel = TVM_FFI_EMBED_CUBIN_GET_KERNEL(from_cu, "add_one");
  const void* xp = x.data_ptr();
  void* yp = y.data_ptr();
  long long n = x.size(0);
  void* args[] = {&xp, &yp, &n};
  TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(kernel.Launch(args, tvm::ffi::dim3(1), tvm::ffi::dim3(256), nullptr));
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(launch_c_entry, LaunchCEntry);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(launch_add_one, LaunchAddOne);
"""


# ---------------------------------------------------------------- ELF reading


class Elf:
    """ELF64 little-endian: sections and the symbols of .symtab / .dynsym."""

    def __init__(self, path):
        self.data = Path(path).read_bytes()
        d = self.data
        assert d[:4] == b"\x7fELF" and d[4] == 2 and d[5] == 1, f"{path}: not an ELF64 LE file"
        self.abi_version = d[8]
        (self.type, self.machine, _, _, _, shoff, self.flags, _, _, _, shentsize, shnum, shstrndx) = struct.unpack_from(
            "<HHIQQQIHHHHHH", d, 16
        )
        self.sections = []
        for i in range(shnum):
            name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from(
                "<IIQQQQIIQQ", d, shoff + i * shentsize
            )
            self.sections.append(dict(name=name, type=typ, flags=flags, addr=addr, offset=off, size=size, link=link))
        strtab = self.sections[shstrndx]
        for s in self.sections:
            s["name"] = self._string(strtab, s["name"])

    def _string(self, strtab, offset):
        start = strtab["offset"] + offset
        return self.data[start : self.data.index(b"\0", start)].decode()

    def symbols(self, table):
        out = {}
        for s in self.sections:
            if s["name"] != table:
                continue
            strtab = self.sections[s["link"]]
            for off in range(s["offset"], s["offset"] + s["size"], 24):
                name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", self.data, off)
                out[self._string(strtab, name)] = dict(
                    bind=info >> 4, type=info & 0xF, other=other, shndx=shndx, value=value, size=size
                )
        return out

    def kernels(self):
        """Cubin kernels: STT_FUNC with STO_CUDA_ENTRY (st_other & 0x10)."""
        return {n for n, s in self.symbols(".symtab").items() if s["type"] == 2 and s["other"] & 0x10}

    def sm(self):
        return (self.flags >> 8) & 0xFF if self.abi_version >= 8 else self.flags & 0xFF

    def bytes_between(self, start_symbol, end_symbol):
        syms = self.symbols(".symtab")
        start, end = syms[start_symbol], syms[end_symbol]
        assert start["shndx"] == end["shndx"]
        sec = self.sections[start["shndx"]]
        begin = sec["offset"] + start["value"] - sec["addr"]
        return self.data[begin : begin + end["value"] - start["value"]], sec


STB_LOCAL = 0
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4


# ---------------------------------------------------------------- running the tool


def run_tool(*args, env=None, cwd=None):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, env=full_env, cwd=cwd)


def build(*args, env=None):
    r = run_tool("build", "--json", *args, env=env)
    assert r.returncode == 0, f"build {args} failed ({r.returncode}):\n{r.stderr}"
    return json.loads(r.stdout)


def inspect_json(path):
    r = run_tool("inspect", "--json", path)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["files"][0]


def ptx_entries(text):
    entries = set()
    for line in text.splitlines():
        words = line.replace("(", " ").split()
        if ".entry" in words:
            entries.add(words[words.index(".entry") + 1])
    return entries


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("nvrtc_embed")
    (d / "corpus.cu").write_text(CORPUS)
    return d


@pytest.fixture(scope="module")
def env(work):
    # A private cache: nothing from other runs, nothing left in the user's.
    return {"TVMFFI_JIT_CACHE_DIR": str(work / "cache")}


@pytest.fixture(scope="module")
def outputs(work, env):
    """Every device output of the corpus, built once for the module."""
    src = work / "corpus.cu"
    out = {}
    for key, args in {
        "nvrtc_cubin": ["--compiler", "nvrtc", "--emit", "cubin", "--arch", "9.0"],
        "nvcc_cubin": ["--compiler", "nvcc", "--emit", "cubin", "--arch", "9.0"],
        "nvrtc_ptx": ["--compiler", "nvrtc", "--emit", "ptx", "--arch", "9.0"],
        "nvcc_ptx": ["--compiler", "nvcc", "--emit", "ptx", "--arch", "9.0"],
        "nvcc_fatbin": ["--emit", "fatbin", "--arch", "8.0,9.0+PTX"],
    }.items():
        out[key] = Path(build(src, *args, "--build-dir", work / key, env=env)["path"])
    return out


# ---------------------------------------------------------------- device outputs


@pytest.mark.parametrize("backend", ["nvrtc", "nvcc"])
def test_cubin_holds_the_corpus_kernels_for_sm_90(outputs, backend):
    elf = Elf(outputs[f"{backend}_cubin"])
    assert elf.machine == 190  # EM_CUDA
    assert elf.sm() == 90
    assert elf.kernels() == CORPUS_KERNELS
    # The device function is code, not an entry.
    assert not any("helper" in k and "calls" not in k for k in elf.kernels())


def test_nvrtc_and_nvcc_agree_on_kernels_and_inspect_agrees(outputs):
    nvrtc = inspect_json(outputs["nvrtc_cubin"])
    nvcc = inspect_json(outputs["nvcc_cubin"])
    for f in (nvrtc, nvcc):
        assert f["format"] == "cubin"
        [entry] = f["entries"]
        assert entry["arch"] == "sm_90"
        assert {k["name"] for k in entry["kernels"]} == CORPUS_KERNELS
    by_name = lambda f: {k["name"]: k for k in f["entries"][0]["kernels"]}
    # Same signatures, so the same parameter layout from both front ends.
    for name, k in by_name(nvrtc).items():
        assert by_name(nvcc)[name]["param_bytes"] == k["param_bytes"], name


@pytest.mark.parametrize("backend", ["nvrtc", "nvcc"])
def test_ptx_is_text_for_compute_90_with_every_entry(outputs, backend):
    text = outputs[f"{backend}_ptx"].read_text()
    assert ".target sm_90" in text
    assert ptx_entries(text) == CORPUS_KERNELS
    f = inspect_json(outputs[f"{backend}_ptx"])
    assert f["format"] == "ptx"


def test_fatbin_holds_sass_for_each_arch_and_ptx_for_the_last(outputs):
    f = inspect_json(outputs["nvcc_fatbin"])
    assert f["format"] == "fatbin"
    elf_archs = sorted(e["arch"] for e in f["entries"] if e["kind"] == "elf")
    ptx_archs = sorted(e["arch"] for e in f["entries"] if e["kind"] == "ptx")
    assert elf_archs == ["sm_80", "sm_90"]
    assert ptx_archs == ["compute_90"]
    for e in f["entries"]:
        if e["kind"] == "elf":
            assert {k["name"] for k in e["kernels"]} == CORPUS_KERNELS, e["arch"]


@pytest.mark.parametrize("backend", ["nvrtc", "nvcc"])
def test_a_cubin_for_two_archs_is_a_usage_error(work, env, backend):
    r = run_tool("build", work / "corpus.cu", "--compiler", backend, "--emit", "cubin", "--arch", "8.0,9.0",
                 "--build-dir", work / f"two_archs_{backend}", env=env)
    assert r.returncode == 2, r.stderr
    assert "fatbin" in r.stderr  # says what to use instead


# ---------------------------------------------------------------- NVRTC specifics


def test_kernel_names_instantiate_templates_and_report_lowered_names(work, env):
    result = build(work / "corpus.cu", "--compiler", "nvrtc", "--emit", "cubin", "--arch", "9.0",
                   "--kernel-name", "ops::unrolled<int, 8>", "--kernel-name", "(void (*)(float*))overloaded",
                   "--build-dir", work / "lowered", env=env)
    lowered = result["lowered_names"]
    assert lowered["ops::unrolled<int, 8>"] == "_ZN3ops8unrolledIiLi8EEEvPT_"
    # An overload is picked by a cast, as in NVRTC's own documentation.
    assert lowered["(void (*)(float*))overloaded"] == "_Z10overloadedPf"
    assert Elf(result["path"]).kernels() == CORPUS_KERNELS | {"_ZN3ops8unrolledIiLi8EEEvPT_"}


def test_an_unknown_kernel_name_fails_with_the_nvrtc_log(work, env):
    r = run_tool("build", work / "corpus.cu", "--compiler", "nvrtc", "--emit", "cubin", "--arch", "9.0",
                 "--kernel-name", "no_such_kernel<float>", "--build-dir", work / "bad_name", env=env)
    assert r.returncode == 1
    assert "no_such_kernel" in r.stderr


def test_bad_source_exits_1_with_the_nvrtc_log(work, env):
    bad = work / "bad.cu"
    bad.write_text('extern "C" __global__ void k(int* x) {\n  int y = 1;\n  x[0] = undeclared_thing + y;\n}\n')
    r = run_tool("build", bad, "--compiler", "nvrtc", "--emit", "cubin", "--arch", "9.0",
                 "--build-dir", work / "bad", env=env)
    assert r.returncode == 1, r.stderr
    assert "bad.cu(3): error" in r.stderr
    assert "undeclared_thing" in r.stderr
    assert r.stdout == ""


def test_nvrtc_finds_quote_includes_next_to_the_source_from_any_cwd(work, env, tmp_path):
    src_dir = work / "with_header"
    src_dir.mkdir()
    (src_dir / "helper.cuh").write_text("#define HELPER_VALUE 41\n")
    (src_dir / "uses_helper.cu").write_text(
        '#include "helper.cuh"\nextern "C" __global__ void uses_helper(int* x) { x[0] = HELPER_VALUE + 1; }\n')
    r = run_tool("build", "--json", src_dir / "uses_helper.cu", "--compiler", "nvrtc", "--emit", "cubin",
                 "--arch", "9.0", "--build-dir", work / "quote_include", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert Elf(json.loads(r.stdout)["path"]).kernels() == {"uses_helper"}


def test_an_nvrtc_cache_entry_is_stale_once_an_included_header_changes(work, env):
    # NVRTC writes no depfile; the cache must still notice a changed header.
    src_dir = work / "cached_header"
    src_dir.mkdir()
    header = src_dir / "value.cuh"
    (src_dir / "cached.cu").write_text(
        '#include "value.cuh"\nextern "C" __global__ void cached(int* x) { x[0] = VALUE; }\n')
    args = [src_dir / "cached.cu", "--compiler", "nvrtc", "--emit", "cubin", "--arch", "9.0"]
    outputs = []
    for value in (3, 4, 4):
        header.write_text(f"#define VALUE {value}\n")
        outputs.append(Path(build(*args, env=env)["path"]).read_bytes())
    assert outputs[0] != outputs[1]  # rebuilt with the new header
    assert outputs[1] == outputs[2]


def test_nvrtc_rejects_host_headers_that_nvcc_accepts(work, env):
    src = work / "host_header.cu"
    src.write_text('#include <cstdint>\nextern "C" __global__ void k(std::int32_t* x) { x[0] = 1; }\n')
    r = run_tool("build", src, "--compiler", "nvrtc", "--emit", "cubin", "--arch", "9.0",
                 "--build-dir", work / "host_header", env=env)
    assert r.returncode == 1
    assert "cstdint" in r.stderr
    # The CCCL spelling works with NVRTC.
    src.write_text('#include <cuda/std/cstdint>\nextern "C" __global__ void k(cuda::std::int32_t* x) { x[0] = 1; }\n')
    result = build(src, "--compiler", "nvrtc", "--emit", "cubin", "--arch", "9.0",
                   "--build-dir", work / "cccl_header", env=env)
    assert Elf(result["path"]).kernels() == {"k"}


def test_missing_nvrtc_is_exit_4_naming_where_it_looked(work, env):
    r = run_tool("build", work / "corpus.cu", "--compiler", "nvrtc", "--emit", "cubin", "--arch", "9.0",
                 "--build-dir", work / "no_nvrtc",
                 env={**env, "TVMFFI_JIT_LIBNVRTC": str(work / "nowhere" / "libnvrtc.so.13")})
    assert r.returncode == 4, r.stderr
    assert str(work / "nowhere" / "libnvrtc.so.13") in r.stderr


# ---------------------------------------------------------------- embedding


@pytest.fixture(scope="module")
def embed_module(work, env, outputs):
    """A module from a C++ launcher with a prebuilt NVRTC cubin and a .cu compiled to one."""
    (work / "launcher.cpp").write_text(LAUNCHER)
    shutil.copy(outputs["nvrtc_cubin"], work / "prebuilt.cubin")
    cudart_dir = CUDA_HOME / "lib64"
    result = build(
        work / "launcher.cpp",
        "--name", "embedded",
        "--embed-cubin", f"prebuilt={work / 'prebuilt.cubin'}",
        "--embed-cubin", f"from_cu={EXAMPLE_DIR / 'kernels.cu'}",
        "--arch", "9.0",
        "-I", CUDA_HOME / "include",
        f"--ldflag=-L{cudart_dir}", "--ldflag=-lcudart",
        "--build-dir", work / "embed_build",
        env=env,
    )
    return Path(result["path"])


def test_embedded_symbols_are_local_and_not_exported(embed_module):
    elf = Elf(embed_module)
    symtab, dynsym = elf.symbols(".symtab"), elf.symbols(".dynsym")
    for name in ("prebuilt", "from_cu"):
        for sym in (f"__tvm_ffi__cubin_{name}", f"__tvm_ffi__cubin_{name}_end"):
            assert sym in symtab, sym
            assert symtab[sym]["bind"] == STB_LOCAL, sym
            assert sym not in dynsym, sym
    # tvm-ffi's objcopy path leaves _binary_*_size behind; this one leaves nothing.
    assert not [s for s in list(symtab) + list(dynsym) if "_binary_" in s]
    # The launcher's exports are there.
    assert {"__tvm_ffi_launch_c_entry", "__tvm_ffi_launch_add_one"} <= set(dynsym)


def test_embedded_bytes_are_the_input_cubin_in_read_only_data(work, embed_module):
    elf = Elf(embed_module)
    data, section = elf.bytes_between("__tvm_ffi__cubin_prebuilt", "__tvm_ffi__cubin_prebuilt_end")
    assert data == (work / "prebuilt.cubin").read_bytes()
    assert section["flags"] & SHF_ALLOC
    assert not section["flags"] & (SHF_WRITE | SHF_EXECINSTR)
    assert elf.symbols(".symtab")["__tvm_ffi__cubin_prebuilt"]["value"] % 64 == 0


def test_a_cu_embed_is_compiled_to_a_cubin_of_its_kernels(work, embed_module):
    data, _ = Elf(embed_module).bytes_between("__tvm_ffi__cubin_from_cu", "__tvm_ffi__cubin_from_cu_end")
    (work / "from_cu.extracted.cubin").write_bytes(data)
    cubin = Elf(work / "from_cu.extracted.cubin")
    assert cubin.machine == 190 and cubin.sm() == 90
    assert cubin.kernels() == EXAMPLE_KERNELS


def test_inspect_sees_the_embedded_cubins_and_the_exports(embed_module):
    f = inspect_json(embed_module)
    assert f["tvm_ffi_module"]
    embedded = {e["name"]: e for e in f["embedded_cubins"]}
    assert set(embedded) == {"prebuilt", "from_cu"}
    assert {k["name"] for k in embedded["prebuilt"]["entries"][0]["kernels"]} == CORPUS_KERNELS
    assert {k["name"] for k in embedded["from_cu"]["entries"][0]["kernels"]} == EXAMPLE_KERNELS
    assert {fn["name"] for fn in f["functions"]} == {"launch_c_entry", "launch_add_one"}


def test_the_module_loads_through_tvm_ffi(embed_module):
    # The image is loaded lazily (first kernel lookup), so loading needs no GPU.
    code = (
        "import sys, tvm_ffi\n"
        "m = tvm_ffi.load_module(sys.argv[1])\n"
        "print(callable(m.launch_c_entry), callable(m.launch_add_one))\n"
    )
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = f"{CUDA_HOME / 'lib64'}:{env.get('LD_LIBRARY_PATH', '')}"
    r = subprocess.run([sys.executable, "-c", code, str(embed_module)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True"]


def test_the_embedded_files_bytes_are_part_of_the_cache_key(work, env, outputs):
    # Same command, same path, other bytes: the module must carry the new bytes.
    payload = work / "swapped.cubin"
    args = [
        work / "launcher.cpp", "--name", "swapped",
        "--embed-cubin", f"prebuilt={payload}",
        "--embed-cubin", f"from_cu={outputs['nvrtc_cubin']}",
        "--arch", "9.0", "-I", CUDA_HOME / "include",
        f"--ldflag=-L{CUDA_HOME / 'lib64'}", "--ldflag=-lcudart",
    ]
    for source in (outputs["nvrtc_cubin"], outputs["nvcc_cubin"]):
        shutil.copy(source, payload)
        path = Path(build(*args, env=env)["path"])
        data, _ = Elf(path).bytes_between("__tvm_ffi__cubin_prebuilt", "__tvm_ffi__cubin_prebuilt_end")
        assert data == Path(source).read_bytes()
    assert Path(outputs["nvrtc_cubin"]).read_bytes() != Path(outputs["nvcc_cubin"]).read_bytes()
