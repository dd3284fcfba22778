"""Edit and reload in one process (issue 33, docs/python.md "Edit and reload"):
a header edited 1 -> 2 -> 3 -> 2 and loaded again each time runs the new code
through tvmffi_jit.load_inline, tvmffi_jit.load and tvm_ffi.load_module of
build_inline's path, because each cached build's artifact has a path of its
own (docs/cache.md, "Layout"); loading content already loaded maps nothing
new; with build_directory= (a fixed path, tvm_ffi's contract) the process
keeps the old code and is told so once.

Each scenario runs in a child Python process of its own: a library the
dynamic loader mapped stays mapped for the life of the process.
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
TOOL = os.environ.get("TVMFFI_JIT_BIN") or shutil.which("tvmffi-jit") or "tvmffi-jit"

CHILD = textwrap.dedent(
    r"""
    import json, os, sys, warnings
    from pathlib import Path
    import tvm_ffi, tvmffi_jit

    mode, work = sys.argv[1], Path(sys.argv[2])
    inc = work / "inc"
    header = inc / "value.h"
    source = work / "value.cc"
    name = "reload_" + mode

    def load():
        kw = dict(extra_include_paths=[str(inc)])
        if mode == "build_directory":
            kw["build_directory"] = str(work / "build")
        if mode in ("load_inline", "build_directory"):
            return tvmffi_jit.load_inline(name, cpp_sources='#include "value.h"\nint64_t value() { return VALUE; }',
                                          functions=["value"], **kw), None
        if mode == "load":
            return tvmffi_jit.load(name, sources=[str(source)], **kw), None
        path = tvmffi_jit.build_inline(name, cpp_sources='#include "value.h"\nint64_t value() { return VALUE; }',
                                       functions=["value"], **kw)
        return tvm_ffi.load_module(path), path

    def mapped():
        # The distinct files of this module the process has mapped.
        with open("/proc/self/maps") as f:
            return sorted({line.split()[-1] for line in f if name in line and line.rstrip().endswith(".so")})

    values, paths, modules = [], [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for v in (1, 2, 3, 2):
            header.write_text(f"#define VALUE {v}\n")  # the same size each time
            m, path = load()
            modules.append(m)  # loaded modules stay in use
            values.append(int(m.value()))
            paths.append(path)
        before = mapped()
        m, _ = load()  # a fifth load of content already loaded
        fifth = int(m.value())
        after = mapped()
        # The modules loaded earlier still answer (their mappings are kept).
        still = [int(x.value()) for x in modules]
    stale = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning) and "build_directory" in str(w.message)]
    print(json.dumps({"values": values, "paths": paths, "before": before, "after": after, "fifth": fifth,
                      "still": still, "stale_warnings": stale}))
    """
)


def run_child(mode, tmp_path, cache=None):
    work = tmp_path / mode
    (work / "inc").mkdir(parents=True)
    (work / "value.cc").write_text(
        '#include <tvm/ffi/function.h>\n#include "value.h"\n'
        "int64_t value() { return VALUE; }\n"
        "TVM_FFI_DLL_EXPORT_TYPED_FUNC(value, value);\n"
    )
    env = dict(os.environ)
    env["TVMFFI_JIT_BIN"] = TOOL
    env["TVMFFI_JIT_CACHE_DIR"] = str(cache or tmp_path / "cache")
    env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env["PYTHONPATH"] = str(SOURCE_DIR / "python") + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(work)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["load_inline", "load", "build_inline"])
def test_header_edits_reload_new_code_in_one_process(mode, tmp_path):
    r = run_child(mode, tmp_path)
    assert r["values"] == [1, 2, 3, 2]
    # The fifth load (value 2 again) is the library already mapped: nothing new.
    assert r["fifth"] == 2
    assert r["after"] == r["before"]
    assert len(r["after"]) == 3  # one mapping per distinct content: 1, 2, 3
    assert r["still"] == [1, 2, 3, 2]
    assert not r["stale_warnings"]
    if mode == "build_inline":
        p = r["paths"]
        assert len({p[0], p[1], p[2]}) == 3  # a path per content
        assert p[3] == p[1]  # the same content: the same path, for good


def test_a_fixed_build_directory_keeps_the_old_code_and_says_so_once(tmp_path):
    r = run_child("build_directory", tmp_path)
    # tvm_ffi's contract: the user's folder, the same file name, so the
    # dynamic loader returns what it mapped first (as tvm_ffi.cpp does).
    assert r["values"] == [1, 1, 1, 1]
    assert len(r["stale_warnings"]) == 1
    assert "build_directory" in r["stale_warnings"][0]


def test_a_root_that_cannot_take_the_artifact_reloads_private_copies_and_leaves_none(tmp_path):
    # The cache root cannot be created (its parent is a file): each build is
    # a private copy outside the root, never an old shared path, and each is
    # removed once loaded (the process keeps its mapping).
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory")
    r = run_child("load_inline", tmp_path, cache=blocker / "cache")
    assert r["values"] == [1, 2, 3, 2]
    assert r["still"] == [1, 2, 3, 2]
    left = [p for p in (tmp_path / "tmp").rglob("*.so")]
    assert left == [], left
