"""tvmffi_jit.build_many(): several module descriptions built as one batch of
the tool (docs/python.md, "Several modules at once"): the paths load with
tvm_ffi; bad input is refused before anything runs, naming modules[i] and the
key; keep_going reports a failed module's error and builds the others; the
keys build() cannot pass (system_include_paths, cuda_arch, cuda_driver) reach
the build; build_directory puts module m in DIR/m; progress is shown; a
description and the same build() call share the cache entry; job_trace
writes Chrome's trace-event JSON.

Runs the package from the source tree (python/) against $TVMFFI_JIT_BIN.
"""

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tvm_ffi

SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(SOURCE_DIR / "python"))

import tvmffi_jit  # noqa: E402
from tvmffi_jit import _api, _binary  # noqa: E402

TOOL = os.environ.get("TVMFFI_JIT_BIN") or shutil.which("tvmffi-jit") or "tvmffi-jit"
os.environ["TVMFFI_JIT_BIN"] = TOOL
SCHEMA = SOURCE_DIR / "share" / "tvmffi-jit" / "manifest.schema.json"
CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
needs_nvcc = pytest.mark.skipif(not (CUDA_HOME / "bin" / "nvcc").exists(), reason=f"no nvcc at {CUDA_HOME}/bin/nvcc")

EXPORT = "#include <tvm/ffi/function.h>\n"


def exported(fn, body):
    return f"{EXPORT}int64_t {fn}(int64_t x) {{ {body} }}\nTVM_FFI_DLL_EXPORT_TYPED_FUNC({fn}, {fn});\n"


@pytest.fixture(autouse=True)
def own_cache_and_counting_compiler(tmp_path, monkeypatch):
    """A cold cache of the test's own, and a C++ compiler that logs every compile."""
    monkeypatch.setenv("TVMFFI_JIT_CACHE_DIR", str(tmp_path / "jit-cache"))
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", "9.0")  # no GPU here to detect
    monkeypatch.delenv("MAX_JOBS", raising=False)
    real = shutil.which("g++") or shutil.which("c++")
    cxx = tmp_path / "tools" / "cxx"
    cxx.parent.mkdir()
    cxx.write_text(f'#!/bin/sh\ncase " $* " in *" -c "*) echo "$*" >> "{tmp_path}/cxx.log";; esac\nexec {real} "$@"\n')
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))


def compiles(tmp_path):
    log = tmp_path / "cxx.log"
    return log.read_text().count("\n") if log.exists() else 0


def test_a_two_module_batch_returns_both_paths_in_order_and_they_load_with_tvm_ffi(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("src").mkdir()
    Path("src/twice.cc").write_text(exported("twice", "return 2 * x;"))
    paths = tvmffi_jit.build_many([
        {"name": "plus_one", "cpp_sources": "int64_t plus_one(int64_t x) { return x + 1; }", "functions": ["plus_one"]},
        {"name": "twice", "sources": ["src/twice.cc"]},  # relative to the current directory, as build()'s
    ])
    assert [Path(p).name for p in paths] == ["plus_one.so", "twice.so"]
    assert all(os.path.isabs(p) for p in paths)
    assert tvm_ffi.load_module(paths[0]).plus_one(41) == 42
    assert tvm_ffi.load_module(paths[1]).twice(21) == 42


def test_the_description_keys_are_the_manifest_schemas_with_builds_aliases_of_sources():
    schema_keys = set(json.loads(SCHEMA.read_text())["properties"]) - {"$schema"}
    assert set(_api._DESCRIPTION_KEYS) == schema_keys | {"cpp_files", "cuda_files"}
    # build()'s and build_inline()'s parameters that a description takes are spelled the same.
    import inspect

    taken = set(inspect.signature(tvmffi_jit.build).parameters) | set(inspect.signature(tvmffi_jit.build_inline).parameters)
    assert taken - set(_api._DESCRIPTION_KEYS) == {"build_directory", "output"}  # decided by the batch


GOOD = {"name": "good", "cpp_sources": "int64_t g() { return 1; }", "functions": ["g"]}
BAD_INPUTS = {
    "not a list": ({"name": "good", "cpp_sources": "int x;"}, TypeError, ["modules must be a list", "build_many([description])"]),
    "a str": ("good", TypeError, ["modules must be a list", "not str"]),
    "not a dict at index 1": ([GOOD, ["x"]], TypeError, ["modules[1] must be a dict"]),
    "unknown key at index 1": ([GOOD, {"name": "other", "cpp_sources": "int y;", "extra_cflag": ["-O3"]}],
                               ValueError, ["modules[1]['extra_cflag']", "unknown key", "did you mean 'extra_cflags'"]),
    "duplicate names": ([GOOD, {"name": "other", "cpp_sources": "int y;"}, dict(GOOD)],
                        ValueError, ["modules[2]['name'] = 'good'", "modules[0]"]),
    "output in a description": ([GOOD, {"name": "obj", "cpp_sources": "int y;", "output": "obj.o"}],
                                ValueError, ["modules[1]['output']", "emit='object'"]),
    "build_directory in a description": ([{**GOOD, "build_directory": "b"}], ValueError,
                                         ["modules[0]['build_directory']", "build_many(build_directory=DIR)"]),
    "a flag list given as a str": ([GOOD, {"name": "s", "cpp_sources": "int y;", "extra_cflags": "-O3"}],
                                   TypeError, ["modules[1]['extra_cflags'] must be a list of str"]),
    "a missing source file": ([GOOD, {"name": "f", "sources": ["nope.cc"]}], FileNotFoundError,
                              ["modules[1]['sources'][0] = 'nope.cc': no such file"]),
    "no name": ([GOOD, {"cpp_sources": "int y;"}], ValueError, ["modules[1]['name'] is missing"]),
    "no source": ([{"name": "empty"}], ValueError, ["modules[0] ('empty') has no source"]),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_raises_naming_the_index_and_the_key_and_nothing_runs(case, tmp_path, monkeypatch):
    modules, error, words = BAD_INPUTS[case]
    ran = tmp_path / "ran.log"
    wrapper = tmp_path / "tvmffi-jit"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{ran}"\nexec "{TOOL}" "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(_binary, "_found", str(wrapper))
    monkeypatch.chdir(tmp_path)
    tmpdir = Path(os.environ["TMPDIR"])
    before = set(tmpdir.iterdir())
    with pytest.raises(error) as info:
        tvmffi_jit.build_many(modules)
    for word in words:
        assert word in str(info.value), str(info.value)
    assert not ran.exists(), "the tool ran"
    assert not (tmp_path / "jit-cache").exists()
    assert set(tmpdir.iterdir()) == before  # no manifest or embed folder left behind
    assert compiles(tmp_path) == 0


def test_keep_going_reports_the_failed_modules_error_and_builds_the_others(tmp_path):
    modules = [
        {"name": "first", "cpp_sources": exported("first", "return 1;")},
        {"name": "broken", "cpp_sources": "int64_t b() { return undeclared_name; }", "functions": ["b"]},
        {"name": "third", "cpp_sources": exported("third", "return 3;")},
    ]
    results = tvmffi_jit.build_many(modules, keep_going=True, jobs=1)
    assert isinstance(results[1], tvmffi_jit.BuildError), results
    text = str(results[1])
    assert "'broken' (modules[1])" in text and "undeclared_name" in text and results[1].exit_code == 1
    assert tvm_ffi.load_module(results[0]).first(0) == 1
    assert tvm_ffi.load_module(results[2]).third(0) == 3

    # Without keep_going the failure is raised, naming the module.
    with pytest.raises(tvmffi_jit.BuildError) as info:
        tvmffi_jit.build_many([modules[1], {"name": "fourth", "cpp_sources": exported("fourth", "return 4;")}], jobs=1)
    assert "'broken' (modules[0])" in str(info.value) and "undeclared_name" in str(info.value)


def test_system_include_paths_are_isystem_so_their_warnings_do_not_fail_a_werror_build(tmp_path):
    inc = tmp_path / "vendor"
    inc.mkdir()
    # -Wall -Werror rejects this unused variable in a header found with -I, not with -isystem.
    (inc / "vendor.h").write_text("static inline int vendor_value() { int unused; return 7; }\n")
    source = '#include <vendor.h>\nint64_t v() { return vendor_value(); }\n'
    common = {"cpp_sources": source, "functions": ["v"], "extra_cflags": ["-Wall", "-Werror"]}
    results = tvmffi_jit.build_many(
        [{"name": "as_system", "system_include_paths": [str(inc)], **common},
         {"name": "as_user", "extra_include_paths": [str(inc)], **common}],
        keep_going=True,
    )
    assert tvm_ffi.load_module(results[0]).v() == 7
    assert isinstance(results[1], tvmffi_jit.BuildError) and "unused" in str(results[1])


def test_cuda_driver_links_the_driver_api_through_the_toolkits_stub(tmp_path):
    if not (CUDA_HOME / "lib64" / "stubs" / "libcuda.so").exists():
        pytest.skip(f"no CUDA toolkit stub at {CUDA_HOME}/lib64/stubs")
    source = "#include <cuda.h>\nint64_t driver_init() { return cuInit(0); }\n"
    [path] = tvmffi_jit.build_many([{"name": "driver_user", "cpp_sources": source, "functions": ["driver_init"],
                                     "cuda_driver": True}])
    needed = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    assert "[libcuda.so.1]" in needed


@needs_nvcc
def test_cuda_arch_of_each_description_reaches_nvcc(tmp_path):
    kernel = 'extern "C" __global__ void k(float* x) { x[0] = 1; }\n'
    paths = tvmffi_jit.build_many([
        {"name": "k80", "cuda_sources": kernel, "emit": "cubin", "cuda_arch": "8.0"},
        {"name": "k86", "cuda_sources": kernel, "emit": "cubin", "cuda_arch": ["8.6"]},
    ])
    archs = [[e["arch"] for e in tvmffi_jit.inspect(p)["files"][0]["entries"]] for p in paths]
    assert archs == [["sm_80"], ["sm_86"]], archs  # not TVM_FFI_CUDA_ARCH_LIST's 9.0


def test_build_directory_builds_module_m_in_dir_m_without_the_cache(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paths = tvmffi_jit.build_many(
        [{"name": "a", "cpp_sources": exported("a", "return 1;")},
         {"name": "b", "cpp_sources": exported("b", "return 2;")}],
        build_directory="out",
    )
    assert paths == [str(tmp_path / "out" / "a" / "a.so"), str(tmp_path / "out" / "b" / "b.so")]
    assert not (tmp_path / "jit-cache").exists()
    assert tvm_ffi.load_module(paths[1]).b(0) == 2


def test_progress_and_the_summary_are_shown_on_stderr(tmp_path, capfd):
    tvmffi_jit.build_many([{"name": "p1", "cpp_sources": exported("p1", "return 1;")},
                           {"name": "p2", "cpp_sources": exported("p2", "return 2;")}])
    err = capfd.readouterr().err
    assert "[1/4]" in err and "p1" in err and "p2" in err, err  # the tool's step lines, naming the module
    assert "2 modules: 2 built, 0 hit, 0 failed, 0 skipped" in err, err


def test_on_a_terminal_the_tool_draws_its_status_line_there(tmp_path):
    """sys.stderr on descriptor 2 and a tty: the tool inherits it and rewrites one line, as the CLI does."""
    script = (f"import sys; sys.path.insert(0, {str(SOURCE_DIR / 'python')!r}); import tvmffi_jit\n"
              "paths = tvmffi_jit.build_many([{'name': 'tty_a', 'cpp_sources': 'int a;'},"
              " {'name': 'tty_b', 'cpp_sources': 'int b;'}])\n"
              "print('PATHS', *paths)\n")
    pid, fd = pty.fork()
    if pid == 0:
        os.execvpe(sys.executable, [sys.executable, "-c", script], {**os.environ, "TERM": "xterm"})
    chunks = []
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 120)
            data = os.read(fd, 65536) if ready else b""
        except OSError:  # the child closed the terminal
            data = b""
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = b"".join(chunks).decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert re.search(r"\r\x1b\[K(\x1b\[1;32m)?\[1/", text), repr(text)  # the status line, rewritten in place
    assert "2 modules: 2 built" in text
    assert re.search(r"PATHS \S+/tty_a\.so \S+/tty_b\.so", text), repr(text)


def test_a_description_and_the_same_build_call_share_the_cache_entry(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("shared.cc").write_text(exported("shared", "return 5;"))
    description = {"name": "shared", "sources": ["shared.cc"], "extra_cflags": ["-O1"]}
    [from_batch] = tvmffi_jit.build_many([description])
    compiled = compiles(tmp_path)
    assert compiled == 1
    assert tvmffi_jit.build(**description) == from_batch  # a hit: the same key and entry
    assert compiles(tmp_path) == compiled


def test_job_trace_json_is_chromes_trace_event_format(tmp_path):
    trace = tmp_path / "trace.json"
    tvmffi_jit.build_many([{"name": "t1", "cpp_sources": exported("t1", "return 1;")},
                           {"name": "t2", "cpp_sources": exported("t2", "return 2;")}], job_trace=trace, jobs=2)
    doc = json.loads(trace.read_text())
    jobs = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] in ("compile", "link")]
    assert sorted(e["name"] for e in jobs) == ["t1: main.cpp", "t1: t1.so", "t2: main.cpp", "t2: t2.so"]
    assert {e["tid"] for e in jobs} <= {1, 2}  # -j 2: never more than two lanes
