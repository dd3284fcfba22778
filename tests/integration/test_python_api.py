"""tvmffi_jit's Python API against tvm_ffi.cpp's: the four functions called the
way tvm_ffi.cpp's documentation and its users call them (inline C++ and CUDA,
file sources, functions as a list, a string and a dict with docstrings, extra_*
flags, build_directory, object output linked again, embed_cubin), results
checked through tvm_ffi.load_module; inspect(), patch(), errors, the cache, and
the cheap import.

Runs the package from the source tree (python/) against $TVMFFI_JIT_BIN. CUDA
modules are loaded without a GPU: libcudart loads without one, so host
functions in a .cu unit run; kernels are checked in the artifact (inspect).
"""

import ctypes
import inspect as pyinspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm_ffi
import tvm_ffi.cpp

SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
PYTHON_DIR = SOURCE_DIR / "python"
sys.path.insert(0, str(PYTHON_DIR))

import tvmffi_jit  # noqa: E402

# ctest sets TVMFFI_JIT_BIN to the build's binary; run by hand, the one on PATH.
TOOL = os.environ.get("TVMFFI_JIT_BIN") or shutil.which("tvmffi-jit") or "tvmffi-jit"
os.environ["TVMFFI_JIT_BIN"] = TOOL
EXAMPLES = SOURCE_DIR / "share" / "tvmffi-jit" / "examples"
CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
HAVE_NVCC = (CUDA_HOME / "bin" / "nvcc").exists()
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason=f"no nvcc at {CUDA_HOME}/bin/nvcc")

# tvm_ffi.cpp's documented example (build_inline/load_inline docstrings).
ADD_ONE_CPU = r"""
void add_one_cpu(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  TVM_FFI_ICHECK(x.ndim() == 1) << "x must be a 1D tensor";
  DLDataType f32_dtype{kDLFloat, 32, 1};
  TVM_FFI_ICHECK(x.dtype() == f32_dtype) << "x must be a float tensor";
  TVM_FFI_ICHECK(x.size(0) == y.size(0)) << "x and y must have the same shape";
  for (int i = 0; i < x.size(0); ++i) {
    static_cast<float*>(y.data_ptr())[i] = static_cast<float*>(x.data_ptr())[i] + 1;
  }
}
"""
METADATA = "-DTVM_FFI_DLL_EXPORT_INCLUDE_METADATA=1"


@pytest.fixture(autouse=True)
def private_caches(tmp_path_factory, monkeypatch):
    """Each test module run gets its own tvmffi-jit cache, and tvm_ffi's own
    cache root points at an empty folder that must stay without JIT builds."""
    root = tmp_path_factory.getbasetemp()
    monkeypatch.setenv("TVMFFI_JIT_CACHE_DIR", str(root / "jit-cache"))
    monkeypatch.setenv("TVM_FFI_CACHE_DIR", str(root / "tvm-ffi-cache"))
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", "9.0")  # no GPU here to detect
    yield
    tvm_ffi_cache = root / "tvm-ffi-cache"
    assert not tvm_ffi_cache.exists() or not [p for p in tvm_ffi_cache.iterdir() if p.is_dir()], (
        "tvm_ffi.cpp built something: the call did not go through tvmffi-jit"
    )


def add_one_checked(mod, fn="add_one_cpu", delta=1):
    x = np.array([1, 2, 3, 4, 5], dtype=np.float32)
    y = np.empty_like(x)
    getattr(mod, fn)(x, y)
    np.testing.assert_equal(y, x + delta)


def counting_cxx(folder):
    """A C++ compiler that appends one line per compile or link to a log, then
    runs c++ (not for `--version`, nor a precompiled header's build or its
    `-E -v` question: docs/build.md, "Precompiled headers")."""
    log = folder / "cxx.log"
    script = folder / "counting-c++"
    script.write_text(f'#!/bin/sh\ncase " $* " in *" --version "*|*" c++-header "*) ;; *) echo run >> "{log}";; esac\n'
                      f'exec c++ "$@"\n')
    script.chmod(0o755)
    return script, log


# ----------------------------------------------------------------- the API


@pytest.mark.parametrize("name", ["build", "build_inline", "load", "load_inline"])
def test_signature_is_tvm_ffi_cpps(name):
    ours = pyinspect.signature(getattr(tvmffi_jit, name))
    theirs = pyinspect.signature(getattr(tvm_ffi.cpp, name))
    describe = lambda sig: [(p.name, p.kind, p.default) for p in sig.parameters.values()]
    assert describe(ours) == describe(theirs)


def test_tvm_ffi_under_test_is_a_version_the_package_accepts():
    # These tests (signatures, the wrapper byte for byte, tvm_ffi's own suite)
    # are what admits a tvm-ffi version: run against one outside pyproject's
    # range, they would vouch for a version pip never installs with the package.
    import tomllib  # noqa: PLC0415
    from importlib.metadata import version  # noqa: PLC0415

    from packaging.requirements import Requirement  # noqa: PLC0415

    deps = tomllib.loads((SOURCE_DIR / "pyproject.toml").read_text())["project"]["dependencies"]
    [accepted] = [r for r in map(Requirement, deps) if r.name == "apache-tvm-ffi"]
    installed = version("apache-tvm-ffi")
    assert accepted.specifier.contains(installed, prereleases=True), (
        f"apache-tvm-ffi {installed} is installed, pyproject.toml accepts {accepted.specifier}: "
        f"pip install '{accepted}' (scripts/setup.sh), or widen the range with these tests passing")


def test_import_loads_neither_tvm_ffi_nor_numpy():
    code = "import sys, tvmffi_jit; print(sorted(m for m in ('tvm_ffi', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(PYTHON_DIR)},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_binary_comes_from_the_environment_variable():
    assert tvmffi_jit.find_binary() == os.path.abspath(TOOL)
    code = "import tvmffi_jit; tvmffi_jit.find_binary()"
    env = {**os.environ, "PYTHONPATH": str(PYTHON_DIR), "TVMFFI_JIT_BIN": "/nonexistent/tvmffi-jit"}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert p.returncode != 0
    assert "BinaryNotFoundError" in p.stderr and "TVMFFI_JIT_BIN" in p.stderr


def test_version_is_the_binarys():
    out = subprocess.run([TOOL, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == f"tvmffi-jit {tvmffi_jit.__version__}"


# ----------------------------------------------------------------- inline C++


def test_load_inline_documented_example_with_functions_as_string():
    mod = tvmffi_jit.load_inline("hello", cpp_sources=ADD_ONE_CPU, functions="add_one_cpu")
    add_one_checked(mod)


def test_build_inline_path_loads_through_tvm_ffi_load_module():
    path = tvmffi_jit.build_inline("hello", cpp_sources=ADD_ONE_CPU, functions=["add_one_cpu"])
    assert os.path.isabs(path) and path.endswith("/hello.so") and os.path.isfile(path)
    add_one_checked(tvm_ffi.load_module(path))


def test_cpp_sources_as_list_are_joined_and_every_listed_function_exported():
    second = ADD_ONE_CPU.replace("add_one_cpu", "add_two_cpu").replace("] + 1", "] + 2")
    mod = tvmffi_jit.load_inline("hello_multi", cpp_sources=[ADD_ONE_CPU, second],
                                 functions=["add_one_cpu", "add_two_cpu"])
    add_one_checked(mod, "add_one_cpu", 1)
    add_one_checked(mod, "add_two_cpu", 2)


def test_functions_dict_docstrings_reach_the_module_with_metadata_on():
    doc = 'Adds two integers.\n\n  a: "first"\tb: second \\ done'
    mod = tvmffi_jit.load_inline(
        "docs",
        cpp_sources="int64_t add(int64_t a, int64_t b) { return a + b; }\n"
                    "tvm::ffi::String hello(tvm::ffi::String s) { return tvm::ffi::String(std::string(\"hi \") + s.c_str()); }",
        functions={"add": doc, "hello": ""},
        extra_cflags=[METADATA],
    )
    assert mod.add(2, 3) == 5 and mod.hello("you") == "hi you"
    assert mod.get_function_doc("add") == doc
    assert mod.get_function_doc("hello") is None  # empty docstring: no doc line
    assert mod.get_function_metadata("add")["type_schema"]


def test_functions_dict_without_metadata_flag_has_no_doc():
    mod = tvmffi_jit.load_inline("nodocs", cpp_sources="int64_t sub(int64_t a, int64_t b) { return a - b; }",
                                 functions={"sub": "Subtracts."})
    assert mod.sub(5, 3) == 2
    assert mod.get_function_doc("sub") is None
    assert mod.get_function_metadata("sub") is None


def test_extra_cflags_include_paths_and_ldflags_reach_compiler_and_linker(tmp_path, monkeypatch):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "offset.h").write_text("#pragma once\nconstexpr int64_t kBase = 100;\n")
    monkeypatch.chdir(tmp_path)  # extra_include_paths relative to the current directory, as tvm_ffi
    mod = tvmffi_jit.load_inline(
        "flags",
        cpp_sources='#include "offset.h"\nint64_t value() { return kBase + OFFSET + SECOND; }',
        functions=["value"],
        extra_cflags=["-DOFFSET=7", "-DSECOND=20 -O1"],  # one string with two flags: split as the shell would
        extra_include_paths=["inc"],
        extra_ldflags=["-Wl,-soname,libflags_custom.so"],
    )
    assert mod.value() == 127
    path = tvmffi_jit.build_inline(
        "flags", cpp_sources='#include "offset.h"\nint64_t value() { return kBase + OFFSET + SECOND; }',
        functions=["value"], extra_cflags=["-DOFFSET=7", "-DSECOND=20 -O1"], extra_include_paths=["inc"],
        extra_ldflags=["-Wl,-soname,libflags_custom.so"])
    dynamic = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    assert "[libflags_custom.so]" in dynamic


@pytest.mark.parametrize("api", ["load_inline", "build_inline"])
def test_inline_sources_probing_a_header_with_has_include_miss_once_it_appears(tmp_path, api):
    inc = tmp_path / "inc"
    inc.mkdir()
    source = ('#if __has_include("extra.h")\n#include "extra.h"\n#else\n#define EXTRA 1\n#endif\n'
              "int64_t extra() { return EXTRA; }\n")

    def extra():
        args = dict(cpp_sources=source, functions=["extra"], extra_include_paths=[str(inc)])
        if api == "load_inline":
            return tvmffi_jit.load_inline("probe_" + api, **args).extra()
        return tvm_ffi.load_module(tvmffi_jit.build_inline("probe_" + api, **args)).extra()

    assert extra() == 1
    assert extra() == 1  # a hit: what follows must not be one
    (inc / "extra.h").write_text("#define EXTRA 2\n")
    assert extra() == 2, "a stale hit: the header __has_include probed appeared"


def test_build_directory_relative_holds_the_build_and_is_reused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cxx, log = counting_cxx(tmp_path)
    monkeypatch.setenv("CXX", str(cxx))
    path = tvmffi_jit.build_inline("in_dir", cpp_sources=ADD_ONE_CPU, functions=["add_one_cpu"],
                                   build_directory="./build/build_add_one")
    build_dir = (tmp_path / "build" / "build_add_one").resolve()
    assert path == str(build_dir / "in_dir.so")
    assert {"main.cpp", "cpp_0.o", "in_dir.so"} <= {p.name for p in build_dir.iterdir()}
    add_one_checked(tvm_ffi.load_module(path))
    # The cache is not involved.
    jit_cache = Path(os.environ["TVMFFI_JIT_CACHE_DIR"])
    assert not list(jit_cache.glob("in_dir_*")) if jit_cache.exists() else True
    assert log.read_text().count("run") == 2  # compile + link


def test_cache_hit_spawns_no_compiler_and_returns_the_same_path(tmp_path, monkeypatch):
    cxx, log = counting_cxx(tmp_path)
    monkeypatch.setenv("CXX", str(cxx))
    first = tvmffi_jit.build_inline("cached", cpp_sources="int64_t one() { return 1; }", functions="one")
    runs = log.read_text().count("run")
    assert runs >= 2  # compile + link (+ --version for the compiler's identity)
    second = tvmffi_jit.build_inline("cached", cpp_sources="int64_t one() { return 1; }", functions="one")
    assert second == first
    assert log.read_text().count("run") == runs
    assert tvm_ffi.load_module(second).one() == 1


def test_compile_error_raises_runtime_error_with_the_compilers_output():
    with pytest.raises(RuntimeError) as info:
        tvmffi_jit.build_inline("broken", cpp_sources="int64_t f() { return undeclared_name; }", functions=["f"])
    err = info.value
    assert isinstance(err, tvmffi_jit.BuildError) and err.exit_code == 1
    assert "undeclared_name" in str(err) and "error" in str(err)
    assert "c++" in str(err)  # the failed command is shown


def test_unknown_function_is_a_build_error_naming_it():
    with pytest.raises(tvmffi_jit.BuildError) as info:
        tvmffi_jit.build_inline("nofunc", cpp_sources="int64_t f() { return 1; }", functions=["g"])
    assert "g" in str(info.value)


def test_backend_values():
    with pytest.raises(ValueError, match="Invalid backend"):
        tvmffi_jit.build_inline("b", cpp_sources="int x;", backend="metal")
    # hip builds (tests/integration/test_hip.py); without ROCm it is the tool's exit 4 saying so.
    if shutil.which("hipcc"):
        assert tvmffi_jit.build_inline("b", cpp_sources="int x;", backend="hip").endswith("b.so")
    else:
        with pytest.raises(tvmffi_jit.BuildError, match="ROCm") as info:
            tvmffi_jit.build_inline("b", cpp_sources="int x;", backend="hip")
        assert info.value.exit_code == 4


# ----------------------------------------------------------------- files


EXPORTING_CC = r"""
#include <tvm/ffi/function.h>
#include "scale.h"
int64_t scale(int64_t x) { return x * kFactor; }
TVM_FFI_DLL_EXPORT_TYPED_FUNC(scale, scale);
"""
C_ADD = r"""
#include <tvm/ffi/c_api.h>
TVM_FFI_DLL_EXPORT int __tvm_ffi_c_add(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  result->type_index = kTVMFFIInt;
  result->zero_padding = 0;
  result->v_int64 = args[0].v_int64 + args[1].v_int64;
  return 0;
}
"""


def test_load_file_sources_relative_with_a_neighbouring_header(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "scale.h").write_text("#pragma once\nconstexpr int64_t kFactor = 3;\n")
    (src / "scale.cc").write_text(EXPORTING_CC)
    (src / "c_add.c").write_text(C_ADD)
    monkeypatch.chdir(tmp_path)
    mod = tvmffi_jit.load("files", sources=["src/scale.cc", "src/c_add.c"])
    assert mod.scale(5) == 15
    assert mod.c_add(10, 20) == 30
    # cpp_files is tvm_ffi's backward-compatible alias.
    assert tvmffi_jit.load("files_alias", cpp_files="src/scale.cc").scale(2) == 6


def test_object_output_then_load_of_the_prebuilt_object(tmp_path):
    (tmp_path / "c_add.c").write_text(C_ADD)
    obj = tvmffi_jit.build("c_obj", sources=[str(tmp_path / "c_add.c")], output="c_obj.o")
    assert obj.endswith(".o") and os.path.isfile(obj)
    assert tvmffi_jit.load("c_from_obj", sources=[obj]).c_add(1, 2) == 3

    inline_obj = tvmffi_jit.build_inline("hello_obj", cpp_sources=ADD_ONE_CPU, functions=["add_one_cpu"],
                                         output="hello_obj.o")
    assert inline_obj.endswith("/hello_obj.o")
    add_one_checked(tvmffi_jit.load("hello_from_obj", sources=[inline_obj]))


def test_output_name_in_build_directory(tmp_path):
    (tmp_path / "c_add.c").write_text(C_ADD)
    out = tvmffi_jit.build("c_named", sources=[str(tmp_path / "c_add.c")], build_directory=str(tmp_path / "b"),
                           output="renamed_object.o")
    assert out == str((tmp_path / "b" / "renamed_object.o").resolve()) and os.path.isfile(out)
    lib = tvmffi_jit.build("c_named_lib", sources=[str(tmp_path / "c_add.c")], build_directory=str(tmp_path / "b2"),
                           output="libnamed.so")
    assert lib == str((tmp_path / "b2" / "libnamed.so").resolve())
    assert tvm_ffi.load_module(lib).c_add(2, 2) == 4


def test_build_without_sources_is_an_error():
    with pytest.raises(ValueError, match="sources"):
        tvmffi_jit.build("empty")


# ----------------------------------------------------------------- CUDA

CUDA_SOURCE = r"""
__global__ void AddOneKernel(float* x, float* y, int n) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx < n) y[idx] = x[idx] + 1;
}
void add_one_cuda(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  int64_t n = x.size(0);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  AddOneKernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<float*>(x.data_ptr()),
                                                    static_cast<float*>(y.data_ptr()), n);
}
int64_t threads_per_block() { return 256; }
"""


def preload_cudart():
    """Make the module's NEEDED libcudart resolvable (no rpath in tvm_ffi-style
    modules; a CUDA user has it on the library path)."""
    libs = sorted((CUDA_HOME / "lib64").glob("libcudart.so.*"))
    if not libs:
        pytest.skip(f"no libcudart in {CUDA_HOME}/lib64")
    ctypes.CDLL(str(libs[-1]), mode=ctypes.RTLD_GLOBAL)


def kernels_of(report):
    """Kernel names of every entry of the report's files, embedded cubins included."""
    entries = [e for f in report["files"] for e in f["entries"]]
    entries += [e for f in report["files"] for c in f["embedded_cubins"] for e in c["entries"]]
    return {k["name"] for e in entries for k in e["kernels"]}


def function_names(report):
    return {f["name"] for f in report["files"][0]["functions"]}


@needs_nvcc
def test_load_inline_cuda_only_exports_from_the_cuda_unit_and_loads_without_gpu():
    mod = tvmffi_jit.load_inline("hello_cuda", cuda_sources=CUDA_SOURCE,
                                 functions=["add_one_cuda", "threads_per_block"])
    assert mod.threads_per_block() == 256  # host code of the .cu unit runs without a GPU
    report = tvmffi_jit.inspect(tvmffi_jit.build_inline("hello_cuda", cuda_sources=CUDA_SOURCE,
                                                        functions=["add_one_cuda", "threads_per_block"]))
    [file] = report["files"]
    assert file["format"] == "host-elf"
    assert function_names(report) == {"add_one_cuda", "threads_per_block"}
    assert any("AddOneKernel" in k for k in kernels_of(report))


@needs_nvcc
def test_load_inline_cpp_and_cuda_with_cuda_flags():
    preload_cudart()
    mod = tvmffi_jit.load_inline(
        "hello_both",
        cpp_sources=ADD_ONE_CPU + "void add_one_cuda(tvm::ffi::TensorView x, tvm::ffi::TensorView y);\n"
                                  "int64_t threads_per_block();\n",
        cuda_sources=CUDA_SOURCE,
        functions=["add_one_cpu", "add_one_cuda", "threads_per_block"],
        extra_cuda_cflags=["--use_fast_math", "-DUNUSED_MACRO=1"],
    )
    add_one_checked(mod)
    assert mod.threads_per_block() == 256


@needs_nvcc
def test_embed_cubin_bytes_are_embedded_for_tvm_ffi_embed_cubin(tmp_path):
    cubin = subprocess.run([TOOL, "build", str(EXAMPLES / "embed_cubin" / "kernels.cu"), "--emit", "cubin",
                            "--arch", "9.0", "--build-dir", str(tmp_path / "cubin")],
                           capture_output=True, text=True, check=True).stdout.strip()
    launcher = (EXAMPLES / "embed_cubin" / "launcher.cu").read_text()
    launcher = launcher[: launcher.index("TVM_FFI_DLL_EXPORT_TYPED_FUNC")]  # functions= exports instead
    path = tvmffi_jit.build_inline("embed_py", cuda_sources=launcher, functions={"AddOne": "", "Scale": ""},
                                   embed_cubin={"example_kernels": Path(cubin).read_bytes()})
    report = tvmffi_jit.inspect(path)
    assert function_names(report) == {"AddOne", "Scale"}
    assert [c["name"] for c in report["files"][0]["embedded_cubins"]] == ["example_kernels"]
    assert "add_one" in kernels_of(report)
    preload_cudart()
    mod = tvm_ffi.load_module(path)  # the cubin loads lazily, at the first launch
    assert mod.get_function("AddOne") is not None


# ----------------------------------------------------------------- inspect, patch


def test_inspect_returns_the_parsed_json_report():
    path = tvmffi_jit.build_inline("insp", cpp_sources="int64_t f() { return 1; }", functions=["f"])
    report = tvmffi_jit.inspect(path)
    expected = json.loads(subprocess.run([TOOL, "inspect", "--json", path], capture_output=True, text=True,
                                         check=True).stdout)
    assert report == expected
    assert function_names(report) == {"f"}


def test_inspect_of_an_invalid_file_raises_with_the_reason(tmp_path):
    bad = tmp_path / "bad.cubin"
    bad.write_bytes(b"\x7fELF" + b"\0" * 8)
    with pytest.raises(tvmffi_jit.InspectError) as info:
        tvmffi_jit.inspect(bad)
    assert info.value.exit_code == 3 and "bad.cubin" in str(info.value)


def test_patch_routes_tvm_ffi_cpp_through_the_tool_and_unpatch_restores():
    originals = {n: getattr(tvm_ffi.cpp, n) for n in ("build", "build_inline", "load", "load_inline")}
    tvmffi_jit.patch()
    try:
        assert tvmffi_jit.is_patched()
        assert tvm_ffi.cpp.load_inline is tvmffi_jit.load_inline
        assert tvm_ffi.cpp.extension.build_inline is tvmffi_jit.build_inline
        mod = tvm_ffi.cpp.load_inline("patched", cpp_sources=ADD_ONE_CPU, functions=["add_one_cpu"])
        add_one_checked(mod)
        assert list(Path(os.environ["TVMFFI_JIT_CACHE_DIR"]).glob("patched_*/*/patched.so"))  # a result of the key
        tvmffi_jit.patch()  # twice is once
    finally:
        tvmffi_jit.unpatch()
    assert not tvmffi_jit.is_patched()
    assert {n: getattr(tvm_ffi.cpp, n) for n in originals} == originals
