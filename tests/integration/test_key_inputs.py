"""Inputs a compiler reads through flags or lookups are keyed (docs/cache.md,
"What a key covers"): each case below was a stale hit in the same root before
-- the input changed, the build answered "hit" with the old module.

Real builds where the change can be observed in the module (its ki_value());
for the inputs a test cannot make the compiler really use here (a gcc plugin,
a -B tree, a precompiled header, an nvcc.profile), the key itself is shown
to change (`build --only-if-cached` reports it without building).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from counting_compiler import REAL_CXX, counting_cxx_env  # noqa: E402

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")


class Proj:
    def __init__(self, tmp, env):
        self.dir, self.env, self.root = tmp / "proj", env, tmp / "root"
        self.dir.mkdir()

    def manifest(self, **extra):
        m = {"name": "ki", "sources": ["k.cc"], **extra}
        (self.dir / "m.json").write_text(json.dumps(m))

    def build(self, *args, check=0, env=None):
        p = subprocess.run([TOOL, "build", "-m", self.dir / "m.json", "--cache-dir", self.root, "--json", *args],
                           cwd=self.dir, env=env or self.env, capture_output=True, text=True, timeout=300)
        if check is not None:
            assert p.returncode == check, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
        j = json.loads(p.stdout) if p.stdout.strip() else {}
        j["stderr"] = p.stderr
        return j

    def key(self, env=None):
        """The module key, computed without building."""
        return self.build("--only-if-cached", check=None, env=env)["key"]


def value(path):
    """ki_value() of the module, loaded in a process of its own (dlopen
    returns an already loaded library of the same soname)."""
    out = subprocess.run([sys.executable, "-c", "import ctypes, sys; print(ctypes.CDLL(sys.argv[1]).ki_value())",
                          str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.fixture
def proj(tmp_path):
    env, _ = counting_cxx_env(tmp_path)
    p = Proj(tmp_path, env)
    (p.dir / "k.cc").write_text('extern "C" int ki_value() { return VALUE; }\n')
    return p


def rebuilt_value(proj, first_value, change, *args, env=None):
    a = proj.build(*args, env=env)
    assert a["cache"] == "miss" and value(a["path"]) == first_value, a["stderr"]
    assert proj.build(*args, env=env)["cache"] == "hit"  # it was stored: the change below is what must miss
    change()
    b = proj.build(*args, env=env)
    assert b["cache"] != "hit", "a stale hit: " + b["stderr"]
    return value(b["path"])


def test_a_response_file_in_the_compile_flags_is_keyed_by_content(proj):
    rsp = proj.dir / "c.rsp"
    rsp.write_text("-DVALUE=1\n")
    proj.manifest(extra_cflags=[f"@{rsp}"])
    assert rebuilt_value(proj, 1, lambda: rsp.write_text("-DVALUE=2\n")) == 2


def test_a_response_file_nested_in_a_response_file_is_keyed_by_content(proj):
    inner, outer = proj.dir / "inner.rsp", proj.dir / "outer.rsp"
    inner.write_text("-DVALUE=1\n")
    outer.write_text(f"-O1 '@{inner}'\n")
    proj.manifest(extra_cflags=[f"@{outer}"])
    assert rebuilt_value(proj, 1, lambda: inner.write_text("-DVALUE=3\n")) == 3


def test_a_response_file_in_the_link_flags_is_keyed_by_content(proj):
    rsp = proj.dir / "l.rsp"
    rsp.write_text("-Wl,-soname,first.so\n")
    proj.manifest(extra_cflags=["-DVALUE=1"], extra_ldflags=[f"@{rsp}"])
    a = proj.build()
    rsp.write_text("-Wl,-soname,second.so\n")
    b = proj.build()
    assert b["cache"] == "miss", b["stderr"]
    assert b"second.so" in Path(b["path"]).read_bytes() and a["key"] != b["key"]


def test_a_specs_file_is_keyed_by_content(proj):
    specs = proj.dir / "value.specs"
    specs.write_text("*cpp:\n+ -DVALUE=1\n\n")
    proj.manifest(extra_cflags=[f"-specs={specs}"])
    assert rebuilt_value(proj, 1, lambda: specs.write_text("*cpp:\n+ -DVALUE=4\n\n")) == 4


def test_a_plugin_and_a_prefix_directory_are_keyed_by_content(proj):
    plugin = proj.dir / "plugin.so"
    plugin.write_bytes(b"one")
    proj.manifest(extra_cflags=["-DVALUE=1", f"-fplugin={plugin}"])
    k1 = proj.key()
    plugin.write_bytes(b"two")
    assert proj.key() != k1
    bdir = proj.dir / "prefix"
    (bdir / "sub").mkdir(parents=True)
    (bdir / "sub" / "specs").write_text("a")
    proj.manifest(extra_cflags=["-DVALUE=1", "-B", str(bdir)])
    k2 = proj.key()
    (bdir / "sub" / "specs").write_text("b")
    k3 = proj.key()
    (bdir / "as").write_text("#!/bin/sh\n")
    assert len({k2, k3, proj.key()}) == 3


def test_a_specs_file_the_driver_looks_up_itself_is_built_and_not_stored(proj):
    proj.manifest(extra_cflags=["-DVALUE=5", "-specs=nonexistent-lookup.specs"])
    r = proj.build("-v", check=None)
    # gcc fails to find it: what matters is that nothing is keyed on a guess.
    assert "looked up in the compiler's own directories" in r["stderr"], r["stderr"]
    assert not list(proj.root.glob("ki_*")) if proj.root.exists() else True


def test_a_precompiled_header_appearing_beside_an_include_changes_the_key(proj):
    (proj.dir / "pch.h").write_text("#define VALUE 1\n")
    proj.manifest(extra_cflags=["-include", str(proj.dir / "pch.h")])
    assert value(proj.build()["path"]) == 1
    k1 = proj.key()
    other = proj.dir / "other"
    other.mkdir()
    (other / "pch.h").write_text("#define VALUE 6\n")
    subprocess.run([REAL_CXX, "-x", "c++-header", "-fPIC", "-O2", str(other / "pch.h"), "-o",
                    str(proj.dir / "pch.h.gch")], check=True)
    assert proj.key() != k1


@pytest.mark.parametrize("form", ["quote", "angle", "in_header"])
def test_a_header_that_has_include_said_was_absent_appearing_is_a_miss(proj, form):
    inc = proj.dir / "inc"
    inc.mkdir()
    probe = {"quote": '"opt.h"', "angle": "<opt.h>", "in_header": '"opt.h"'}[form]
    body = f"#include <cstdint>\n#if __has_include({probe})\n#include {probe}\n#else\n#define VALUE 1\n#endif\n"
    if form == "in_header":
        (proj.dir / "wrap.h").write_text(body)
        (proj.dir / "k.cc").write_text('#include "wrap.h"\nextern "C" int ki_value() { return VALUE; }\n')
    else:
        (proj.dir / "k.cc").write_text(body + 'extern "C" int ki_value() { return VALUE; }\n')
    proj.manifest(extra_include_paths=["inc"])
    target = (inc if form == "angle" else proj.dir) / "opt.h"
    assert rebuilt_value(proj, 1, lambda: target.write_text("#define VALUE 7\n")) == 7
    # And the header that was found going away again serves the first
    # result again (the key keeps several: docs/cache.md), never the second.
    target.unlink()
    again = proj.build()
    assert value(again["path"]) == 1


CUDA_HOME = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
needs_nvcc = pytest.mark.skipif(not (CUDA_HOME / "bin" / "nvcc").exists(), reason=f"no nvcc at {CUDA_HOME}/bin/nvcc")
PROBE = '#if __has_include("extra.h")\n#include "extra.h"\n#else\n#define VALUE 1\n#endif\n'


@pytest.mark.parametrize("lang", ["cpp", pytest.param("cuda", marks=needs_nvcc)])
def test_inline_sources_probing_a_header_with_has_include_miss_once_it_appears(proj, lang):
    # The unit's source is generated text in the build dir, not a file of the project: it is
    # scanned all the same (a stale hit before).
    (proj.dir / "inc").mkdir()
    proj.env["TVM_FFI_CUDA_ARCH_LIST"] = "9.0"  # no GPU here to detect
    (proj.dir / "m.json").write_text(json.dumps({"name": "ki", "extra_include_paths": ["inc"],
                                                 f"{lang}_sources": PROBE + 'extern "C" int ki_value() { return VALUE; }\n'}))
    assert rebuilt_value(proj, 1, lambda: (proj.dir / "inc" / "extra.h").write_text("#define VALUE 2\n")) == 2
    (proj.dir / "inc" / "extra.h").write_text("#define VALUE 3\n")
    again = proj.build()
    assert again["cache"] == "miss" and "extra.h changed" in again["miss_reason"], again
    assert value(again["path"]) == 3


def symlink_then_dotdot(proj):
    """proj/inc/link -> proj/real/inner: -I<proj>/inc/link/.. searches proj/real, where the kernel
    takes the .. from; proj/inc is where a lexical clean-up of the path points."""
    real = proj.dir / "real"
    (real / "inner").mkdir(parents=True)
    (proj.dir / "inc").mkdir()
    (proj.dir / "inc" / "link").symlink_to(real / "inner")
    return real, f"-I{proj.dir}/inc/link/.."


@pytest.mark.parametrize("via, decoy", [("extra_cflags", True), ("extra_cflags", False), ("--cflag", True),
                                        pytest.param("extra_cuda_cflags", False, marks=needs_nvcc)])
def test_a_header_found_through_a_symlink_then_dotdot_is_recorded_where_the_compiler_read_it(proj, via, decoy):
    real, flag = symlink_then_dotdot(proj)
    (real / "val.h").write_text("#define VALUE 1\n")
    if decoy:
        (proj.dir / "inc" / "val.h").write_text("#define VALUE 99\n")
    source = "k.cu" if via == "extra_cuda_cflags" else "k.cc"
    (proj.dir / source).write_text('#include <val.h>\nextern "C" int ki_value() { return VALUE; }\n')
    proj.env["TVM_FFI_CUDA_ARCH_LIST"] = "9.0"
    args = ["--cflag", flag] if via == "--cflag" else []
    proj.manifest(sources=[source], **({} if via == "--cflag" else {via: [flag]}))
    # Without the decoy, recording the lexical path failed the build (exit 5, "cannot read");
    # with it, editing the header really read was a stale hit.
    assert rebuilt_value(proj, 1, lambda: (real / "val.h").write_text("#define VALUE 2\n"), *args) == 2
    again = proj.build(*args)
    assert again["cache"] == "hit" and value(again["path"]) == 2
    (real / "val.h").write_text("#define VALUE 3\n")
    b = proj.build(*args)
    assert b["cache"] == "miss" and f"{real}/val.h changed" in b["miss_reason"], b


@pytest.mark.parametrize("form", ["include", "has_include"])
def test_a_header_appearing_in_a_symlink_then_dotdot_include_directory_misses(proj, form):
    # The candidates recorded are those of the directory the compiler searched (proj/real),
    # not of its lexical clean-up (proj/inc).
    real, flag = symlink_then_dotdot(proj)
    later = proj.dir / "later"
    later.mkdir()
    if form == "include":
        (later / "extra.h").write_text("#define VALUE 1\n")
        body = "#include <extra.h>\n"
    else:
        body = PROBE.replace('"extra.h"', "<extra.h>")
    (proj.dir / "k.cc").write_text(body + 'extern "C" int ki_value() { return VALUE; }\n')
    proj.manifest(extra_cflags=[flag, f"-I{later}"])
    assert rebuilt_value(proj, 1, lambda: (real / "extra.h").write_text("#define VALUE 2\n")) == 2


def test_a_computed_has_include_operand_is_built_and_not_stored(proj):
    (proj.dir / "k.cc").write_text('#define HAS(h) __has_include(h)\n#if HAS("opt.h")\n#define VALUE 2\n#else\n'
                                   '#define VALUE 1\n#endif\nextern "C" int ki_value() { return VALUE; }\n')
    proj.manifest()
    r = proj.build("-v")
    assert value(r["path"]) == 1 and "not a literal header name" in r["stderr"], r["stderr"]
    (proj.dir / "opt.h").write_text("")
    r = proj.build()
    assert r["cache"] == "miss" and value(r["path"]) == 2


def wrapper(path, define):
    path.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then exec {REAL_CXX} --version; fi\n'
                    f'exec {REAL_CXX} "$@" {define}\n')
    path.chmod(0o755)


def test_a_cxx_wrapper_edited_while_its_version_stays_is_another_compiler(proj, tmp_path):
    cxx = tmp_path / "bin" / "cxx-wrap"
    cxx.parent.mkdir()
    wrapper(cxx, "-DVALUE=1")
    env = dict(proj.env, CXX=str(cxx))
    proj.manifest()
    assert rebuilt_value(proj, 1, lambda: wrapper(cxx, "-DVALUE=22"), env=env) == 22
    # Edited in place with its size and mtime restored: the identity memo's stamp has the ctime.
    st = cxx.stat()
    wrapper(cxx, "-DVALUE=33")
    os.utime(cxx, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cxx.stat().st_size == st.st_size
    b = proj.build(env=env)
    assert b["cache"] != "hit" and value(b["path"]) == 33, b["stderr"]


def test_a_cuda_home_copy_with_nvcc_profile_edited_changes_the_key(proj, tmp_path):
    real = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    if not (real / "bin" / "nvcc").exists():
        pytest.skip("no CUDA toolkit")
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    for entry in real.iterdir():
        if entry.name != "bin":
            (home / entry.name).symlink_to(entry)
    for entry in (real / "bin").iterdir():
        if entry.name in ("nvcc", "nvcc.profile"):
            shutil.copy2(entry, home / "bin" / entry.name)
        else:
            (home / "bin" / entry.name).symlink_to(entry)
    (proj.dir / "k.cu").write_text('extern "C" int ki_value() { return 1; }\n')
    (proj.dir / "m.json").write_text(json.dumps({"name": "ki", "sources": ["k.cu"]}))
    env = dict(proj.env, CUDA_HOME=str(home), TVM_FFI_CUDA_ARCH_LIST="9.0")
    k1 = proj.key(env=env)
    with open(home / "bin" / "nvcc.profile", "a") as f:
        f.write("# an edit\n")
    assert proj.key(env=env) != k1


def nvrtc_ptx(proj, src, *args):
    r = subprocess.run([TOOL, "build", str(src), "--compiler", "nvrtc", "--emit", "ptx", "--arch", "9.0", "--json",
                        "-v", "--cache-dir", str(proj.root), *args], env=proj.env, capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0 and "NVRTC" in r.stderr and "cannot" in r.stderr.lower():
        pytest.skip("no NVRTC here: " + r.stderr)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    j["stderr"] = r.stderr
    return j


def test_nvrtc_has_include_and_computed_includes_are_keyed_or_not_stored(proj):
    (proj.dir / "value.cuh").write_text("#define BASE 40\n")
    src = proj.dir / "probe.cu"
    src.write_text('#include "value.cuh"\n#if __has_include("opt.cuh")\n#include "opt.cuh"\n#else\n#define EXTRA 1\n'
                   '#endif\nextern "C" __global__ void probe(int* x) { x[0] = BASE + EXTRA; }\n')
    first = Path(nvrtc_ptx(proj, src)["path"]).read_text()
    assert nvrtc_ptx(proj, src)["cache"] == "hit"
    (proj.dir / "opt.cuh").write_text("#define EXTRA 2\n")
    second = nvrtc_ptx(proj, src)
    assert second["cache"] != "hit", second["stderr"]
    assert "%r1, 42;" in Path(second["path"]).read_text() and "%r1, 41;" in first
    # A computed #include cannot be followed: built every time, never stored.
    computed = proj.dir / "computed.cu"
    computed.write_text('#define WHICH "value.cuh"\n#include WHICH\n'
                        'extern "C" __global__ void computed(int* x) { x[0] = BASE; }\n')
    r = nvrtc_ptx(proj, computed)
    assert "computed #include" in r["stderr"], r["stderr"]
    assert nvrtc_ptx(proj, computed)["cache"] == "miss"


def test_nvrtc_reads_and_probes_through_a_symlink_then_dotdot_include_option_where_nvrtc_does(proj):
    # NVRTC takes -I<proj>/inc/link/.. from the link's target (proj/real), as the kernel does:
    # the header it read and the one it probed for are recorded there.
    real, flag = symlink_then_dotdot(proj)
    (real / "value.cuh").write_text("#define BASE 40\n")
    (proj.dir / "inc" / "value.cuh").write_text("#define BASE 90\n")  # where a lexical clean-up looks
    src = proj.dir / "probe.cu"
    src.write_text('#include "value.cuh"\n#if __has_include("opt.cuh")\n#include "opt.cuh"\n#else\n#define EXTRA 1\n'
                   '#endif\nextern "C" __global__ void probe(int* x) { x[0] = BASE + EXTRA; }\n')
    assert "%r1, 41;" in Path(nvrtc_ptx(proj, src, "--cuda-cflag", flag)["path"]).read_text()
    assert nvrtc_ptx(proj, src, "--cuda-cflag", flag)["cache"] == "hit"
    (real / "value.cuh").write_text("#define BASE 50\n")
    edited = nvrtc_ptx(proj, src, "--cuda-cflag", flag)
    assert edited["cache"] != "hit" and "%r1, 51;" in Path(edited["path"]).read_text(), edited["stderr"]
    (real / "opt.cuh").write_text("#define EXTRA 2\n")
    probed = nvrtc_ptx(proj, src, "--cuda-cflag", flag)
    assert probed["cache"] != "hit" and "%r1, 52;" in Path(probed["path"]).read_text(), probed["stderr"]
