"""Inputs of a build that the cache key and the recorded headers must cover
(docs/cache.md, "What the cache promises"): headers found through system
include paths, what the linker read, the environment the compilers and the
linker read, and a header that a new file earlier in the include path would
now shadow, locally and on a second checkout through a real Redis remote.

Each test builds, changes exactly one such input, and requires a miss whose
artifact was built from the new input (a hit would serve the old module).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import remote_servers  # noqa: E402

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
REAL_CXX = shutil.which("g++") or shutil.which("c++")
NVCC = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


def build(cache, *args, cwd=None, env=None, check=0):
    p = subprocess.run([TOOL, "build", *map(str, args), "--cache-dir", str(cache), "--json"], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    j = json.loads(p.stdout)
    j["stderr"] = p.stderr
    return j


def symbol_value(so, symbol):
    """The int a module's extern "C" `symbol()` returns (tvm_ffi first: the module needs libtvm_ffi)."""
    out = subprocess.run([sys.executable, "-c", "import ctypes, sys, tvm_ffi; "
                          "print(getattr(ctypes.CDLL(sys.argv[1]), sys.argv[2])())", str(so), symbol],
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


def clean_env(**extra):
    env = dict(os.environ, CXX=REAL_CXX)
    for v in ("CC", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "NVCC_APPEND_FLAGS",
              "NVCC_PREPEND_FLAGS", "TVMFFI_JIT_REMOTE", "TVMFFI_JIT_BASE_DIR", "TVMFFI_JIT_CACHE_DIR"):
        env.pop(v, None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def write_module(d, source, **manifest):
    d.mkdir(parents=True, exist_ok=True)
    (d / "m.cc").write_text(source)
    (d / "other.cc").write_text('extern "C" int other_value() { return 5; }\n')
    (d / "manifest.json").write_text(json.dumps({"name": "keys", "sources": ["m.cc", "other.cc"], **manifest}))
    return d / "manifest.json"


def test_a_changed_isystem_header_misses_and_recompiles_only_its_unit(tmp_path):
    sysdir = tmp_path / "vendor"
    sysdir.mkdir()
    (sysdir / "vendored.h").write_text("#define VENDORED 1\n")
    m = write_module(tmp_path / "proj", '#include <vendored.h>\nextern "C" int value() { return VENDORED; }\n',
                     extra_cflags=["-isystem", str(sysdir)])
    cache, env = tmp_path / "cache", clean_env()
    first = build(cache, "-m", m, env=env)
    assert first["cache"] == "miss" and symbol_value(first["path"], "value") == 1
    assert build(cache, "-m", m, env=env)["cache"] == "hit"
    (sysdir / "vendored.h").write_text("#define VENDORED 2\n")  # same size: only the content tells
    second = build(cache, "-m", m, env=env)
    assert second["cache"] == "miss" and "vendored.h changed" in second["miss_reason"], second
    assert second["objects_compiled"] == 1 and second["objects_reused"] == 1  # the object cache checks it too
    assert symbol_value(second["path"], "value") == 2


def test_a_changed_system_header_found_through_CPLUS_INCLUDE_PATH_misses(tmp_path):
    usr_include = tmp_path / "usr" / "include"  # stands for /usr/include: a system directory to gcc
    usr_include.mkdir(parents=True)
    (usr_include / "sysconf_value.h").write_text("#define SYSCONF 1\n")
    m = write_module(tmp_path / "proj", '#include <sysconf_value.h>\nextern "C" int value() { return SYSCONF; }\n')
    cache, env = tmp_path / "cache", clean_env(CPLUS_INCLUDE_PATH=usr_include)
    assert symbol_value(build(cache, "-m", m, env=env)["path"], "value") == 1
    (usr_include / "sysconf_value.h").write_text("#define SYSCONF 3\n")
    second = build(cache, "-m", m, env=env)
    assert second["cache"] == "miss" and "sysconf_value.h changed" in second["miss_reason"], second
    assert symbol_value(second["path"], "value") == 3


def test_a_CPATH_change_misses(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for d, v in ((one, 1), (two, 2)):
        d.mkdir()
        (d / "pathed.h").write_text(f"#define PATHED {v}\n")
    m = write_module(tmp_path / "proj", '#include "pathed.h"\nextern "C" int value() { return PATHED; }\n')
    cache = tmp_path / "cache"
    first = build(cache, "-m", m, env=clean_env(CPATH=one))
    assert symbol_value(first["path"], "value") == 1
    # one/pathed.h is unchanged, so only the key can tell that two/pathed.h is read now.
    second = build(cache, "-m", m, env=clean_env(CPATH=two))
    assert second["cache"] == "miss" and second["key"] != first["key"]
    assert symbol_value(second["path"], "value") == 2
    assert build(cache, "-m", m, env=clean_env(CPATH=one))["cache"] == "hit"


def make_static_lib(libdir, value):
    libdir.mkdir(exist_ok=True)
    src = libdir / "dep.c"
    src.write_text(f"int dep_value(void) {{ return {value}; }}\n")
    subprocess.run([REAL_CXX, "-x", "c", "-fPIC", "-c", src, "-o", libdir / "dep.o"], check=True)
    (libdir / "libdep.a").unlink(missing_ok=True)
    subprocess.run(["ar", "rcs", libdir / "libdep.a", libdir / "dep.o"], check=True)


def test_a_rebuilt_static_library_misses(tmp_path):
    libdir = tmp_path / "lib"
    make_static_lib(libdir, 10)
    m = write_module(tmp_path / "proj", 'extern "C" int dep_value(void);\n'
                     'extern "C" int value() { return dep_value(); }\n',
                     extra_ldflags=[f"-L{libdir}", "-ldep"])
    cache, env = tmp_path / "cache", clean_env()
    first = build(cache, "-m", m, env=env)
    assert symbol_value(first["path"], "value") == 10
    entry = json.loads((Path(first["entry_dir"]) / "entry.json").read_text())
    assert str(libdir / "libdep.a") in [h.get("path") for h in entry["headers"]]
    assert build(cache, "-m", m, env=env)["cache"] == "hit"
    make_static_lib(libdir, 20)
    second = build(cache, "-m", m, env=env)
    assert second["cache"] == "miss" and "libdep.a changed" in second["miss_reason"], second
    assert second["objects_reused"] == 2  # only the link re-ran
    assert symbol_value(second["path"], "value") == 20


def test_a_library_in_an_earlier_L_directory_misses(tmp_path):
    first_dir, second_dir = tmp_path / "lib1", tmp_path / "lib2"
    first_dir.mkdir()
    make_static_lib(second_dir, 10)
    m = write_module(tmp_path / "proj", 'extern "C" int dep_value(void);\n'
                     'extern "C" int value() { return dep_value(); }\n',
                     extra_ldflags=[f"-L{first_dir}", f"-L{second_dir}", "-ldep"])
    cache, env = tmp_path / "cache", clean_env()
    assert symbol_value(build(cache, "-m", m, env=env)["path"], "value") == 10
    assert build(cache, "-m", m, env=env)["cache"] == "hit"
    make_static_lib(first_dir, 30)  # lib2/libdep.a is unchanged; the linker would now take lib1's
    second = build(cache, "-m", m, env=env)
    assert second["cache"] == "miss" and "lib1/libdep.a now shadows" in second["miss_reason"], second
    assert symbol_value(second["path"], "value") == 30


@pytest.mark.skipif(not os.path.exists(NVCC), reason="needs the CUDA toolkit (nvcc)")
def test_NVCC_APPEND_FLAGS_changes_the_key(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "k.cu").write_text("__global__ void k(int* out) { *out = VAL * 7919; }\n")
    m = proj / "manifest.json"
    m.write_text(json.dumps({"name": "val", "sources": ["k.cu"], "emit": "ptx", "cuda_arch": "8.0"}))
    cache = tmp_path / "cache"
    first = build(cache, "-m", m, env=clean_env(NVCC_APPEND_FLAGS="-DVAL=1"))
    assert "7919" in Path(first["path"]).read_text()
    second = build(cache, "-m", m, env=clean_env(NVCC_APPEND_FLAGS="-DVAL=2"))
    assert second["cache"] == "miss" and second["key"] != first["key"]
    assert "15838" in Path(second["path"]).read_text()  # 2 * 7919: built with the new flag


def shadow_checkout(d):
    (d / "inc1").mkdir(parents=True)
    (d / "inc2").mkdir()
    (d / "inc2" / "dep.h").write_text("#define DEP 2\n")
    return write_module(d, '#include "dep.h"\nextern "C" int value() { return DEP; }\n',
                        extra_include_paths=["inc1", "inc2"])


def test_a_new_header_earlier_in_the_include_path_misses_locally(tmp_path):
    m = shadow_checkout(tmp_path / "proj")
    cache, env = tmp_path / "cache", clean_env()
    first = build(cache, "-m", m, env=env)
    assert symbol_value(first["path"], "value") == 2
    assert build(cache, "-m", m, env=env)["cache"] == "hit"
    (tmp_path / "proj" / "inc1" / "dep.h").write_text("#define DEP 1\n")
    second = build(cache, "-m", m, env=env)
    assert second["cache"] == "miss" and "inc1/dep.h now shadows" in second["miss_reason"], second
    assert symbol_value(second["path"], "value") == 1
    assert build(cache, "-m", m, env=env)["cache"] == "hit"


@pytest.mark.skipif(not (shutil.which("redis-server") or os.path.exists("/usr/bin/redis-server")),
                    reason="redis-server comes from scripts/setup.sh")
def test_a_shadowing_header_in_a_second_checkout_misses_the_remote_entry(tmp_path):
    a = tmp_path / "home" / "alice" / "proj"
    b = tmp_path / "ci" / "runner" / "checkout"
    shadow_checkout(a)
    shutil.copytree(a, b)
    env = clean_env()
    with remote_servers.server("redis", tmp_path / "redis") as srv:
        first = build(tmp_path / "root-a", "-m", a / "manifest.json", "--remote", srv.url, cwd=a, env=env)
        assert first["cache"] == "miss" and symbol_value(first["path"], "value") == 2
        # The same checkout elsewhere is served by the remote entry...
        c = tmp_path / "ci" / "runner" / "plain"
        shutil.copytree(a, c)
        plain = build(tmp_path / "root-c", "-m", c / "manifest.json", "--remote", srv.url, cwd=c, env=env)
        assert plain["cache"] == "remote-hit", plain
        # Adopting re-hashed every record here; it keeps this machine's stats of the files old
        # enough to trust (the C library, ...), so later local hits do not re-hash them again.
        adopted = json.loads((Path(plain["entry_dir"]) / "entry.json").read_text())
        libc = [h for h in adopted["headers"] if "/libc.so" in h.get("path", "")]
        assert libc and all(h.get("stat") for h in libc), libc
        # ...but not one where inc1/dep.h now exists: the compiler would read that one.
        (b / "inc1" / "dep.h").write_text("#define DEP 1\n")
        second = build(tmp_path / "root-b", "-m", b / "manifest.json", "--remote", srv.url, cwd=b, env=env)
        assert second["cache"] == "miss", second
        assert symbol_value(second["path"], "value") == 1


def test_a_linker_that_does_not_say_what_it_read_leaves_the_module_unstored(tmp_path):
    # A CXX whose link drops -Wl,--dependency-file (as a linker without the option would ignore it).
    cxx = tmp_path / "cxx"
    cxx.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then exec {REAL_CXX} --version; fi
for a in "$@"; do shift; case "$a" in -Wl,--dependency-file=*) ;; *) set -- "$@" "$a";; esac; done
exec {REAL_CXX} "$@"
""")
    cxx.chmod(0o755)
    m = write_module(tmp_path / "proj", 'extern "C" int value() { return 4; }\n')
    cache, env = tmp_path / "cache", clean_env(CXX=cxx)
    r = build(cache, "-m", m, env=env)
    assert r["entry_dir"] is None and "the linker wrote no keys.so.d" in r["stderr"], r
    assert symbol_value(r["path"], "value") == 4  # the build itself succeeded
    assert build(cache, "-m", m, env=env)["cache"] == "miss"
    shutil.rmtree(Path(r["path"]).parent)
