"""tvm_ffi's own tests of tvm_ffi.cpp.build/build_inline/load/load_inline,
run unchanged with tvmffi_jit.patch() applied (tests/python/tvm_ffi_patch_plugin.py).

The test files come from the apache-tvm-ffi sdist of the installed version
(scripts/setup.sh downloads it into <build>/tvm-ffi-sdist with pip; this test
downloads it there too if it is missing). They run in a child pytest with
tvm_ffi's cache root pointed at an empty folder, which must stay free of JIT
builds, while tvmffi-jit's cache must hold their modules. Cases that need a
GPU (torch with CUDA, cuda-python) skip themselves with tvm_ffi's own reasons;
every other case must pass.
"""

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import tvm_ffi

SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BINARY_DIR = Path(os.environ.get("TVMFFI_JIT_BINARY_DIR", SOURCE_DIR / "build"))
TOOL = os.environ.get("TVMFFI_JIT_BIN") or shutil.which("tvmffi-jit") or "tvmffi-jit"
VERSION = tvm_ffi.__version__

# Every upstream test file that calls one of the four functions.
UPSTREAM_TESTS = [
    "test_build_inline.py",  # build_inline, build of a .c to .o, link of objects
    "test_build.py",  # build of a file, load_inline with metadata and docstrings
    "test_load_inline.py",  # load_inline: list, dict, several sources, build_directory, CUDA (GPU)
    "test_stl.py",  # build of a file with STL containers
    "test_big_int.py",  # load_inline module fixture
    "test_dataclass_gen_abi_cpp.py",  # load_inline/build with build_directory and output="*.o"
    "test_function.py::test_callback_rawstr_and_bytearrayptr_args",  # load_inline
    "test_stream.py",  # load_inline of a stream check (GPU)
    "test_cubin_launcher.py",  # load_inline with CUDA (GPU)
]
# Modules built without build_directory, which must come from tvmffi-jit's cache.
EXPECTED_CACHE_ENTRIES = {"hello", "test_c", "test_c_lib", "hello_obj", "hello_from_obj", "test_stl",
                          "test_io_types", "test_docs", "test_no_meta", "test_big_int_transport",
                          "test_callback_rawstr_bytearrayptr"}


def sdist_tests_dir():
    explicit = os.environ.get("TVMFFI_JIT_TVM_FFI_TESTS")
    if explicit:
        return Path(explicit)
    root = BINARY_DIR / "tvm-ffi-sdist"
    tests = root / f"apache_tvm_ffi-{VERSION}" / "tests" / "python"
    if not tests.is_dir():
        # scripts/setup.sh does this; repeated here so the test also runs on its own.
        subprocess.run([sys.executable, str(SOURCE_DIR / "tests" / "python" / "fetch_tvm_ffi_tests.py"),
                        str(root)], check=True)
    assert tests.is_dir(), f"no {tests}: run scripts/setup.sh (it downloads the apache-tvm-ffi sdist)"
    return tests


@pytest.fixture(scope="module")
def upstream_run(tmp_path_factory):
    tests = sdist_tests_dir()
    work = tmp_path_factory.mktemp("upstream")
    (work / "pytest.ini").write_text("[pytest]\n")  # not the sdist's config (it asks for pytest-xdist)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SOURCE_DIR / "python"), str(SOURCE_DIR / "tests" / "python"),
                                         env.get("PYTHONPATH", "")])
    env["TVMFFI_JIT_BIN"] = TOOL
    env["TVMFFI_JIT_CACHE_DIR"] = str(work / "jit-cache")
    env["TVM_FFI_CACHE_DIR"] = str(work / "tvm-ffi-cache")
    env.setdefault("TVM_FFI_CUDA_ARCH_LIST", "9.0")
    junit = work / "junit.xml"
    args = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "tvm_ffi_patch_plugin",
            "-c", str(work / "pytest.ini"), "--rootdir", str(work), f"--junitxml={junit}",
            *[str(tests / t) for t in UPSTREAM_TESTS]]
    p = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True)
    print(p.stdout[-6000:])
    print(p.stderr[-3000:])
    return p, ET.parse(junit).getroot(), work


def outcomes(junit_root):
    out = {"passed": [], "failed": [], "skipped": []}
    for case in junit_root.iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            out["failed"].append(name)
        elif case.find("skipped") is not None:
            out["skipped"].append((name, case.find("skipped").get("message", "")))
        else:
            out["passed"].append(name)
    return out


def test_upstream_tests_pass_with_the_patch(upstream_run):
    p, junit_root, _ = upstream_run
    result = outcomes(junit_root)
    assert p.returncode == 0 and not result["failed"], f"failed: {result['failed']}\n{p.stdout[-4000:]}"
    # The plugin really patched (it fails the session otherwise) and the
    # suite really ran the CPU cases.
    assert "tvmffi_jit.patch() applied" in p.stdout
    assert len(result["passed"]) >= 30, result
    for name, reason in result["skipped"]:
        # Only GPU-dependent cases may skip.
        assert re.search(r"torch|CUDA|cuda|GPU", reason), (name, reason)


def test_upstream_modules_came_from_tvmffi_jit_and_not_tvm_ffi(upstream_run):
    _, _, work = upstream_run
    tvm_ffi_cache = work / "tvm-ffi-cache"
    jit_dirs = [p.name for p in tvm_ffi_cache.iterdir() if re.fullmatch(r".+_[0-9a-f]{16}", p.name)] \
        if tvm_ffi_cache.exists() else []
    assert jit_dirs == [], "tvm_ffi.cpp built these itself"
    entries = {re.sub(r"_[0-9a-f]{16}$", "", p.name) for p in (work / "jit-cache").iterdir()
               if re.fullmatch(r".+_[0-9a-f]{16}", p.name)}
    assert EXPECTED_CACHE_ENTRIES <= entries, entries
    # test_load_inline_cpp_build_dir's relative build_directory, built by the tool.
    assert (work / "build" / "build_add_one" / "hello.so").is_file()
