"""`tvmffi-jit inspect` on fixtures built here with nvcc: several archs, +PTX,
every --compress-mode, -rdc objects, a host .so, a TVM-FFI-style module with an
embedded cubin; figures checked against `ptxas -v` (and cuobjdump when on PATH);
damaged files must exit 3 with a precise message.

nvcc runs 4 times per session (module-scoped fixture); fatbinary (fast) builds
the compress-mode variants from the same cubin and PTX."""
import json
import os
import random
import re
import shutil
import subprocess

import pytest

BIN = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
FATBINARY = shutil.which("fatbinary") or ("/usr/local/cuda/bin/fatbinary" if NVCC else None)

pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc not found")

SOURCE = r"""
__device__ float dev_table[32];
__constant__ int const_lut[16];
__managed__ int managed_counter;

template <typename T, int N>
__global__ void __launch_bounds__(256, 2) scale(T* out, T factor) {
  out[threadIdx.x] = factor * T(dev_table[threadIdx.x % 32]) * T(N);
}
template __global__ void scale<float, 2>(float*, float);
template __global__ void scale<double, 4>(double*, double);

extern "C" __global__ void __cluster_dims__(2, 1, 1) clustered(int* p) {
  p[threadIdx.x] += const_lut[threadIdx.x & 15] + managed_counter;
}

extern "C" __global__ void __maxnreg__(32) limited(int* p, int n) {
  int acc = 0;
  for (int i = 0; i < n; ++i) acc += p[(i * 7 + threadIdx.x) % 1024] * i;
  p[threadIdx.x] = acc;
}

__global__ void tiled(float* o) {
  __shared__ float tile[512];
  __shared__ double extra[9];
  int x = threadIdx.x;
  tile[x] = o[x];
  extra[x % 9] = x;
  __syncthreads();
  o[x] = tile[(x + 1) % 512] + extra[(x + 3) % 9];
}

struct Big { float v[40]; };
__global__ void stacky(float* o, Big b, int k) {
  float l[64];
  for (int i = 0; i < 64; ++i) l[(i * k) & 63] = o[i] * b.v[i % 40];
  o[threadIdx.x] = l[(k + threadIdx.x) & 63];
}
"""

KERNELS = {"_Z5scaleIfLi2EEvPT_S0_", "_Z5scaleIdLi4EEvPT_S0_", "clustered", "limited", "_Z5tiledPf",
           "_Z6stackyPf3Bigi"}


def run(*args, check=True, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, check=check, **kw)


def inspect(*paths, extra=()):
    p = run(BIN, "inspect", "--json", *extra, *map(str, paths), check=False)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else None), p.stderr


def parse_ptxas(stderr):
    """Per kernel: registers, stack frame, smem from `ptxas -v`."""
    out, current = {}, None
    for line in stderr.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            current = m.group(1)
            out.setdefault(current, {})
        m = re.search(r"(\d+) bytes stack frame", line)
        if m and current:
            out[current]["stack"] = int(m.group(1))
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = m.group(1)
            out.setdefault(current, {})
        m = re.search(r"Used (\d+) registers.*?(?:(\d+) bytes smem)?", line)
        if m and current:
            out[current]["registers"] = int(m.group(1))
            smem = re.search(r"(\d+) bytes smem", line)
            out[current]["smem"] = int(smem.group(1)) if smem else 0
    return {k: v for k, v in out.items() if "registers" in v}


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    d = tmp_path_factory.mktemp("inspect")
    src = d / "fx.cu"
    src.write_text(SOURCE)
    keep = d / "keep"
    keep.mkdir()
    # 1: sm_90 cubin with ptxas -v figures, keeping the PTX.
    p = run(NVCC, "-cubin", "-arch=sm_90", "-Xptxas", "-v", "-keep", f"-keep-dir={keep}", "-o", str(d / "fx.cubin"),
            str(src), cwd=d)
    ptx = next(keep.glob("*.ptx"))
    # 2: multi-arch fatbin with PTX (sm_90, sm_100a, sm_120f SASS + compute_90 PTX).
    run(NVCC, "-fatbin", "-gencode", "arch=compute_90,code=[sm_90,compute_90]", "-gencode",
        "arch=compute_100a,code=sm_100a", "-gencode", "arch=compute_120f,code=sm_120f", "-o",
        str(d / "multi.fatbin"), str(src))
    # 3: relocatable device code object.
    run(NVCC, "-c", "-rdc=true", "-arch=sm_90", "-o", str(d / "rdc.o"), str(src))
    # 4: host shared library.
    run(NVCC, "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90", "-o", str(d / "libfx.so"), str(src))
    modes = {}
    for mode in ["default", "size", "speed", "balance", "none"]:
        out = d / f"{mode}.fatbin"
        run(FATBINARY, "--64", f"--create={out}", "--compress-all", f"--compress-mode={mode}",
            f"--image3=kind=elf,sm=90,file={d / 'fx.cubin'}", f"--image3=kind=ptx,sm=90,file={ptx}")
        modes[mode] = out
    return {"dir": d, "cubin": d / "fx.cubin", "ptx": ptx, "ptxas": parse_ptxas(p.stderr + p.stdout),
            "multi": d / "multi.fatbin", "rdc": d / "rdc.o", "so": d / "libfx.so", "modes": modes}


def kernels_by_name(entry):
    return {k["name"]: k for k in entry["kernels"]}


def test_cubin_figures_equal_ptxas(fx):
    rc, doc, err = inspect(fx["cubin"])
    assert rc == 0, err
    f = doc["files"][0]
    assert f["format"] == "cubin" and f["error"] is None
    (e,) = f["entries"]
    assert e["arch"] == "sm_90" and e["kind"] == "elf"
    ks = kernels_by_name(e)
    assert set(ks) == KERNELS
    assert set(fx["ptxas"]) == KERNELS
    for name, want in fx["ptxas"].items():
        k = ks[name]
        assert k["registers"] == want["registers"], name
        assert k["stack_bytes"] == want.get("stack", 0), name
        # ptxas prints smem without the 1 KiB base sm_90 ET_EXEC cubins reserve (docs/formats.md, "Shared memory").
        base = 1024 if k["shared_bytes"] >= 1024 else 0
        assert k["shared_bytes"] - base == want["smem"], name
    assert ks["_Z5scaleIfLi2EEvPT_S0_"]["max_threads"] == 256
    assert ks["_Z5scaleIfLi2EEvPT_S0_"]["demangled"] == "void scale<float, 2>(float*, float)"
    assert ks["clustered"]["cluster_dims"] == [2, 1, 1]
    assert ks["clustered"]["max_threads"] is None
    assert ks["limited"]["max_registers"] == 32
    assert ks["limited"]["param_bytes"] == 12
    assert ks["_Z6stackyPf3Bigi"]["param_bytes"] == 172
    assert ks["_Z6stackyPf3Bigi"]["stack_bytes"] > 0
    globals_ = {g["name"]: g for g in e["globals"]}
    assert globals_["dev_table"] == {"name": "dev_table", "space": "global", "size": 128}
    assert globals_["const_lut"] == {"name": "const_lut", "space": "constant", "size": 64}
    assert globals_["managed_counter"]["space"] == "managed"


def test_ptx_file_lists_the_same_kernels(fx):
    rc, doc, err = inspect(fx["ptx"])
    assert rc == 0, err
    (e,) = doc["files"][0]["entries"]
    assert doc["files"][0]["format"] == "ptx"
    assert e["arch"] == "compute_90" and e["ptx_version"] == "9.0"
    ks = kernels_by_name(e)
    assert set(ks) == KERNELS
    cubin = kernels_by_name(inspect(fx["cubin"])[1]["files"][0]["entries"][0])
    for name in KERNELS:
        assert ks[name]["param_bytes"] == cubin[name]["param_bytes"], name
        assert ks[name]["registers"] is None


@pytest.mark.parametrize("mode,codec", [("default", "zstd"), ("size", "zstd"), ("speed", "lz4"),
                                        ("balance", "zstd"), ("none", "none")])
def test_every_compress_mode(fx, mode, codec):
    rc, doc, err = inspect(fx["modes"][mode])
    assert rc == 0, err
    entries = doc["files"][0]["entries"]
    assert [e["kind"] for e in entries] == ["elf", "ptx"]
    cubin = kernels_by_name(inspect(fx["cubin"])[1]["files"][0]["entries"][0])
    for e in entries:
        assert e["compression"] == codec
        if codec != "none":
            assert e["size"] < e["decompressed_size"]
        assert set(kernels_by_name(e)) == KERNELS
    assert kernels_by_name(entries[0]) == cubin


def test_multi_arch_fatbin(fx):
    rc, doc, err = inspect(fx["multi"])
    assert rc == 0, err
    entries = doc["files"][0]["entries"]
    archs = sorted((e["kind"], e["arch"]) for e in entries)
    assert archs == [("elf", "sm_100a"), ("elf", "sm_120f"), ("elf", "sm_90"), ("ptx", "compute_90")]
    for e in entries:
        assert set(kernels_by_name(e)) == KERNELS, e["arch"]
    ptx = next(e for e in entries if e["kind"] == "ptx")
    assert ptx["compression"] == "zstd" and ptx["ptx_version"] == "9.0"


def test_rdc_object(fx):
    rc, doc, err = inspect(fx["rdc"])
    assert rc == 0, err
    f = doc["files"][0]
    assert f["format"] == "host-elf"
    assert {i["source"] for i in f["images"]} == {"__nv_relfatbin"}
    elf = [e for e in f["entries"] if e["kind"] == "elf"]
    assert elf and all(e["elf"]["type"] == "rel" for e in elf)
    assert set(kernels_by_name(elf[0])) == KERNELS
    # Relocatable sm_90 cubins have no 1 KiB shared base: tiled's smem as ptxas printed it.
    assert kernels_by_name(elf[0])["_Z5tiledPf"]["shared_bytes"] == fx["ptxas"]["_Z5tiledPf"]["smem"]


def test_static_library_members(fx, tmp_path):
    lib = tmp_path / "libfx.a"
    run("ar", "rcs", str(lib), str(fx["rdc"]), str(fx["cubin"]))
    rc, doc, err = inspect(lib)
    assert rc == 0, err
    f = doc["files"][0]
    assert f["format"] == "archive"
    members = {e["member"] for e in f["entries"]}
    assert members == {"rdc.o", "fx.cubin"}
    for e in f["entries"]:
        assert set(kernels_by_name(e)) == KERNELS, e["member"]
    assert [i["member"] for i in f["images"]] == ["rdc.o"]


def test_host_so_images_can_be_extracted_by_offset(fx):
    rc, doc, err = inspect(fx["so"])
    assert rc == 0, err
    f = doc["files"][0]
    assert f["format"] == "host-elf" and f["images"]
    data = fx["so"].read_bytes()
    total = set()
    for i, img in enumerate(f["images"]):
        assert img["source"] == ".nv_fatbin" and img["format"] == "fatbin"
        piece = fx["dir"] / f"piece{i}.fatbin"
        piece.write_bytes(data[img["offset"]:img["offset"] + img["size"]])
        rc, sub, err = inspect(piece)
        assert rc == 0, err
        for e in sub["files"][0]["entries"]:
            total |= set(kernels_by_name(e))
    assert total == KERNELS


def test_tvm_ffi_module_functions_and_embedded_cubin(fx, tmp_path):
    """A module laid out like tvm-ffi's embed_cubin output (docs/formats.md, "Host ELF files"):
    exported __tvm_ffi_<name> functions and local __tvm_ffi__cubin_<name>[_end] symbols."""
    c = tmp_path / "m.c"
    c.write_text("int __tvm_ffi_add(void*a,const void*b,int n,void*r){return 0;}\n"
                 "int __tvm_ffi__metadata_add(void*a,const void*b,int n,void*r){return 0;}\n"
                 "int __tvm_ffi__doc_add(void*a,const void*b,int n,void*r){return 0;}\n"
                 "int __tvm_ffi_noop(void*a,const void*b,int n,void*r){return 0;}\n"
                 "void* __tvm_ffi__library_ctx;\n")
    run("gcc", "-c", "-fPIC", "-o", str(tmp_path / "m.o"), str(c))
    shutil.copy(fx["cubin"], tmp_path / "embedded_kern.cubin")
    run("ld", "-r", "-b", "binary", "-o", "cub.o", "embedded_kern.cubin", cwd=tmp_path)
    run("objcopy", "--rename-section", ".data=.rodata,alloc,load,readonly,data,contents",
        "--redefine-sym", "_binary_embedded_kern_cubin_start=__tvm_ffi__cubin_kern",
        "--redefine-sym", "_binary_embedded_kern_cubin_end=__tvm_ffi__cubin_kern_end", "cub.o", "cub2.o", cwd=tmp_path)
    run("ld", "-r", "-o", "mod.o", "m.o", "cub2.o", cwd=tmp_path)
    run("objcopy", "--localize-symbol", "__tvm_ffi__cubin_kern", "--localize-symbol", "__tvm_ffi__cubin_kern_end",
        "mod.o", cwd=tmp_path)
    run("gcc", "-shared", "-o", "mod.so", "mod.o", "-Wl,-z,noexecstack", cwd=tmp_path)
    rc, doc, err = inspect(tmp_path / "mod.so")
    assert rc == 0, err
    f = doc["files"][0]
    assert f["tvm_ffi_module"] is True
    funcs = {fn["name"]: fn for fn in f["functions"]}
    assert set(funcs) == {"add", "noop"}
    assert funcs["add"]["has_doc"] and funcs["add"]["has_metadata"]
    assert not funcs["noop"]["has_doc"]
    (cub,) = f["embedded_cubins"]
    assert cub["name"] == "kern" and cub["format"] == "cubin"
    data = (tmp_path / "mod.so").read_bytes()
    assert data[cub["offset"]:cub["offset"] + cub["size"]] == fx["cubin"].read_bytes()
    assert set(kernels_by_name(cub["entries"][0])) == KERNELS


def test_threads_do_not_change_the_output(fx):
    files = [fx["multi"], fx["so"], fx["modes"]["speed"]]
    one = run(BIN, "inspect", "--json", "-j", "1", *map(str, files)).stdout
    for jobs in ("3", "4", "32"):
        assert run(BIN, "inspect", "--json", "-j", jobs, *map(str, files)).stdout == one


def test_text_output_names_every_kernel(fx):
    p = run(BIN, "inspect", str(fx["multi"]))
    assert "void scale<float, 2>(float*, float)" in p.stdout
    assert "sm_100a" in p.stdout and "compute_90" in p.stdout


def test_damaged_files_exit_3_with_a_precise_message(fx, tmp_path):
    rng = random.Random(5)
    for name in ["cubin", "multi", "so"]:
        data = fx[name].read_bytes()
        for n in [0, 10, 63, 64, 200, len(data) // 2, len(data) - 3]:
            cut = tmp_path / f"cut_{name}_{n}"
            cut.write_bytes(data[:n])
            rc, doc, err = inspect(cut)
            assert rc == 3, (name, n)
            msg = doc["files"][0]["error"]
            assert msg and f"{cut}" in err
            if n >= 16 and name == "multi":
                assert re.search(r"(entry \d+: |container at 0x)", msg), msg
    # Bit flips: whatever they hit, never a crash (rc 0 or 3, JSON always printed).
    data = fx["multi"].read_bytes()
    for i in range(40):
        m = bytearray(data)
        for _ in range(8):
            m[rng.randrange(len(m))] ^= 1 << rng.randrange(8)
        p = tmp_path / f"flip{i}"
        p.write_bytes(bytes(m))
        rc, doc, err = inspect(p)
        assert rc in (0, 3) and doc is not None, err
    r = tmp_path / "random.bin"
    r.write_bytes(bytes(rng.randrange(256) for _ in range(4096)))
    rc, doc, _ = inspect(r)
    assert rc == 3 and "unrecognized" in doc["files"][0]["error"]


def test_compressed_size_past_the_container_is_named(fx, tmp_path):
    data = bytearray(fx["modes"]["default"].read_bytes())
    rc, doc, _ = inspect(fx["modes"]["default"])
    e = doc["files"][0]["entries"][1]
    data[e["header_offset"] + 16:e["header_offset"] + 20] = (1 << 20).to_bytes(4, "little")
    bad = tmp_path / "bad.fatbin"
    bad.write_bytes(bytes(data))
    rc, doc, _ = inspect(bad)
    assert rc == 3
    assert re.fullmatch(r"entry 1: compressed size 1048576 exceeds container end at 0x[0-9a-f]+",
                        doc["files"][0]["error"])


def test_usage_and_missing_files(fx, tmp_path):
    assert run(BIN, "inspect", check=False).returncode == 2
    rc, doc, err = inspect(tmp_path / "missing.cubin", fx["cubin"])
    assert rc == 3
    assert doc["files"][0]["error"].startswith("cannot open")
    assert doc["files"][1]["error"] is None
    rc, doc, _ = inspect(tmp_path)
    assert rc == 3 and doc["files"][0]["error"]


def test_json_matches_the_documented_schema(fx):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(open(os.path.join(os.environ.get("TVMFFI_JIT_SOURCE_DIR", "."), "share", "tvmffi-jit",
                                          "inspect.schema.json")).read())
    lib = fx["dir"] / "schema.a"
    run("ar", "rcs", str(lib), str(fx["rdc"]))
    _, doc, _ = inspect(fx["cubin"], fx["multi"], fx["so"], fx["rdc"], fx["ptx"], lib, fx["dir"] / "missing")
    jsonschema.validate(doc, schema)


@pytest.mark.skipif(shutil.which("cuobjdump") is None, reason="cuobjdump not on PATH")
def test_figures_equal_cuobjdump(fx):
    for path in [fx["cubin"], fx["multi"], fx["so"]]:
        out = run("cuobjdump", "-res-usage", str(path)).stdout
        blocks = [b for b in out.split("Resource usage:")[1:]]
        _, doc, _ = inspect(path)
        elf = [e for e in doc["files"][0]["entries"] if e["kind"] == "elf" and e["kernels"]]
        assert len(blocks) >= len(elf)
        blocks = [b for b in blocks if " Function " in b]
        for e, block in zip(elf, blocks):
            ks = kernels_by_name(e)
            for m in re.finditer(r" Function ([^:]+):\n  REG:(\d+) STACK:(\d+) SHARED:(\d+)", block):
                k = ks[m.group(1)]
                assert (k["registers"], k["stack_bytes"], k["shared_bytes"]) == tuple(map(int, m.group(2, 3, 4)))


def c_array(name, data):
    body = ",".join(str(b) for b in data)
    return f"__attribute__((aligned(8), used)) const unsigned char {name}[{len(data)}] = {{{body}}};\n"


def test_scan_data_finds_fatbins_outside_nv_fatbin_and_ignores_lookalikes(fx, tmp_path):
    # A library that loads its own fatbins (as cuFFT, cuBLASLt's .cask_resource
    # and cuSPARSE's .rodata do): the containers sit in .rodata, next to a
    # decoy that starts like a container and then holds garbage.
    fatbin = fx["multi"].read_bytes()
    decoy = bytes.fromhex("50ed55ba01001000") + (96).to_bytes(8, "little") + bytes(range(96))
    src = tmp_path / "blob.c"
    src.write_text(c_array("decoy", decoy) + c_array("fatbin_copy", fatbin) + c_array("decoy2", decoy[:40]))
    lib = tmp_path / "libblob.so"
    run("cc", "-shared", "-fPIC", "-o", str(lib), str(src))

    rc, doc, err = inspect(lib)
    assert rc == 0, err
    assert doc["files"][0]["entries"] == []  # cuobjdump's view: no .nv_fatbin

    rc, doc, err = inspect(lib, extra=["--scan-data"])
    assert rc == 0, err
    f = doc["files"][0]
    assert f["error"] is None
    _, direct, _ = inspect(fx["multi"])
    want = direct["files"][0]["entries"]
    got = f["entries"]
    assert [(e["kind"], e["arch"], sorted(k["name"] for k in e["kernels"])) for e in got] == \
           [(e["kind"], e["arch"], sorted(k["name"] for k in e["kernels"])) for e in want]
    assert {i["source"] for i in f["images"]} == {".rodata"}
    # The same with four threads, and in the text output.
    assert inspect(lib, extra=["--scan-data", "-j4"])[1] == doc
    text = run(BIN, "inspect", "--scan-data", str(lib)).stdout
    assert f"{len(want)} entries" in text and "clustered" in text


def test_scan_data_gives_up_on_crafted_lookalikes_instead_of_taking_quadratic_time(tmp_path):
    # Every 64 bytes: an entry header of one long chain (kind 2, header 64,
    # payload 0) and, in its last 16 bytes, a container header whose entries
    # are the rest of that chain, ending 8 bytes short of the container's end.
    # Each candidate is rejected only after walking the chain to the end:
    # without a bound, (N/64)^2/2 steps.
    n = 4 << 20
    blob = bytearray(n)
    for k in range(n // 64):
        b = 64 * k
        blob[b:b + 16] = (2).to_bytes(2, "little") + bytes(2) + (64).to_bytes(4, "little") + bytes(8)
        fat = n - b - 64 - 8
        if fat > 0:
            blob[b + 48:b + 64] = bytes.fromhex("50ed55ba01001000") + fat.to_bytes(8, "little")
    (tmp_path / "blob.bin").write_bytes(bytes(blob))
    (tmp_path / "blob.s").write_text('.section .note.GNU-stack,"",@progbits\n.section .rodata\n.balign 64\n'
                                     '.globl blob\nblob:\n.incbin "blob.bin"\n')
    run("cc", "-c", "-o", str(tmp_path / "blob.o"), str(tmp_path / "blob.s"), cwd=tmp_path)
    lib = tmp_path / "libcrafted.so"
    run("cc", "-shared", "-o", str(lib), str(tmp_path / "blob.o"))
    assert inspect(lib)[0] == 0
    rc, doc, err = inspect(lib, extra=["--scan-data"])
    assert rc == 3
    assert "too many fatbin lookalikes" in doc["files"][0]["error"]
