"""The module cache end to end with the real binary and the real C++ compiler.

A logging wrapper set as CXX counts compiler invocations, so "hit" and "ran
once" are observed, not inferred from the tool's own JSON. Every test has its
own cache root (--cache-dir under tmp_path).
"""

import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
REAL_CXX = shutil.which("g++") or shutil.which("c++")


def run(*args, cwd=None, env=None, check=None, timeout=120):
    p = subprocess.run([TOOL, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def build(cache, *args, cwd=None, env=None, check=0):
    p = run("build", *args, "--cache-dir", cache, "--json", cwd=cwd, env=env, check=check)
    return json.loads(p.stdout) if check == 0 else p


def cache_cmd(cache, *args, check=0):
    p = run("cache", *args, "--cache-dir", cache, check=check)
    return p


def write_wrapper(path, version="wrapped g++ 1", sleep=0):
    """A CXX that logs every compile (-c) to $CXX_LOG and runs the real compiler."""
    path.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "{version}"; exec {REAL_CXX} --version; fi
case " $* " in *" -c "*) echo "$$ $*" >> "$CXX_LOG"; sleep {sleep};; esac
exec {REAL_CXX} "$@"
""")
    path.chmod(0o755)
    return path


def write_pausing_wrapper(path, handshake):
    """A CXX whose compiles (-c) run the real compiler, then say so through the
    FIFO handshake/read and wait for a line on the FIFO handshake/go before
    exiting: a test edits an input exactly between "the compiler read it" and
    "the build goes on", with no sleep deciding the order."""
    handshake.mkdir(exist_ok=True)
    for name in ("read", "go"):
        os.mkfifo(handshake / name)
    path.write_text(f"""#!/bin/sh
if [ "$1" = "--version" ]; then exec {REAL_CXX} --version; fi
case " $* " in *" -c "*)
  echo "$$ $*" >> "$CXX_LOG"
  {REAL_CXX} "$@" || exit $?
  echo compiled > "{handshake}/read"
  read go < "{handshake}/go"
  exit 0;;
esac
exec {REAL_CXX} "$@"
""")
    path.chmod(0o755)
    return path


def wait_until_compiled(handshake, proc, timeout=60):
    """Blocks until the pausing wrapper has compiled (or fails if `proc` ends first)."""
    fd = os.open(handshake / "read", os.O_RDONLY | os.O_NONBLOCK)  # never blocks; select waits for the writer
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready and os.read(fd, 64):
                return
            if proc.poll() is not None:
                pytest.fail(f"the build ended (exit {proc.returncode}) before the compiler ran: {proc.stderr.read()}")
        pytest.fail(f"the compiler did not run within {timeout} s")
    finally:
        os.close(fd)


def let_compiler_finish(handshake):
    with open(handshake / "go", "w") as go:
        go.write("go\n")


def compiles(log):
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def proj(tmp_path):
    """Two C++ sources (one includes h.h relatively), a wrapper CXX and its log."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "h.h").write_text("#define K 1\n")
    (src / "a.cc").write_text('#include "h.h"\nint a_value() { return K; }\n')
    (src / "b.cc").write_text("int b_value() { return 2; }\n")
    log = tmp_path / "cxx.log"
    cxx = write_wrapper(tmp_path / "cxx")
    env = dict(os.environ, CXX=str(cxx), CXX_LOG=str(log))
    env.pop("CC", None)

    class P:
        pass

    p = P()
    p.tmp, p.src, p.log, p.cxx, p.env, p.cache = tmp_path, src, log, cxx, env, tmp_path / "cache"
    p.build = lambda *a, check=0, env=None: build(p.cache, *(a or (src / "a.cc", src / "b.cc", "--name", "m")),
                                                  env=env or p.env, check=check)
    return p


def test_miss_then_hit_and_touching_inputs_keeps_the_key(proj):
    first = proj.build()
    assert first["cache"] == "miss" and first["miss_reason"] == "absent"
    assert compiles(proj.log) == 2
    assert Path(first["path"]).is_file() and Path(first["path"]).parent == Path(first["entry_dir"])
    second = proj.build()
    assert second["cache"] == "hit" and second["key"] == first["key"] and second["path"] == first["path"]
    assert second["commands"] == []
    # mtimes alone decide nothing: touching every input is still a hit.
    for f in proj.src.iterdir():
        os.utime(f, (1_000_000_000, 1_000_000_000))
    os.utime(proj.cxx, None)
    third = proj.build()
    assert third["cache"] == "hit" and third["key"] == first["key"]
    assert compiles(proj.log) == 2
    stats = json.loads(cache_cmd(proj.cache, "stats", "--json").stdout)
    assert stats["hits"] == 2 and stats["misses"] == 1 and stats["module_entries"] == 1
    assert stats["object_misses"] == 2 and stats["bytes_stored"] > 0


def test_each_input_changes_the_key(proj):
    base = proj.build()["key"]
    keys = {"base": base}
    inc = proj.tmp / "inc"
    inc.mkdir()
    keys["flag"] = proj.build(proj.src / "a.cc", proj.src / "b.cc", "--name", "m", "--cflag=-DEXTRA=1")["key"]
    keys["name"] = proj.build(proj.src / "a.cc", proj.src / "b.cc", "--name", "m2")["key"]
    keys["include path"] = proj.build(proj.src / "a.cc", proj.src / "b.cc", "--name", "m", "-I", inc)["key"]
    keys["source order"] = proj.build(proj.src / "b.cc", proj.src / "a.cc", "--name", "m")["key"]
    keys["CUDA_HOME"] = proj.build(env=dict(proj.env, CUDA_HOME="/nonexistent/cuda"))["key"]
    other = write_wrapper(proj.tmp / "cxx2")
    keys["CXX path"] = proj.build(env=dict(proj.env, CXX=str(other)))["key"]
    write_wrapper(proj.cxx, version="wrapped g++ 2")  # same path, another --version
    keys["compiler version"] = proj.build()["key"]
    write_wrapper(proj.cxx)  # back to the first identity
    assert proj.build()["key"] == base
    (proj.src / "b.cc").write_text("int b_value() { return 3; }\n")
    keys["source content"] = proj.build()["key"]
    assert len(set(keys.values())) == len(keys), keys


def test_a_changed_header_is_a_miss_and_rebuilds(proj):
    first = proj.build()
    art = Path(first["path"]).read_bytes()
    (proj.src / "h.h").write_text("#define K 7\n")  # same size: only content tells
    second = proj.build()
    assert second["cache"] == "miss" and "h.h changed" in second["miss_reason"]
    assert second["key"] == first["key"]  # same pre-compile key, entry replaced in place
    assert second["objects_compiled"] == 1 and second["objects_reused"] == 1  # only a.cc read h.h
    assert Path(second["path"]).read_bytes() != art
    assert proj.build()["cache"] == "hit"
    assert cache_cmd(proj.cache, "verify").returncode == 0


def test_a_header_edited_during_the_build_is_not_cached_stale(proj):
    handshake = proj.tmp / "handshake"
    write_pausing_wrapper(proj.cxx, handshake)
    p = subprocess.Popen([TOOL, "build", str(proj.src / "a.cc"), "--name", "race", "--cache-dir", str(proj.cache),
                          "--json"], env=proj.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_compiled(handshake, p)  # the compiler has read h.h (K 1); now the user saves a new h.h
    (proj.src / "h.h").write_text("#define K 9\n")
    let_compiler_finish(handshake)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert json.loads(out)["entry_dir"] is None and "changed while" in err
    write_wrapper(proj.cxx)
    again = proj.build(proj.src / "a.cc", "--name", "race")
    assert again["cache"] == "miss" and again["objects_compiled"] == 1  # compiled against K 9, not served stale
    assert proj.build(proj.src / "a.cc", "--name", "race")["cache"] == "hit"


def test_same_manifest_in_two_folders_with_different_relative_headers(tmp_path):
    """h.h is found next to the source, so the folders must never share an entry."""
    import tvm_ffi

    cache = tmp_path / "cache"
    paths = []
    for folder, k in (("one", 1), ("two", 2)):
        d = tmp_path / folder
        d.mkdir()
        (d / "h.h").write_text(f"#define K {k}\n")
        (d / "k.cc").write_text('#include <tvm/ffi/function.h>\n#include "h.h"\n'
                                "int64_t k_value() { return K; }\n"
                                "TVM_FFI_DLL_EXPORT_TYPED_FUNC(k_value, k_value);\n")
        (d / "manifest.json").write_text(json.dumps({"name": "twin", "sources": ["k.cc"]}))
        r = build(cache, "-m", d / "manifest.json", cwd=d)
        assert r["cache"] == "miss"
        paths.append(r)
    assert paths[0]["key"] != paths[1]["key"] and paths[0]["path"] != paths[1]["path"]
    for folder, expected in (("one", 1), ("two", 2)):
        r = build(cache, "-m", tmp_path / folder / "manifest.json", cwd=tmp_path / folder)
        assert r["cache"] == "hit", (r.get("miss_reason"), r["key"], paths[0]["key"], paths[1]["key"])
        assert tvm_ffi.load_module(r["path"]).k_value() == expected


def test_changing_one_of_eight_sources_recompiles_one(proj):
    sources = []
    for i in range(8):
        f = proj.src / f"s{i}.cc"
        f.write_text(f"int s{i}() {{ return {i}; }}\n")
        sources.append(f)
    args = (*sources, "--name", "eight")
    assert proj.build(*args)["objects_compiled"] == 8
    before = compiles(proj.log)
    sources[5].write_text("int s5() { return 55; }\n")
    r = proj.build(*args)
    assert r["cache"] == "miss" and r["objects_compiled"] == 1 and r["objects_reused"] == 7
    assert compiles(proj.log) == before + 1
    assert "s5.cc" in proj.log.read_text().splitlines()[-1]


def test_sixteen_concurrent_identical_builds_compile_once(proj):
    # The one compile stays paused until a waiter has said whom it waits for
    # (after 1 s of waiting), whatever the load: a handshake, not a long sleep.
    handshake = proj.tmp / "handshake"
    write_pausing_wrapper(proj.cxx, handshake)
    (proj.src / "solo.cc").write_text("int solo() { return 1; }\n")
    cmd = [TOOL, "build", str(proj.src / "solo.cc"), "--name", "solo", "--cache-dir", str(proj.cache), "--json"]
    errs = [proj.tmp / f"stderr.{i}" for i in range(16)]
    procs = []
    for e in errs:
        with open(e, "w") as f:
            procs.append(subprocess.Popen(cmd, env=proj.env, stdout=subprocess.PIPE, stderr=f, text=True))
    compiler = next(p for p in procs if p.poll() is None)
    wait_until_compiled(handshake, compiler)
    deadline = time.monotonic() + 60
    while not any("waiting for pid" in e.read_text() for e in errs):  # a condition, polled; not an ordering sleep
        assert time.monotonic() < deadline, "no build said whom it waits for"
        time.sleep(0.05)
    let_compiler_finish(handshake)
    outs = [(p.communicate(timeout=120)[0], e.read_text()) for p, e in zip(procs, errs)]
    assert [p.returncode for p in procs] == [0] * 16, [o[1] for o in outs]
    results = [json.loads(o[0]) for o in outs]
    assert len({r["path"] for r in results}) == 1
    assert compiles(proj.log) == 1
    assert sorted(r["cache"] for r in results).count("miss") == 1
    waits = [line for o in outs for line in o[1].splitlines() if "waiting for pid" in line]
    assert waits  # the waiters said whom they waited for, and what it does (not "building building")
    assert all(", which is building solo (lock " in line for line in waits), waits
    assert cache_cmd(proj.cache, "verify").returncode == 0


def test_kill_9_at_any_point_leaves_no_broken_entry(proj):
    write_wrapper(proj.cxx, sleep=0.3)
    cmd = [TOOL, "build", str(proj.src / "a.cc"), str(proj.src / "b.cc"), "--name", "m",
           "--cache-dir", str(proj.cache), "-j", "1"]
    for delay in (0.0, 0.02, 0.1, 0.35, 0.5, 0.7, 0.9):
        p = subprocess.Popen(cmd, env=proj.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        # Every visible module entry has entry.json and its artifact.
        for entry in proj.cache.glob("m_*/*"):  # each result of each key
            meta = json.loads((entry / "entry.json").read_text())
            for a in meta["artifacts"]:
                assert (entry / a["file"]).stat().st_size == a["size"]
        if proj.cache.exists():
            assert cache_cmd(proj.cache, "verify").returncode == 0
    # Compilers orphaned by the kills (own process groups) may still run: wait
    # until every one the wrapper logged has exited before replacing it.
    def running(pid):
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (FileNotFoundError, ProcessLookupError):
            return False

    deadline = time.monotonic() + 60
    for pid in (int(line.split()[0]) for line in proj.log.read_text().splitlines()):
        while running(pid):  # a condition, polled
            assert time.monotonic() < deadline, f"compiler {pid} still runs"
            time.sleep(0.02)
    # (each build of the loop that staged removed the dirs the kills before it left)
    stages = [p.name for p in (proj.cache / "tmp").iterdir() if p.name.startswith("stage.")]
    write_wrapper(proj.cxx)
    assert proj.build()["cache"] in ("hit", "miss")
    assert proj.build()["cache"] == "hit"
    assert cache_cmd(proj.cache, "verify").returncode == 0
    # The abandoned staging dirs belong to dead processes: the next build that
    # stages (a miss) removes them, gc the rest.
    (proj.src / "c.cc").write_text("int c() { return 3; }\n")
    subprocess.run([TOOL, "build", str(proj.src / "c.cc"), "--cache-dir", str(proj.cache)], env=proj.env, check=True,
                   capture_output=True)
    assert not any(p.name in stages for p in (proj.cache / "tmp").iterdir()), stages
    gc = json.loads(cache_cmd(proj.cache, "gc", "--max-size", "1G", "--json").stdout)
    assert not any(p.name.startswith("stage.") for p in (proj.cache / "tmp").iterdir()), gc


def test_truncated_artifact_is_rebuilt_and_flipped_one_found_by_verify(proj):
    first = proj.build()
    art = Path(first["path"])
    data = art.read_bytes()
    art.write_bytes(data[: len(data) // 2])
    r = proj.build()
    assert r["cache"] == "miss" and "bytes" in r["miss_reason"]
    assert art.read_bytes() == data  # rebuilt in place, same deterministic bytes
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0xFF
    art.write_bytes(bytes(flipped))
    v = cache_cmd(proj.cache, "verify", "--json", check=3)
    bad = json.loads(v.stdout)["bad"]
    assert len(bad) == 1 and "SHA-256" in bad[0]["problem"]
    cache_cmd(proj.cache, "verify", "--remove", check=3)
    assert proj.build()["cache"] == "miss"
    cache_cmd(proj.cache, "verify", check=0)


def test_unwritable_cache_roots_warn_and_still_build(proj):
    # 1. A root that cannot exist (its parent is a regular file): fails for root too.
    blocker = proj.tmp / "blocker"
    blocker.write_text("not a directory")
    r = run("build", proj.src / "a.cc", "--name", "ro", "--cache-dir", blocker / "cache", "--json",
            env=proj.env, check=0)
    out = json.loads(r.stdout)
    assert out["cache"] == "miss" and out["entry_dir"] is None
    assert Path(out["path"]).is_file() and "without caching" in r.stderr

    # 2. An existing root that refuses writes: immutable for root, 0500 otherwise.
    root = proj.tmp / "ro-cache"
    build(root, proj.src / "b.cc", "--name", "ro", env=proj.env)
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(root)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not supported here, and root ignores permission bits")
        undo = ["chattr", "-i", str(root)]
    else:
        root.chmod(0o500)
        undo = ["chmod", "700", str(root)]
    try:
        probe = root / "probe"
        with pytest.raises(OSError):
            probe.write_text("x")
        hit = build(root, proj.src / "b.cc", "--name", "ro", env=proj.env)
        assert hit["cache"] == "hit"  # a read-only cache still serves hits
        r = run("build", proj.src / "a.cc", "--name", "ro2", "--cache-dir", root, "--json", env=proj.env, check=0)
        miss = json.loads(r.stdout)
        assert miss["cache"] == "miss" and Path(miss["path"]).is_file()
        assert "warning" in r.stderr and "without caching" in r.stderr
    finally:
        subprocess.run(undo, check=True)


def test_unsafe_root_is_refused_with_exit_5(proj):
    shared = proj.tmp / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    r = run("build", proj.src / "b.cc", "--name", "x", "--cache-dir", shared, env=proj.env, check=5)
    assert "group or others" in r.stderr
    cache_cmd(shared, "list", check=5)


def test_force_rebuilds_and_build_dir_bypasses(proj):
    proj.build()
    n = compiles(proj.log)
    forced = proj.build(proj.src / "a.cc", proj.src / "b.cc", "--name", "m", "--force")
    assert forced["cache"] == "miss" and forced["miss_reason"] == "--force"
    assert compiles(proj.log) == n + 2
    r = run("build", proj.src / "b.cc", "--name", "m", "--build-dir", proj.tmp / "bd", "--json",
            env=proj.env, check=0)
    off = json.loads(r.stdout)
    assert off["cache"] == "off" and "key" not in off
    assert Path(off["path"]).parent == (proj.tmp / "bd").resolve()


def test_cache_subcommands(proj):
    first = proj.build()
    assert cache_cmd(proj.cache, "path").stdout.strip() == str(proj.cache)
    listing = json.loads(cache_cmd(proj.cache, "list", "--json").stdout)["entries"]
    assert [e["name"] for e in listing] == ["m"] and listing[0]["key"] == first["key"]
    for query in ("m", first["key"][:8], Path(first["entry_dir"]).name):
        shown = json.loads(cache_cmd(proj.cache, "show", query, "--json").stdout)["entries"]
        assert any(e.get("key") == first["key"] for e in shown), query
    entry = json.loads(cache_cmd(proj.cache, "show", "m", "--json").stdout)["entries"][0]["entry"]
    assert any(h["path"].endswith("/src/h.h") for h in entry["headers"])
    assert entry["artifacts"][0]["size"] == Path(first["path"]).stat().st_size
    cache_cmd(proj.cache, "show", "nosuch", check=2)
    kept = json.loads(cache_cmd(proj.cache, "clean", "--older-than", "1d", "--json").stdout)
    assert kept["entries_removed"] == 0
    gc = json.loads(cache_cmd(proj.cache, "gc", "--max-size", "1B", "--json").stdout)
    assert gc["entries_removed"] == 3  # the module and its two objects
    assert json.loads(cache_cmd(proj.cache, "list", "--json").stdout)["entries"] == []
    assert proj.build()["cache"] == "miss"
    cleaned = json.loads(cache_cmd(proj.cache, "clean", "--json").stdout)
    assert cleaned["entries_removed"] == 3
    cache_cmd(proj.cache, "gc", "--max-size", "lots", check=2)


def test_clean_removes_the_compiler_identity_memos_only_when_removing_everything(proj):
    proj.build()
    memos = lambda: sorted(p.name for p in (proj.cache / "compilers").glob("*.json"))  # noqa: E731
    assert memos(), "a build memoises its compilers' identities"
    stray = proj.cache / "compilers" / "notes.json"  # not a memo's name: never removed
    stray.write_text("{}")
    cache_cmd(proj.cache, "clean", "--older-than", "1d")
    assert len(memos()) > 1
    cache_cmd(proj.cache, "clean")
    assert memos() == ["notes.json"]


# --- compiler output: -q, replay on a hit, -vv key trace, failed compiles ----------------

WARNING = "#warning tvmffi-jit-replayed-warning\n"


def test_warnings_show_under_quiet_and_are_replayed_on_object_and_module_hits(proj):
    (proj.src / "b.cc").write_text(WARNING + "int b_value() { return 2; }\n")
    first = run("-q", "build", proj.src / "a.cc", proj.src / "b.cc", "--name", "m", "--cache-dir", proj.cache,
                env=proj.env, check=0)
    assert "warning: #warning tvmffi-jit-replayed-warning" in first.stderr, "-q hides progress, not warnings"
    assert "[1/" not in first.stderr
    # A module hit runs no compiler and shows what the compilers showed.
    hit = run("build", proj.src / "a.cc", proj.src / "b.cc", "--name", "m", "--cache-dir", proj.cache, "--json",
              env=proj.env, check=0)
    assert json.loads(hit.stdout)["cache"] == "hit" and compiles(proj.log) == 2
    assert hit.stderr.count("warning: #warning tvmffi-jit-replayed-warning") == 1, hit.stderr
    # Another module from the same units reuses their objects: b.cc's warning is replayed from its object entry.
    other = run("build", proj.src / "a.cc", proj.src / "b.cc", "--name", "other", "--cache-dir", proj.cache, "--json",
                env=proj.env, check=0)
    assert json.loads(other.stdout)["objects_reused"] == 2 and compiles(proj.log) == 2
    assert "warning: #warning tvmffi-jit-replayed-warning" in other.stderr, other.stderr
    assert "(cached)" in other.stderr


def test_stored_compiler_output_is_capped(proj):
    # 3000 distinct warnings: well over the 64 KiB an entry keeps.
    (proj.src / "b.cc").write_text("".join(f"#warning flood-{i:04d}-{'x' * 40}\n" for i in range(3000)) +
                                   "int b_value() { return 2; }\n")
    first = proj.build()
    entry = json.loads((Path(first["entry_dir"]) / "entry.json").read_text())
    assert len(entry["compiler_output"]) < 70_000
    assert "more bytes of compiler output were not kept in the cache" in entry["compiler_output"]
    assert "flood-0000" in entry["compiler_output"]


def test_vv_prints_the_key_trace_and_the_lookups(proj):
    p = run("-vv", "build", proj.src / "a.cc", proj.src / "b.cc", "--name", "m", "--cache-dir", proj.cache, "--json",
            env=proj.env, check=0)
    key = json.loads(p.stdout)["key"]
    assert f"module key of m: {key}, hashed from:" in p.stderr, p.stderr
    assert "\nemit [6] module\n" in p.stderr and "\nname [1] m\n" in p.stderr
    assert "object key of" in p.stderr and "module m: miss (absent)" in p.stderr
    again = run("-vv", "build", proj.src / "a.cc", proj.src / "b.cc", "--name", "m", "--cache-dir", proj.cache,
                env=proj.env, check=0)
    assert "module m: hit in" in again.stderr


@pytest.mark.parametrize("mode", ["cached", "no-cache"])
def test_a_failed_compile_prints_a_command_that_can_be_rerun(proj, mode):
    (proj.src / "b.cc").write_text("int b_value() { return ; }\n")
    env = dict(proj.env, TMPDIR=str(proj.tmp))
    extra = ["--no-cache"] if mode == "no-cache" else []
    p = run("build", proj.src / "a.cc", proj.src / "b.cc", "--name", "m", "--cache-dir", proj.cache, *extra,
            env=env, check=1)
    cd_line = next(line for line in p.stderr.splitlines() if line.startswith("  cd ") and "b.cc" in line)
    directory = cd_line[len("  cd "):].split(" && ", 1)[0]
    assert Path(directory).is_dir(), p.stderr
    assert f"the build directory {directory} is kept" in p.stderr
    rerun = subprocess.run(cd_line, shell=True, capture_output=True, text=True, env=env)
    assert rerun.returncode != 0 and "b.cc:1:" in rerun.stderr, rerun.stderr
    if mode == "cached":
        # Its staging dir belongs to a process that is gone: maintenance removes it.
        cache_cmd(proj.cache, "clean")
        assert not Path(directory).exists()
