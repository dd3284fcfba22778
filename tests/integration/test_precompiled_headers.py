"""GCC precompiled headers for the export wrapper's tvm-ffi includes, with the
real g++ and tvm_ffi (compile/precompiled_headers.h, docs/build.md): built at
a flag set's second compile, used from then on, never a different object or a
different record of what a unit read, never stale, never a failed build.

Each test has its own PCH folder (TVMFFI_JIT_PCH_DIR), not the one the other
test files share."""

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import tvm_ffi

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
GCH = "tvm/ffi/container/tensor.h.gch"


def build(tmp_path, name, body, *extra, pch=None, root="cache"):
    """Builds module `name` exporting `name` from `body`; (path, stderr of -v)."""
    src = tmp_path / f"{name}.cc"
    src.write_text(body)
    env = dict(os.environ, TVMFFI_JIT_PCH_DIR=str(pch if pch is not None else tmp_path / "pch"))
    p = subprocess.run([TOOL, "build", src, "--function", name, "--cache-dir", tmp_path / root, "-v", *extra],
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return Path(p.stdout.strip()), p.stderr


def compile_lines(stderr):
    """The unit's compile command as -v logs it (not the PCH's own build)."""
    return [line for line in stderr.splitlines() if " -c cpp_0_" in line]


def gchs(folder):
    return sorted(Path(folder).glob(f"*/include/{GCH}"))


def object_entry(root, name):
    """The cached object of module `name`'s export unit: (object bytes' sha256, headers recorded)."""
    for entry in Path(root).glob("objects/*/*/entry.json"):
        e = json.loads(entry.read_text())
        if Path(e.get("name", "")).stem == name:
            obj = next(p for p in entry.parent.iterdir() if p.suffix == ".o")
            return hashlib.sha256(obj.read_bytes()).hexdigest(), [h["path"] for h in e["headers"]]
    raise AssertionError(f"no object entry for {name} in {root}")


def adder(name, n):
    # Its own include of the header the PCH stands for, as sources written
    # for load_inline have: the PCH serves the wrapper's first include only.
    return f"#include <tvm/ffi/container/tensor.h>\nint64_t {name}(int64_t x) {{ return x + {n}; }}\n"


@pytest.fixture(scope="module")
def default_flags(tmp_path_factory):
    """Four modules with the default flags, one after another, in a fresh PCH
    folder (the last in another cache root): what each build said. Later
    tests share its PCH folder, where the default flags' PCH now is."""
    tmp = tmp_path_factory.mktemp("default")
    said = [build(tmp, f"add{i}", adder(f"add{i}", i))[1] for i in (1, 2, 3)]
    path, err = build(tmp, "add4", adder("add4", 4), root="other-cache")
    said.append(err)
    return tmp, path, said


def test_the_second_compile_of_a_flag_set_builds_the_pch_and_later_ones_load_it_for_the_same_object(default_flags):
    tmp, path, (first, second, third, fourth) = default_flags
    # First and second: compiled as before, the flag set noted.
    for err in (first, second):
        assert "-fpch-deps" not in compile_lines(err)[0] and "precompiling " not in err
    # Third: the PCH is built with the unit's flags, then loaded.
    assert "precompiling " in third and "tvm/ffi/container/tensor.h" in third
    assert "-fpch-deps" in compile_lines(third)[0]
    # Later: loaded, not built again, from another cache root too.
    assert "precompiling " not in fourth and "-fpch-deps" in compile_lines(fourth)[0]
    assert len(gchs(tmp / "pch")) == 1
    assert tvm_ffi.load_module(str(path)).add4(38) == 42
    # The same unit without a PCH: the same object, the same headers recorded, in the same order.
    _, err = build(tmp, "add4", adder("add4", 4), pch="off", root="plain-cache")  # the same source file
    assert "-fpch-deps" not in compile_lines(err)[0]
    with_pch = object_entry(tmp / "other-cache", "add4")
    without = object_entry(tmp / "plain-cache", "add4")
    assert with_pch == without
    assert any(h.endswith("/tvm/ffi/container/tensor.h") for h in with_pch[1])
    assert not [h for h in with_pch[1] if h.startswith(str(tmp / "pch"))]


def test_debug_info_and_off_use_no_pch(tmp_path):
    for i in range(3):  # the third compile of a flag set would build one
        _, err = build(tmp_path, f"dbg{i}", adder(f"dbg{i}", i), "--cflag=-g")
        assert "-fpch-deps" not in compile_lines(err)[0]
    assert not gchs(tmp_path / "pch")
    for i in range(3):
        _, err = build(tmp_path, f"off{i}", adder(f"off{i}", i), pch="off")
        assert "-fpch-deps" not in compile_lines(err)[0]
    assert not (Path(os.environ["XDG_CACHE_HOME"]) / "tvmffi-jit-toolchain" / "pch").exists()


def test_a_header_that_appears_ahead_of_one_the_pch_holds_is_read_not_the_pch(tmp_path):
    """dlpack/dlpack.h, which tensor.h includes, shadowed by a new file in an
    include folder searched before tvm-ffi's: the PCH, built without it, is
    stale, and the unit must see the new file."""
    shadow = tmp_path / "shadow"
    (shadow / "dlpack").mkdir(parents=True)
    flags = [f"--cflag=-I{shadow}"]
    body = ("int64_t {n}(int64_t x) {{\n#ifdef SHADOW_MARK\n  return SHADOW_MARK;\n#else\n  return 1;\n#endif\n}}\n")
    build(tmp_path, "s1", body.format(n="s1"), *flags)
    build(tmp_path, "s2", body.format(n="s2"), *flags)
    path, err = build(tmp_path, "s3", body.format(n="s3"), *flags)
    assert "-fpch-deps" in compile_lines(err)[0]
    assert tvm_ffi.load_module(str(path)).s3(0) == 1
    real = Path(subprocess.run(["tvm-ffi-config", "--dlpack-includedir"], capture_output=True, text=True,
                               check=True).stdout.strip()) / "dlpack" / "dlpack.h"
    (shadow / "dlpack" / "dlpack.h").write_text(real.read_text() + "\n#define SHADOW_MARK 2\n")
    path, err = build(tmp_path, "s4", body.format(n="s4"), *flags)
    assert "-fpch-deps" not in compile_lines(err)[0], "a stale PCH was loaded"
    assert tvm_ffi.load_module(str(path)).s4(0) == 2


def test_a_pch_the_compiler_cannot_read_is_dropped_and_the_unit_compiled_without_it(tmp_path):
    for i in (1, 2, 3):
        build(tmp_path, f"t{i}", adder(f"t{i}", i))
    (gch,) = gchs(tmp_path / "pch")
    # Truncated in place, and its record told the new stamp (what a stamp
    # check cannot see: damage under an unchanged record).
    data = gch.read_bytes()
    gch.write_bytes(data[: len(data) // 2])
    record = gch.parents[4] / "pch.json"
    r = json.loads(record.read_text())
    st = os.stat(gch)
    r["gch"] = {"size": st.st_size, "stamp": f"{st.st_dev}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}"}
    record.write_text(json.dumps(r))
    path, err = build(tmp_path, "t4", adder("t4", 4))
    assert "could not use the precompiled header" in err
    assert tvm_ffi.load_module(str(path)).t4(38) == 42
    assert not gchs(tmp_path / "pch")


def test_projects_differing_in_their_own_include_folders_share_one_pch_unless_theirs_shadows_what_it_read(
        default_flags, tmp_path):
    """-I folders after tvm-ffi's are not in the PCH's key: two checkouts share
    it. One whose folder holds `string` (which the PCH read from the
    compiler's own folders) must read its own, so it compiles without."""
    body = ("#include <string>\nint64_t {n}(int64_t x) {{\n#ifdef B_MARK\n  return B_MARK;\n#else\n  return 1;\n"
            "#endif\n}}\n")
    a_inc, b_inc = tmp_path / "a" / "include", tmp_path / "b" / "include"
    a_inc.mkdir(parents=True)
    b_inc.mkdir(parents=True)
    pch = default_flags[0] / "pch"  # the default flags' PCH, built without any project folder
    path, err = build(tmp_path, "a1", body.format(n="a1"), "-I", a_inc, pch=pch)
    assert "-fpch-deps" in compile_lines(err)[0] and "precompiling " not in err
    path, err = build(tmp_path, "b1", body.format(n="b1"), "-I", b_inc, pch=pch, root="cache-b")
    assert "-fpch-deps" in compile_lines(err)[0] and "precompiling " not in err, "B did not share A's PCH"
    assert tvm_ffi.load_module(str(path)).b1(0) == 1
    (b_inc / "string").write_text("#include_next <string>\n#define B_MARK 5\n")
    path, err = build(tmp_path, "b2", body.format(n="b2"), "-I", b_inc, pch=pch, root="cache-b")
    assert "-fpch-deps" not in compile_lines(err)[0], "a PCH built without B's `string` was loaded"
    assert tvm_ffi.load_module(str(path)).b2(0) == 5
    path, err = build(tmp_path, "a2", body.format(n="a2"), "-I", a_inc, pch=pch)
    assert "-fpch-deps" in compile_lines(err)[0]
    assert len(gchs(pch)) == 1


def test_a_build_directory_loads_the_pch_and_its_next_build_still_finds_everything_up_to_date(default_flags, tmp_path):
    pch = default_flags[0] / "pch"
    src = tmp_path / "bd.cc"
    src.write_text(adder("bd", 5))
    env = dict(os.environ, TVMFFI_JIT_PCH_DIR=str(pch))
    argv = [TOOL, "build", src, "--function", "bd", "--build-dir", tmp_path / "bdir", "-v"]
    first = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "-fpch-deps" in compile_lines(first.stderr)[0]
    depfile = (tmp_path / "bdir" / "cpp_0.o.d").read_text()
    assert str(pch) not in depfile and "tvm/ffi/container/tensor.h" in depfile
    again = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and not compile_lines(again.stderr), again.stderr
    assert tvm_ffi.load_module(first.stdout.strip()).bd(37) == 42
