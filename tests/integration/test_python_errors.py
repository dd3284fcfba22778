"""Errors of the Python API in the caller's terms: a bad argument is named
with its value (`functions[0] = '1add' is not a C identifier`), never as the
temp manifest the package writes for the tool; a str where a list is due is a
TypeError naming the argument (tvm_ffi.cpp splits "-O3" into "- O 3"); the
missing-arch advice names the Python way once; an export defined in the .cu
of a mixed module is diagnosed in one line.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE_DIR / "python"))

import tvmffi_jit  # noqa: E402

TOOL = os.environ.get("TVMFFI_JIT_BIN") or shutil.which("tvmffi-jit") or "tvmffi-jit"
os.environ["TVMFFI_JIT_BIN"] = TOOL
ADD = "int64_t add(int64_t a, int64_t b) { return a + b; }"
HAVE_NVCC = (Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc").exists()


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TVMFFI_JIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", "9.0")


def message(info):
    text = str(info.value)
    assert "tvmffi-jit-py-" not in text and ".json" not in text, text  # no temp manifest in it
    return text


def test_a_function_name_that_is_not_an_identifier_is_named_with_its_index():
    with pytest.raises(ValueError) as info:
        tvmffi_jit.load_inline("m", cpp_sources=ADD, functions=["add", "1add"])
    assert message(info) == "load_inline(): functions[1] = '1add' is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)"
    with pytest.raises(ValueError) as info:
        tvmffi_jit.build_inline("m", cpp_sources=ADD, functions={"add": "adds", "bad-name": ""})
    assert "functions key 'bad-name' is not a C identifier" in message(info)
    with pytest.raises(TypeError) as info:
        tvmffi_jit.build_inline("m", cpp_sources=ADD, functions={"add": 3})
    assert "functions['add'] (its docstring) must be a str, not int" in message(info)


def test_a_bad_module_name_is_named():
    with pytest.raises(ValueError) as info:
        tvmffi_jit.build_inline("my-module", cpp_sources=ADD, functions=["add"])
    assert message(info).startswith("build_inline(): name = 'my-module' is not a C identifier")
    with pytest.raises(TypeError, match=r"load\(\): name must be a str, not int"):
        tvmffi_jit.load(7, sources=["x.cc"])


def test_a_missing_source_file_is_named_with_its_argument_and_index(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.cc").write_text(ADD)
    with pytest.raises(FileNotFoundError) as info:
        tvmffi_jit.build("m", sources=["a.cc"], cuda_files=["k.cu"])
    assert message(info) == f"build(): cuda_files[0] = 'k.cu': no such file (resolved: {tmp_path / 'k.cu'})"
    (tmp_path / "d.cc").mkdir()
    with pytest.raises(IsADirectoryError, match=r"load\(\): sources\[1\] = 'd.cc': a directory"):
        tvmffi_jit.load("m", sources=["a.cc", "d.cc"])


def test_a_missing_include_directory_is_named(tmp_path):
    missing = str(tmp_path / "no-include")
    with pytest.raises(FileNotFoundError) as info:
        tvmffi_jit.build_inline("m", cpp_sources=ADD, extra_include_paths=[str(tmp_path), missing])
    assert message(info) == f"build_inline(): extra_include_paths[1] = {missing!r}: no such directory"


@pytest.mark.parametrize("argument", ["extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths"])
def test_a_string_where_a_list_is_due_is_a_type_error_naming_the_argument(argument, tmp_path):
    value = str(tmp_path) if argument == "extra_include_paths" else "-O3"
    for call in (tvmffi_jit.build_inline, tvmffi_jit.load_inline):
        with pytest.raises(TypeError) as info:
            call("m", cpp_sources=ADD, **{argument: value})
        assert message(info) == (f"{call.__name__}(): {argument} must be a list of str, not a str: "
                                 f"write {argument}=[{value!r}]")
    with pytest.raises(TypeError, match=rf"build\(\): {argument}\[1\] must be a str"):
        tvmffi_jit.build("m", sources=[__file__], **{argument: [value, 3]})


def test_the_missing_arch_advice_gives_its_example_once(monkeypatch, tmp_path):
    monkeypatch.delenv("TVM_FFI_CUDA_ARCH_LIST")
    monkeypatch.setenv("TVMFFI_JIT_LIBCUDA", str(tmp_path / "no-libcuda.so"))  # no driver to ask either
    with pytest.raises(tvmffi_jit.BuildError) as info:
        tvmffi_jit.build_inline("m", cuda_sources="__global__ void k() {}")
    text = str(info.value)
    if "cannot choose a CUDA architecture" not in text:
        pytest.skip(f"no nvcc: {text.splitlines()[-1]}")
    assert text.count("e.g.") == 1 and text.count("TVM_FFI_CUDA_ARCH_LIST") == 2, text  # the variable and its example
    assert 'os.environ["TVM_FFI_CUDA_ARCH_LIST"] = "8.0 9.0"' in text and "--arch" not in text


def test_an_export_defined_in_another_source_is_one_line_naming_it_and_the_file(tmp_path, monkeypatch):
    # A mixed module: the export wrappers go into the first C++ source (as in
    # tvm_ffi.cpp), so a function defined only in the other source is undeclared there.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "main.cc").write_text("#include <cstdint>\nint64_t helper() { return 2; }\n")
    (tmp_path / "more.cc").write_text("#include <cstdint>\nint64_t blocks(int64_t n) { return (n + 255) / 256; }\n")
    with pytest.raises(tvmffi_jit.BuildError) as info:
        tvmffi_jit.build_inline("mixed", cpp_sources="#include <cstdint>\nint64_t helper() { return 2; }",
                                cuda_sources="int64_t blocks(int64_t n) { return n; }" if HAVE_NVCC else None,
                                functions=["blocks"])
    lines = str(info.value).splitlines()
    assert lines[1] == ('tvmffi-jit: error: exported function "blocks" is not declared in cpp_sources, the source '
                        "that holds the export wrappers (as in tvm_ffi.cpp): declare it there (a prototype is "
                        "enough when another source defines it)"), lines[:3]
    # Declared there, it builds and runs.
    mod = tvmffi_jit.load_inline(
        "mixed_ok", cpp_sources="#include <cstdint>\nint64_t blocks(int64_t n);",
        cuda_sources="#include <cstdint>\nint64_t blocks(int64_t n) { return (n + 255) / 256; }" if HAVE_NVCC else None,
        functions=["blocks"]) if HAVE_NVCC else None
    if mod is not None:
        assert mod.blocks(1000) == 4
