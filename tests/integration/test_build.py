"""`tvmffi-jit build` end to end with the real binary, the real C++ compiler
and the real tvm_ffi loader: inline and file sources, the bundled add_one
example, --json, exit codes 1, 2 and 4, and that a bad manifest writes nothing.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm_ffi

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
EXAMPLES = SOURCE_DIR / "share" / "tvmffi-jit" / "examples"

ADD_SOURCE = "int64_t add(int64_t a, int64_t b) { return a + b; }\n"
TENSOR_SOURCE = r"""
void add_one_cpu(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  TVM_FFI_ICHECK(x.ndim() == 1) << "x must be a 1D tensor";
  for (int64_t i = 0; i < x.size(0); ++i) {
    static_cast<float*>(y.data_ptr())[i] = static_cast<float*>(x.data_ptr())[i] + 1;
  }
}
"""


def run(*args, cwd=None, env=None, check=None):
    p = subprocess.run([TOOL, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def build(*args, cwd=None, env=None):
    p = run("build", *args, cwd=cwd, env=env, check=0)
    lines = p.stdout.splitlines()
    assert len(lines) == 1, p.stdout  # exactly the artifact path
    path = Path(lines[0])
    assert path.is_absolute() and path.is_file()
    return path


def write_manifest(folder, **keys):
    path = Path(folder) / "manifest.json"
    path.write_text(json.dumps(keys))
    return path


@pytest.fixture(scope="module")
def inline_module(tmp_path_factory):
    d = tmp_path_factory.mktemp("inline")
    m = write_manifest(d, name="inline_mod", cpp_sources=[ADD_SOURCE, TENSOR_SOURCE],
                       functions={"add": "Adds two integers.", "add_one_cpu": ""},
                       extra_cflags=["-DTVM_FFI_DLL_EXPORT_INCLUDE_METADATA=1"])
    return build("-m", m, "--build-dir", d / "build"), d / "build"


def test_inline_cpp_module_loads_and_computes(inline_module):
    path, _ = inline_module
    mod = tvm_ffi.load_module(str(path))
    assert mod.add(2, 3) == 5
    assert mod.add(-7, 100) == 93
    x = np.arange(5, dtype=np.float32)
    y = np.zeros(5, dtype=np.float32)
    mod.add_one_cpu(tvm_ffi.from_dlpack(x), tvm_ffi.from_dlpack(y))
    np.testing.assert_array_equal(y, x + 1)
    # The docstring went through the _DOC macro (metadata on).
    assert mod.get_function_doc("add") == "Adds two integers."


def test_inline_build_dir_holds_tvm_ffi_layout(inline_module):
    _, build_dir = inline_module
    names = {p.name for p in build_dir.iterdir()}
    assert {"main.cpp", "cpp_0.o", "cpp_0.o.d", "inline_mod.so"} <= names


def test_wrapper_is_byte_identical_to_tvm_ffi(inline_module, tmp_path):
    from tvm_ffi.cpp.extension import _decorate_with_tvm_ffi

    _, build_dir = inline_module
    functions = {"add": "Adds two integers.", "add_one_cpu": ""}
    assert (build_dir / "main.cpp").read_text() == _decorate_with_tvm_ffi("\n".join([ADD_SOURCE, TENSOR_SOURCE]), functions)
    # Docstring escapes (LF, TAB, CR, quotes, backslash) and non-ASCII text.
    doc = 'Line1\n\t"q" \\ end\r \u03c0'
    m = write_manifest(tmp_path, name="esc", cpp_sources=ADD_SOURCE, functions={"add": doc}, emit="object")
    build("-m", m, "--build-dir", tmp_path / "b")
    assert (tmp_path / "b" / "main.cpp").read_text(encoding="utf-8") == _decorate_with_tvm_ffi(ADD_SOURCE, {"add": doc})


def test_file_sources_get_exports_in_a_generated_unit(tmp_path):
    # The functions are only defined in the file: no export macros in it,
    # and it includes a header next to it by a relative path.
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "impl.h").write_text("inline int64_t scale(int64_t v) { return 10 * v; }\n")
    (tmp_path / "src" / "ops.cc").write_text(
        '#include <cstdint>\n#include "impl.h"\n'
        "int64_t times_ten(int64_t v) { return scale(v); }\n"
        "int64_t sub(int64_t a, int64_t b);\n")
    (tmp_path / "src" / "more.cc").write_text("#include <cstdint>\nint64_t sub(int64_t a, int64_t b) { return a - b; }\n")
    path = build("src/ops.cc", "src/more.cc", "--name", "filemod", "--function", "times_ten",
                 "--function=sub=a minus b", "-j", "2", cwd=tmp_path)
    mod = tvm_ffi.load_module(str(path))
    assert mod.times_ten(4) == 40
    assert mod.sub(10, 3) == 7


def test_bundled_add_one_example_builds_and_loads(tmp_path):
    manifest = EXAMPLES / "add_one" / "manifest.json"
    path = build("-m", manifest, cwd=tmp_path)
    assert path.name == "add_one.so"
    mod = tvm_ffi.load_module(str(path))
    assert mod.add(2, 3) == 5
    x = np.array([1.5, -2.0, 3.25], dtype=np.float32)
    y = np.empty_like(x)
    mod.add_one_cpu(tvm_ffi.from_dlpack(x), tvm_ffi.from_dlpack(y))
    np.testing.assert_array_equal(y, x + 1)
    assert mod.get_function_doc("add_one_cpu").startswith("y[i] = x[i] + 1")


def test_json_output_describes_the_build(tmp_path):
    m = write_manifest(tmp_path, name="j", cpp_sources=ADD_SOURCE, functions="add")
    p = run("build", "-m", m, "--json", "--build-dir", tmp_path / "b", check=0)
    info = json.loads(p.stdout)
    assert info["path"] == str((tmp_path / "b" / "j.so").resolve())
    assert info["name"] == "j" and info["emit"] == "module" and info["functions"] == ["add"]
    assert info["archs"] == []
    argvs = [c["argv"] for c in info["commands"]]
    assert any(a[-4:] == ["-c", "main.cpp", "-o", "cpp_0.o"] for a in argvs)
    # --build-dir links into a new file and renames it over j.so (docs/build.md).
    assert any(a[-2] == "-o" and a[-1].startswith(".j.so.tmp.") and "-ltvm_ffi" in a for a in argvs)
    assert info["up_to_date"] == [] and info["cache"] == "off"
    assert info["seconds"] > 0


def test_verbose_shows_every_command_before_and_after_the_subcommand(tmp_path):
    m = write_manifest(tmp_path, name="v", cpp_sources=ADD_SOURCE, functions="add")
    for i, args in enumerate((["-v", "build", "-m", m], ["build", "-v", "-m", m])):
        # A directory each: the same one would be up to date the second time.
        p = run(*args, "--build-dir", tmp_path / f"b{i}", check=0)
        assert "-c main.cpp -o cpp_0.o" in p.stderr
        assert "-o .v.so.tmp." in p.stderr  # linked beside v.so, then renamed over it
        assert len(p.stdout.splitlines()) == 1


def test_emit_object_is_relocatable_and_links_into_a_module(tmp_path):
    m = write_manifest(tmp_path, name="objmod", cpp_sources=ADD_SOURCE, functions="add", emit="object")
    obj = build("-m", m, "--build-dir", tmp_path / "o")
    assert obj.suffix == ".o"
    assert obj.read_bytes()[:4] == b"\x7fELF"
    header = subprocess.run(["readelf", "-h", str(obj)], capture_output=True, text=True, check=True).stdout
    assert "REL (Relocatable file)" in header
    so = build(obj, "--name", "fromobj", "--build-dir", tmp_path / "s")
    assert tvm_ffi.load_module(str(so)).add(20, 22) == 42


def test_compile_error_is_exit_1_with_file_and_line(tmp_path):
    (tmp_path / "broken.cc").write_text("#include <cstdint>\nint64_t add(int64_t a, int64_t b) {\n  return a + ;\n}\n")
    p = run("build", "broken.cc", "--function", "add", cwd=tmp_path, check=1)
    assert "broken.cc:3:" in p.stderr
    assert "error" in p.stderr
    assert " -c " in p.stderr  # the failing command is shown
    assert p.stdout == ""


def test_bad_manifest_is_exit_2_with_pointer_and_writes_nothing(tmp_path):
    m = write_manifest(tmp_path, name="m", cpp_sources="int x;", extra_cflags=["-O2", 3])
    out = tmp_path / "never"
    p = run("build", "-m", m, "--build-dir", out, check=2)
    assert p.stderr.strip().endswith("/extra_cflags/1: expected a string, got number")
    assert len(p.stderr.strip().splitlines()) == 1
    assert not out.exists()
    m = write_manifest(tmp_path, name="m", cpp_sources="int x;", extra_cflag=[])
    p = run("build", "-m", m, "--build-dir", out, check=2)
    assert '/extra_cflag: unknown key (did you mean "extra_cflags"?)' in p.stderr
    assert not out.exists()


def test_missing_source_file_is_exit_2(tmp_path):
    p = run("build", "nope.cc", "--function", "f", cwd=tmp_path, check=2)
    assert 'no such file "nope.cc"' in p.stderr


def test_missing_tvm_ffi_is_exit_4_with_install_hint(tmp_path):
    (tmp_path / "a.cc").write_text("int f() { return 1; }\n")
    # No tvm-ffi-config on PATH, a python3 without tvm_ffi, no TVM_FFI_ROOT.
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_FFI_ROOT", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"
    probe = subprocess.run(["/usr/bin/python3", "-c", "import tvm_ffi"], capture_output=True, env=env)
    if probe.returncode == 0:
        pytest.skip("the system python3 has tvm_ffi installed")
    p = run("build", "a.cc", "--function", "f", "--build-dir", tmp_path / "b", cwd=tmp_path, env=env, check=4)
    assert "pip install apache-tvm-ffi" in p.stderr
    assert not (tmp_path / "b").exists()
    p = run("build", "a.cc", "--tvm-ffi-root", tmp_path, cwd=tmp_path, check=4)
    assert "--tvm-ffi-root" in p.stderr


def test_missing_cuda_arch_without_gpu_is_exit_4(tmp_path):
    m = write_manifest(tmp_path, name="k", cuda_sources="__global__ void k() {}", emit="fatbin")
    env = {k: v for k, v in os.environ.items() if k != "TVM_FFI_CUDA_ARCH_LIST"}
    # A libcuda that cannot be loaded stands in for "no driver" even on a GPU machine.
    env["TVMFFI_JIT_LIBCUDA"] = str(tmp_path / "no-libcuda.so")
    p = run("build", "-m", m, env=env, check=4)
    assert "TVM_FFI_CUDA_ARCH_LIST" in p.stderr and "--arch" in p.stderr
