"""What a Python caller sees beyond tvm_ffi.cpp's API: cache hits answered
inside the Python process (libtvmffi_jit_engine.so through ctypes, no process
started), the tool's warnings as Python warnings although it runs with -q,
no temp dir left behind by any call, and error messages in Python's words.

Runs the package from the source tree (python/) against $TVMFFI_JIT_BIN and
the engine library built beside it. Each scenario runs in a child Python
process, so that what happens at its exit (temp folders removed) is checked
too, and the counters of its children are its own.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
PYTHON_DIR = SOURCE_DIR / "python"
TOOL = Path(os.environ.get("TVMFFI_JIT_BIN") or shutil.which("tvmffi-jit") or "tvmffi-jit").resolve()
ENGINE = TOOL.parent / "libtvmffi_jit_engine.so"
CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))

needs_engine = pytest.mark.skipif(not ENGINE.is_file(), reason=f"no engine library at {ENGINE}")


@pytest.fixture
def tool_dir(tmp_path):
    """A folder holding the engine and a tvmffi-jit that logs each run, then
    runs the real binary: the log counts the processes the package starts."""
    d = tmp_path / "bin"
    d.mkdir()
    log = tmp_path / "tool-runs.log"
    wrapper = d / "tvmffi-jit"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{TOOL}" "$@"\n')
    wrapper.chmod(0o755)
    if ENGINE.is_file():
        (d / ENGINE.name).symlink_to(ENGINE)
    return d, log


def run_python(code, tmp_path, tool, **env):
    """Runs `code` in a fresh Python with the package, a private cache and a
    fresh, empty TMPDIR; returns (stdout lines, the TMPDIR)."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    full_env = {
        **os.environ,
        "PYTHONPATH": str(PYTHON_DIR),
        "TVMFFI_JIT_BIN": str(tool),
        "TVMFFI_JIT_CACHE_DIR": str(tmp_path / "cache"),
        "TMPDIR": str(tmpdir),
        "TVM_FFI_CUDA_ARCH_LIST": "9.0",
        **env,
    }
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, cwd=tmp_path,
                       capture_output=True, text=True)
    assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p.stdout.splitlines(), tmpdir


@needs_engine
def test_cache_hit_is_answered_in_process_without_starting_any_process(tool_dir, tmp_path):
    d, log = tool_dir
    out, _ = run_python(
        """
        import json, resource, tvmffi_jit
        src = "int64_t add(int64_t a, int64_t b) { return a + b; }"
        first = tvmffi_jit.build_inline("inproc", cpp_sources=src, functions="add")  # a miss: the binary builds
        def reaped():  # every child waited for adds its page faults here
            return resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        before = reaped()
        paths = [tvmffi_jit.build_inline("inproc", cpp_sources=src, functions="add") for _ in range(5)]
        mod = tvmffi_jit.load_inline("inproc", cpp_sources=src, functions="add")
        print(json.dumps({"same": all(p == first for p in paths), "children_faults": reaped() - before,
                          "sum": mod.add(2, 3)}))
        """,
        tmp_path, d / "tvmffi-jit",
    )
    result = json.loads(out[-1])
    assert result == {"same": True, "children_faults": 0, "sum": 5}
    assert len(log.read_text().splitlines()) == 1, log.read_text()  # the first build only


@needs_engine
def test_header_changed_between_in_process_hits_is_rebuilt_not_served_from_the_memo(tool_dir, tmp_path):
    """The engine memoises each entry's record per process (docs/python.md):
    every recorded header must still be checked on each hit. The header keeps
    its size, so only its content tells."""
    d, log = tool_dir
    include = tmp_path / "include"
    include.mkdir()
    header = include / "answer.h"
    header.write_text("#define ANSWER 41\n")
    out, _ = run_python(
        f"""
        import hashlib, json, pathlib, tvmffi_jit
        src = '#include "answer.h"\\nint64_t answer() {{ return ANSWER; }}'
        def build():
            p = tvmffi_jit.build_inline("hdr", cpp_sources=src, functions="answer",
                                        extra_include_paths=[{str(include)!r}])
            return hashlib.sha256(pathlib.Path(p).read_bytes()).hexdigest()
        built = build()                      # a miss: the binary builds
        hits = [build() for _ in range(3)]   # in-process hits, the record memoised
        pathlib.Path({str(header)!r}).write_text("#define ANSWER 42\\n")
        rebuilt = build()                    # the header changed: a miss again
        after = build()                      # and the new build is a hit
        print(json.dumps({{"hits_same": hits == [built] * 3, "rebuilt_differs": rebuilt != built,
                          "after_same": after == rebuilt}}))
        """,
        tmp_path, d / "tvmffi-jit",
    )
    assert json.loads(out[-1]) == {"hits_same": True, "rebuilt_differs": True, "after_same": True}
    assert len(log.read_text().splitlines()) == 2, log.read_text()  # the first build and the rebuild only


@needs_engine
def test_repeated_in_process_hits_are_watched_and_a_retargeted_include_symlink_still_rebuilds(tool_dir, tmp_path):
    """Repeated hits in one process are proven by inotify watches instead of a
    stat per recorded file (docs/cache.md, "Watched hits"): the answer says
    "watched". Pointing the include folder's symlink at another version of
    the header (same size, same mtime) must still rebuild."""
    d, log = tool_dir
    for version, value in (("v1", 41), ("v2", 42)):
        (tmp_path / version).mkdir()
        (tmp_path / version / "answer.h").write_text(f"#define ANSWER {value}\n")
        os.utime(tmp_path / version / "answer.h", (1_000_000_000, 1_000_000_000))
    include = tmp_path / "include"
    include.symlink_to("v1")
    out, _ = run_python(
        f"""
        import json, time, tvmffi_jit
        from tvmffi_jit import _engine
        answers = []
        real_run = _engine.run
        def spy(argv):
            r = real_run(argv)
            if r and r.get("exit_code") == 0:
                answers.append(json.loads(r["stdout"]))
            return r
        _engine.run = spy
        src = '#include "answer.h"\\nint64_t answer() {{ return ANSWER; }}'
        def load():
            return tvmffi_jit.load_inline("watched", cpp_sources=src, functions="answer",
                                          extra_include_paths=[{str(include)!r}]).answer()
        first = load()                     # a miss: the binary builds
        hits = [load() for _ in range(4)]  # the first hit proves and watches, the others are watched
        watched = [a.get("watched", False) for a in answers[-4:]]
        link = {str(include)!r}
        import os
        os.remove(link)
        os.symlink("v2", link)
        after = load()                     # the header behind the path changed: rebuilt
        print(json.dumps({{"first": first, "hits": hits, "watched": watched, "after": after,
                          "after_watched": answers[-1].get("watched", False), "after_cache": answers[-1]["cache"]}}))
        """,
        tmp_path, d / "tvmffi-jit",
    )
    r = json.loads(out[-1])
    assert r["first"] == 41 and r["hits"] == [41] * 4
    assert r["watched"] == [False, True, True, True], r
    assert r["after"] == 42, r
    assert r["after_cache"] == "miss" and not r["after_watched"], r
    assert len(log.read_text().splitlines()) == 2, log.read_text()  # the first build and the rebuild only


@needs_engine
def test_a_write_through_a_shared_mapping_is_never_served_stale_by_a_watched_hit(tool_dir, tmp_path):
    """inotify reports no write made through a shared writable mapping
    (docs/cache.md, "Watched hits"): a watched hit still stats the module it
    hands back and every input the user owns. The header is rewritten with
    mmap + msync after watched hits, the writer's mapping still open: the next
    call returns the new value. The cached module changed the same way is
    not handed back either."""
    d, log = tool_dir
    (tmp_path / "inc").mkdir()
    header = tmp_path / "inc" / "val.h"
    header.write_text("#define VAL 1\n")
    out, _ = run_python(
        f"""
        import json, mmap, os, time, tvmffi_jit
        from tvmffi_jit import _engine
        answers = []
        real_run = _engine.run
        def spy(argv):
            r = real_run(argv)
            if r and r.get("exit_code") == 0:
                answers.append(json.loads(r["stdout"]))
            return r
        _engine.run = spy
        src = '#include "val.h"\\nint64_t val() {{ return VAL; }}'
        def load():
            return tvmffi_jit.load_inline("mapped", cpp_sources=src, functions="val",
                                          extra_include_paths=[{str(tmp_path / "inc")!r}])
        def settle(path):
            # A watched hit keeps its proof once the stat-checked files' stamps
            # are 50 ms old (a condition on the clock, not a guessed wait).
            st = os.stat(path)
            while time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < 100_000_000:
                time.sleep(0.01)
        first = load().val()   # a miss: the binary builds
        load()                 # a hit in-process: its answer names the module
        settle({str(header)!r})
        settle(answers[-1]["path"])
        hits = [load().val() for _ in range(3)]
        watched = [a.get("watched", False) for a in answers[-3:]]
        fd = os.open({str(header)!r}, os.O_RDWR)
        m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        m[:13] = b"#define VAL 2"
        m.flush()              # msync; the mapping stays open
        n = len(answers)
        after = load().val()
        after_cache = answers[-1]["cache"] if len(answers) > n else "miss"  # the engine answers hits only
        m.close()
        # The cached module itself, changed in place through a mapping (its
        # last bytes: the section headers, which no loaded page holds).
        for _ in range(3):
            load()
        module = answers[-1]["path"]
        os.chmod(module, 0o644)
        settle(module)
        load(); load()
        watched_before = answers[-1].get("watched", False)
        fd = os.open(module, os.O_RDWR)
        size = os.fstat(fd).st_size
        m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        m[size - 4:size] = bytes(b ^ 0xFF for b in m[size - 4:size])
        m.flush()
        n = len(answers)
        load()
        corrupt_answer = answers[-1] if len(answers) > n else {{"cache": "miss"}}
        m.close()
        print(json.dumps({{"first": first, "hits": hits, "watched": watched, "after": after,
                          "after_cache": after_cache, "watched_before": watched_before,
                          "corrupt_cache": corrupt_answer["cache"],
                          "corrupt_watched": corrupt_answer.get("watched", False)}}))
        """,
        tmp_path, d / "tvmffi-jit",
    )
    r = json.loads(out[-1])
    assert r["first"] == 1 and r["hits"] == [1, 1, 1], r
    assert r["watched"][-1] is True, r  # the case under test is a watched hit
    assert r["after"] == 2, r
    assert r["after_cache"] == "miss", r
    assert r["watched_before"] is True, r
    assert r["corrupt_cache"] != "hit" and not r["corrupt_watched"], r


def test_only_if_cached_leaves_the_job_limits_unread(tmp_path):
    """The engine's hit path runs no job, so it reads none of the cgroup files,
    mountinfo or /proc/meminfo the job gate is sized from (the debug log says
    what the gate got)."""
    (tmp_path / "two.cc").write_text("int64_t two() { return 2; }\n")
    env = {**os.environ, "TVMFFI_JIT_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.run([str(TOOL), "-vv", "build", "--json", "--only-if-cached", "--name", "two", "two.cc"],
                       env=env, cwd=tmp_path, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["cache"] == "miss"
    gate = [line for line in p.stderr.splitlines() if "job gate:" in line]
    assert gate == ["tvmffi-jit: debug: job gate: not resolved (--only-if-cached runs no job)"], p.stderr


@needs_engine
def test_in_process_miss_builds_through_the_binary_and_in_process_can_be_switched_off(tool_dir, tmp_path):
    d, log = tool_dir
    code = """
        import tvmffi_jit
        src = "int64_t two() { return 2; }"
        for _ in range(3):
            assert tvmffi_jit.load_inline("off", cpp_sources=src, functions="two").two() == 2
        """
    run_python(code, tmp_path, d / "tvmffi-jit", TVMFFI_JIT_IN_PROCESS="0")
    assert len(log.read_text().splitlines()) == 3  # every call a process
    log.unlink()
    run_python(code, tmp_path, d / "tvmffi-jit")
    assert not log.exists()  # every call a hit in the cache the first run filled


def test_unwritable_cache_warns_in_python_and_no_call_leaves_a_temp_dir(tool_dir, tmp_path):
    d, log = tool_dir
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache root's parent should be")
    out, tmpdir = run_python(
        """
        import os, warnings, tvmffi_jit
        src = "int64_t three() { return 3; }"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mod = tvmffi_jit.load_inline("nocache", cpp_sources=src, functions="three")
            assert mod.three() == 3
            path = tvmffi_jit.build_inline("nocache", cpp_sources=src, functions="three")
            assert os.path.isfile(path)  # the caller's until the process ends
        for w in caught:
            print(w.category.__name__, str(w.message).replace(chr(10), " "))
        try:
            tvmffi_jit.build_inline("broken", cpp_sources="int64_t f() { return nope; }", functions="f")
        except tvmffi_jit.BuildError as e:
            print("BuildError", e.exit_code)
        """,
        tmp_path, d / "tvmffi-jit", TVMFFI_JIT_CACHE_DIR=str(blocker / "cache"),
    )
    warned = [line for line in out if line.startswith("JitWarning ")]
    assert len(warned) == 2 and all("without caching" in w for w in warned), out
    assert "BuildError 1" in out
    assert list(tmpdir.iterdir()) == []


@pytest.mark.skipif(not (CUDA_HOME / "bin" / "nvcc").exists(), reason=f"no nvcc at {CUDA_HOME}/bin/nvcc")
def test_missing_cuda_arch_error_names_the_python_setting_not_a_cli_flag(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TVM_FFI_CUDA_ARCH_LIST"}
    code = """
        import tvmffi_jit
        try:
            tvmffi_jit.build_inline("noarch", cuda_sources="__global__ void k() {}")
        except tvmffi_jit.BuildError as e:
            print(str(e).replace(chr(10), " "))
        """
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    p = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**env, "PYTHONPATH": str(PYTHON_DIR), "TVMFFI_JIT_BIN": str(TOOL), "TMPDIR": str(tmpdir),
             "TVMFFI_JIT_CACHE_DIR": str(tmp_path / "cache"), "TVMFFI_JIT_LIBCUDA": str(tmp_path / "no-libcuda.so")},
        capture_output=True, text=True, check=True)
    message = p.stdout
    assert "cannot choose a CUDA architecture" in message, message
    assert "TVM_FFI_CUDA_ARCH_LIST" in message
    assert "--arch" not in message and "manifest" not in message
