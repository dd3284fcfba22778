"""What the cache promises (docs/cache.md): it never serves, spreads or
deletes what it should not, and how a build's text is encoded never fails it.

Uses the helpers and the `proj` fixture of test_cache.py (two C++ sources,
a logging CXX wrapper, a private cache root).
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from test_cache import (REAL_CXX, TOOL, build, cache_cmd, compiles, let_compiler_finish, proj, run,  # noqa: F401 (fixture)
                        wait_until_compiled, write_pausing_wrapper)


def object_entries(cache):
    """{source name: object entry dir} of the per-TU cache."""
    out = {}
    for meta in Path(cache, "objects").glob("*/*/entry.json"):
        out[json.loads(meta.read_text())["name"]] = meta.parent
    return out


def flip_middle_byte(path):
    data = bytearray(Path(path).read_bytes())
    data[len(data) // 2] ^= 0x01
    Path(path).write_bytes(bytes(data))


def user_files(root):
    """Files a user keeps in a directory that is not a cache, aged three days."""
    root.mkdir(parents=True, exist_ok=True)
    files = [root / "notes.txt", root / "tmp" / "draft.txt", root / "compilers" / "gcc-notes.txt",
             root / "proj_0123456789abcdef" / "data.bin", root / "objects" / "ab" / ("ab" * 32) / "x.o"]
    old = time.time() - 3 * 86400
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("keep me")
        os.utime(f, (old, old))
        os.utime(f.parent, (old, old))
    return files


# 1. Maintenance deletes only in a marked root, only what the tool created.

def test_clean_and_gc_refuse_a_directory_that_is_not_a_cache(proj):
    home = proj.tmp / "home"
    files = user_files(home / "work")
    env = dict(proj.env, HOME=str(home))
    for args in (["clean"], ["gc", "--max-size", "1B"], ["verify", "--remove"], ["stats", "--zero"]):
        r = run("cache", *args, "--cache-dir", home / "work", env=env, check=5)
        assert "does not carry" in r.stderr and "CACHEDIR.TAG" in r.stderr, r.stderr
    # A build does not take it over either, and writes nothing into it.
    names = sorted(os.listdir(home / "work"))
    r = run("build", proj.src / "b.cc", "--name", "x", "--cache-dir", home / "work", env=env, check=5)
    assert "not a tvmffi-jit cache" in r.stderr
    assert sorted(os.listdir(home / "work")) == names
    # The home directory itself is refused even when it carries the markers.
    build(proj.cache, proj.src / "b.cc", "--name", "x", env=proj.env)
    shutil.copy(proj.cache / "CACHEDIR.TAG", home)
    shutil.copy(proj.cache / "TVMFFI_JIT_CACHE", home)
    for args in (["clean"], ["list"]):
        r = run("cache", *args, "--cache-dir", home, env=env, check=5)
        assert "home directory" in r.stderr
    run("build", proj.src / "b.cc", "--name", "x", "--cache-dir", str(home) + "/", env=env, check=5)
    for f in files:
        assert f.read_text() == "keep me", f


def test_clean_removes_only_what_the_tool_created(proj):
    first = proj.build()
    planted = user_files(proj.cache)
    cleaned = json.loads(cache_cmd(proj.cache, "clean", "--json").stdout)
    assert cleaned["entries_removed"] == 3 and cleaned["temporaries_removed"] == 0  # the module and its objects
    assert not Path(first["entry_dir"]).exists()
    for f in planted:
        assert f.read_text() == "keep me", f
    assert proj.build()["cache"] == "miss"


def test_a_root_from_before_the_markers_is_adopted_by_a_build(proj):
    proj.build()
    (proj.cache / "CACHEDIR.TAG").unlink()
    (proj.cache / "TVMFFI_JIT_CACHE").unlink()
    cache_cmd(proj.cache, "clean", check=5)
    assert proj.build()["cache"] == "hit"  # only cache names in it: marked again
    assert (proj.cache / "TVMFFI_JIT_CACHE").read_text().startswith("tvmffi-jit cache layout 1\n")
    assert json.loads(cache_cmd(proj.cache, "clean", "--json").stdout)["entries_removed"] == 3


# 2. A corrupt cached object is never linked, and verify traces what was.

def test_a_same_size_corrupt_cached_object_is_recompiled_not_linked(proj):
    proj.build()
    obj_dir = object_entries(proj.cache)
    b = next(d for n, d in obj_dir.items() if n.endswith("b.cc"))
    meta = json.loads((b / "entry.json").read_text())
    flip_middle_byte(b / meta["artifacts"][0]["file"])
    before = compiles(proj.log)
    other = proj.build(proj.src / "a.cc", proj.src / "b.cc", "--name", "m2")
    assert other["objects_reused"] == 1 and other["objects_compiled"] == 1
    assert compiles(proj.log) == before + 1 and "b.cc" in proj.log.read_text().splitlines()[-1]
    cache_cmd(proj.cache, "verify", check=0)  # the recompiled object replaced the corrupt one


def test_verify_remove_takes_the_modules_linked_from_a_bad_object_with_it(proj):
    first = proj.build()
    obj_dir = object_entries(proj.cache)
    b = next(d for n, d in obj_dir.items() if n.endswith("b.cc"))
    module_meta = json.loads((Path(first["entry_dir"]) / "entry.json").read_text())
    assert {o["key"] for o in module_meta["objects"]} == {p.name for p in obj_dir.values()}
    flip_middle_byte(b / json.loads((b / "entry.json").read_text())["artifacts"][0]["file"])
    v = json.loads(cache_cmd(proj.cache, "verify", "--remove", "--json", check=3).stdout)
    bad = {e["dir"]: e for e in v["bad"]}
    assert set(bad) == {str(b), first["entry_dir"]}, bad
    assert "linked from the bad object" in bad[first["entry_dir"]]["problem"]
    assert all(e["removed"] for e in bad.values())
    again = proj.build()
    assert again["cache"] == "miss" and again["objects_compiled"] == 1
    cache_cmd(proj.cache, "verify", check=0)


# 3. A hit serves only a listed, intact artifact.

def test_a_hit_rehashes_the_artifact_and_serves_only_what_entry_json_lists(proj):
    first = proj.build()
    art = Path(first["path"])
    good = art.read_bytes()
    flip_middle_byte(art)
    r = proj.build()
    assert r["cache"] == "miss" and "SHA-256" in r["miss_reason"]
    assert art.read_bytes() == good and proj.build()["cache"] == "hit"
    # entry.json that lists another file: the module's own name is not served.
    meta_path = Path(first["entry_dir"]) / "entry.json"
    meta = json.loads(meta_path.read_text())
    shutil.copy(art, art.with_name("other.so"))
    meta["artifacts"][0]["file"] = "other.so"
    meta_path.write_text(json.dumps(meta))
    art.write_bytes(b"\0" * len(good))
    r = proj.build()
    assert r["cache"] == "miss" and "does not list" in r["miss_reason"]
    assert art.read_bytes() == good
    assert proj.build("--verify", proj.src / "a.cc", proj.src / "b.cc", "--name", "m")["cache"] == "hit"


def test_an_oversized_or_fifo_entry_json_is_a_miss_not_a_hang(proj):
    first = proj.build()
    meta = Path(first["entry_dir"]) / "entry.json"
    with open(meta, "r+b") as f:
        f.truncate(3 << 30)  # sparse: costs nothing on disk, 3 GiB to a reader without a cap
    r = proj.build()
    assert r["cache"] == "miss" and "more than the" in r["miss_reason"]
    meta.unlink()
    os.mkfifo(meta)
    r = build(proj.cache, proj.src / "a.cc", proj.src / "b.cc", "--name", "m", env=proj.env)
    assert r["cache"] == "miss" and "not a regular file" in r["miss_reason"]
    assert proj.build()["cache"] == "hit"


# 4. A path printed with exit 0 survives gc.

def test_an_unstored_build_prints_a_path_that_gc_does_not_remove(proj):
    handshake = proj.tmp / "handshake"
    write_pausing_wrapper(proj.cxx, handshake)
    p = subprocess.Popen([TOOL, "build", str(proj.src / "a.cc"), "--name", "race", "--cache-dir", str(proj.cache),
                          "--json"], env=proj.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_compiled(handshake, p)
    (proj.src / "h.h").write_text("#define K 9\n")  # edited after the compiler read it: not cached
    let_compiler_finish(handshake)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    result = json.loads(out)
    assert result["entry_dir"] is None and "not caching" in err
    path = Path(result["path"])
    assert proj.cache not in path.parents and path.is_file()
    cache_cmd(proj.cache, "gc", "--max-size", "1G")
    cache_cmd(proj.cache, "clean")
    assert path.is_file()
    shutil.rmtree(path.parent)


# 5. Text that is not UTF-8 never fails a build.

def test_non_utf8_compiler_output_flags_and_paths_build_store_and_hit(proj):
    noisy = proj.tmp / "noisy-cxx"
    noisy.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then printf 'noisy \\377 1\\n'; exec {REAL_CXX} --version; fi
printf 'note: \\377\\376 latin-1 caf\\351\\n' >&2
exec {REAL_CXX} "$@"
""")
    noisy.chmod(0o755)
    odd = Path(os.fsdecode(bytes(proj.tmp) + b"/src-\xff"))
    odd.mkdir()
    (odd / "h.h").write_text("#define K 1\n")
    (odd / "a.cc").write_text('#include "h.h"\nint a_value() { return K; }\n')
    env = dict(proj.env, CXX=str(noisy))
    argv = [os.fsencode(TOOL), b"build", os.fsencode(odd / "a.cc"), b"--name", b"odd", b"--cflag=-DODD=\xff1",
            b"--cache-dir", os.fsencode(proj.cache), b"--json"]
    first = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    assert first.returncode == 0, first.stderr
    r = json.loads(first.stdout)
    assert r["cache"] == "miss" and r["entry_dir"] is not None
    second = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    assert second.returncode == 0 and json.loads(second.stdout)["cache"] == "hit", second.stderr
    shown = json.loads(cache_cmd(proj.cache, "show", "odd", "--json").stdout)["entries"][0]["entry"]
    assert "latin-1" in shown["compiler_output"]
    cache_cmd(proj.cache, "verify")
    (odd / "h.h").write_text("#define K 2\n")  # the header recorded under its exact bytes is re-checked
    third = subprocess.run(argv, env=env, capture_output=True, timeout=120)
    assert third.returncode == 0 and json.loads(third.stdout)["cache"] == "miss", third.stderr


# Maintenance arguments need a unit.

def test_clean_and_gc_refuse_a_bare_number(proj):
    proj.build()
    r = cache_cmd(proj.cache, "clean", "--older-than", "3", check=2)
    assert "no unit" in r.stderr and "3d" in r.stderr
    r = cache_cmd(proj.cache, "gc", "--max-size", "10", check=2)
    assert "no unit" in r.stderr and "10G" in r.stderr
    assert json.loads(cache_cmd(proj.cache, "gc", "--max-size", "10G", "--json").stdout)["entries_removed"] == 0
    assert json.loads(cache_cmd(proj.cache, "clean", "--older-than", "3d", "--json").stdout)["entries_removed"] == 0
