"""Incremental `--build-dir` (and Python's build_directory): a repeated build
compiles nothing and leaves the module file alone; a changed source, header,
flag or a removed object reruns exactly the steps that depend on it; a module
that is loaded is replaced by rename, never rewritten in place; an input
rewritten within one timestamp tick with the same size, or modified while its
compiler ran, is still seen (docs/build.md, "Incremental build directories").
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))

A_SOURCE = '#include "shared.h"\nint64_t add(int64_t a, int64_t b) { return a + b + kBias; }\n'
B_SOURCE = ('#include <tvm/ffi/function.h>\n#include "only_b.h"\n'
            "int64_t twice(int64_t a) { return a * kFactor; }\n"
            "TVM_FFI_DLL_EXPORT_TYPED_FUNC(twice, twice);\n")


def run(*args, env=None, check=0):
    p = subprocess.run([TOOL, *map(str, args)], env=env, capture_output=True, text=True)
    assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


@pytest.fixture
def project(tmp_path):
    """Two file units (a.cc exports `add` through the wrapper, b.cc exports
    `twice` itself), each with its own header."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "shared.h").write_text("#pragma once\n#include <cstdint>\nconstexpr int64_t kBias = 0;\n")
    (src / "only_b.h").write_text("#pragma once\n#include <cstdint>\nconstexpr int64_t kFactor = 2;\n")
    (src / "a.cc").write_text(A_SOURCE)
    (src / "b.cc").write_text(B_SOURCE)
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"name": "inc", "sources": ["src/a.cc", "src/b.cc"], "functions": ["add"]}))

    class Project:
        root = tmp_path
        dir = tmp_path / "build"

        def build(self, *extra):
            p = run("build", "--json", "-m", manifest, "--build-dir", self.dir, *extra)
            return json.loads(p.stdout)

    return Project()


def compiled(info):
    """The outputs of the compile/link commands that ran."""
    return sorted(c["description"] for c in info["commands"])


def stamps(folder):
    """Every file of a build directory but the lock (whose holder line each build writes)."""
    return {p.name: stamp(p) for p in Path(folder).iterdir() if p.name != ".tvmffi-jit.lock"}


def stamp(path):
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns, st.st_size


def call(module, fn, *args):
    code = f"import tvm_ffi,sys; print(tvm_ffi.load_module(sys.argv[1]).{fn}(*map(int, sys.argv[2:])))"
    return int(subprocess.run([sys.executable, "-c", code, str(module), *map(str, args)], check=True,
                              capture_output=True, text=True).stdout)


def test_repeated_build_compiles_nothing_and_leaves_the_module_file_alone(project):
    first = project.build()
    assert compiled(first) == ["compiling src/a.cc", "compiling src/b.cc", "linking inc.so"]
    module = Path(first["path"])
    before = stamps(project.dir)
    second = project.build()
    assert second["commands"] == [] and second["path"] == first["path"]
    assert sorted(second["up_to_date"]) == ["cpp_0.o", "cpp_1.o", "inc.so"]
    after = stamps(project.dir)
    assert after == before  # not one file rewritten, the build log included
    assert call(module, "add", 2, 3) == 5 and call(module, "twice", 4) == 8


def test_changed_source_recompiles_only_its_unit(project):
    project.build()
    b_obj = stamp(project.dir / "cpp_1.o")
    (project.root / "src" / "a.cc").write_text(A_SOURCE.replace("a + b", "a + b + 100"))
    info = project.build()
    assert compiled(info) == ["compiling src/a.cc", "linking inc.so"]
    assert stamp(project.dir / "cpp_1.o") == b_obj
    assert call(info["path"], "add", 2, 3) == 105


def test_changed_header_recompiles_its_dependants_only(project):
    project.build()
    a_obj = stamp(project.dir / "cpp_0.o")
    (project.root / "src" / "only_b.h").write_text("#pragma once\n#include <cstdint>\nconstexpr int64_t kFactor = 3;\n")
    info = project.build()
    assert compiled(info) == ["compiling src/b.cc", "linking inc.so"]
    assert stamp(project.dir / "cpp_0.o") == a_obj
    assert call(info["path"], "twice", 4) == 12


def test_changed_flag_recompiles(project):
    project.build()
    info = project.build("--cflag=-DSOME_FLAG=1")
    assert compiled(info) == ["compiling src/a.cc", "compiling src/b.cc", "linking inc.so"]
    assert project.build("--cflag=-DSOME_FLAG=1")["commands"] == []
    # Back to the old flags: a changed command again, not an old record.
    assert compiled(project.build()) == ["compiling src/a.cc", "compiling src/b.cc", "linking inc.so"]


def test_removed_object_is_rebuilt(project):
    project.build()
    (project.dir / "cpp_1.o").unlink()
    info = project.build()
    assert compiled(info) == ["compiling src/b.cc", "linking inc.so"]
    assert (project.dir / "cpp_1.o").is_file()


def test_removed_module_is_relinked_without_compiling(project):
    first = project.build()
    Path(first["path"]).unlink()
    assert compiled(project.build()) == ["linking inc.so"]


def test_loaded_module_is_replaced_by_rename_never_rewritten(project):
    module = Path(project.build()["path"])
    original = module.read_bytes()
    old_inode = module.stat().st_ino
    # A process that has the module loaded (and a descriptor on its file).
    with open(module, "rb") as held:
        loaded = subprocess.Popen(
            [sys.executable, "-c",
             "import sys, tvm_ffi; m = tvm_ffi.load_module(sys.argv[1]); print('loaded', flush=True); "
             "sys.stdin.readline(); print(m.add(2, 3), flush=True)", str(module)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert loaded.stdout.readline().strip() == "loaded"
            (project.root / "src" / "a.cc").write_text(A_SOURCE.replace("a + b", "a + b + 1000"))
            info = project.build()
            assert compiled(info) == ["compiling src/a.cc", "linking inc.so"]
            # The old inode still holds the old bytes: the link wrote a new file.
            held.seek(0)
            assert held.read() == original
            assert os.fstat(held.fileno()).st_nlink == 0 and module.stat().st_ino != old_inode
            loaded.stdin.write("\n")
            loaded.stdin.flush()
            assert loaded.stdout.readline().strip() == "5"  # the running process kept the old code
        finally:
            loaded.kill()
            loaded.wait()
    assert call(module, "add", 2, 3) == 1005
    assert not [p.name for p in project.dir.iterdir() if ".tmp." in p.name]


def test_same_size_rewrite_within_the_timestamp_tick_is_seen(project):
    project.build()
    a = project.root / "src" / "a.cc"
    st = a.stat()
    # Same length, same inode, and the very same mtime: only the content
    # tells (a write within one coarse timestamp tick of the build).
    with open(a, "r+") as f:
        f.write(A_SOURCE.replace("a + b + kBias", "a - b + kBias"))
    os.utime(a, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (a.stat().st_ino, a.stat().st_size, a.stat().st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
    info = project.build()
    assert compiled(info) == ["compiling src/a.cc", "linking inc.so"]
    assert call(info["path"], "add", 5, 3) == 2


def test_header_modified_while_its_unit_compiles_is_compiled_again(project, tmp_path):
    # A compiler launcher that edits the header after the compiler read it:
    # the object was built from the old text, so the next build must not take
    # it as up to date although the header's stat is the one recorded.
    launcher = tmp_path / "edit-after-compile.sh"
    header = project.root / "src" / "only_b.h"
    launcher.write_text(f'#!/bin/sh\n"$@" || exit $?\ncase "$*" in *b.cc*) echo "// edited" >> {header};; esac\n')
    launcher.chmod(0o755)
    project.build("--cxx-launcher", str(launcher))
    info = project.build()
    assert compiled(info) == ["compiling src/b.cc", "linking inc.so"]
    assert project.build()["commands"] == []


def test_damaged_build_log_rebuilds_everything(project):
    project.build()
    (project.dir / ".tvmffi-jit.buildlog.json").write_text('{"format_version": 1, "steps": {"cpp_0.o": 7}}')
    info = project.build()
    assert compiled(info) == ["compiling src/a.cc", "compiling src/b.cc", "linking inc.so"]
    assert project.build()["commands"] == []  # and the log written anew


def test_python_build_directory_is_incremental(tmp_path):
    sys.path.insert(0, str(SOURCE_DIR / "python"))
    os.environ["TVMFFI_JIT_BIN"] = TOOL
    import tvmffi_jit

    d = tmp_path / "bd"
    kwargs = dict(cpp_sources="int64_t add(int64_t a, int64_t b) { return a + b; }", functions=["add"],
                  build_directory=str(d))
    path = tvmffi_jit.build_inline("pyinc", **kwargs)
    assert Path(path).parent == d.resolve()
    before = stamps(d)
    assert tvmffi_jit.build_inline("pyinc", **kwargs) == path
    assert stamps(d) == before  # main.cpp, objects, module: none rewritten
    assert call(path, "add", 2, 3) == 5
    path2 = tvmffi_jit.build_inline("pyinc", **{**kwargs, "cpp_sources": "int64_t add(int64_t a, int64_t b) { return a * b; }"})
    assert path2 == path and stamp(path) != before["pyinc.so"] and call(path, "add", 2, 3) == 6
