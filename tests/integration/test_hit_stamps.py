"""What a cache hit proves and what it re-reads (docs/cache.md, "What a hit
proves"): artifacts and recorded inputs are proven by their stamps (dev, ino,
size, mtime, ctime) at every size; a stamp that changed costs one re-hash,
remembered in entry.json (and per process); content that changed is a miss
at every size. Plus the engine library under fork and threads.

The counts come from `build --json`'s "rehashed" ({"files", "bytes"}), never
from times. A stamp is trusted only once mtime and ctime are 2 s old, so the
tests wait 2.5 s where the behaviour depends on it (that is the rule under
test, not a race).
"""

import fcntl
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
TOOL = Path(os.environ.get("TVMFFI_JIT_BIN") or shutil.which("tvmffi-jit") or "tvmffi-jit").resolve()
ENGINE = TOOL.parent / "libtvmffi_jit_engine.so"
SETTLE = 2.5  # > the 2 s a stamp must age before it is trusted

EXPORT = """
#include <tvm/ffi/function.h>
{includes}
int64_t add(int64_t a, int64_t b) {{ return a + b + {extra}; }}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add, add);
"""


def build(tmp_path, source, *extra):
    env = {**os.environ, "TVMFFI_JIT_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.run([str(TOOL), "build", str(source), "--json", "-q", *extra], env=env, capture_output=True,
                       text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def cache_stats(tmp_path):
    env = {**os.environ, "TVMFFI_JIT_CACHE_DIR": str(tmp_path / "cache")}
    p = subprocess.run([str(TOOL), "cache", "stats", "--json"], env=env, capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def touch_metadata(*paths):
    """A metadata-only change (chmod to the same mode): ctime moves, content and mtime do not."""
    for p in paths:
        os.chmod(p, Path(p).stat().st_mode & 0o7777)


def module_with_headers(tmp_path, count):
    """A module including `count` headers of its own, in a temporary include folder."""
    inc = tmp_path / "inc"
    inc.mkdir()
    headers = []
    for i in range(count):
        h = inc / f"h{i}.h"
        h.write_text(f"inline int64_t h{i}() {{ return {i}; }}\n")
        headers.append(h)
    src = tmp_path / "m.cc"
    src.write_text(EXPORT.format(includes="\n".join(f'#include "h{i}.h"' for i in range(count)),
                                 extra=" + ".join(f"h{i}()" for i in range(count))))
    return src, inc, headers


def test_chmod_of_the_modules_headers_is_rehashed_once_then_proven_by_stamps(tmp_path):
    src, inc, headers = module_with_headers(tmp_path, 3)
    first = build(tmp_path, src, "-I", str(inc))
    assert first["cache"] == "miss"
    # Whatever stamps the build could record (a slow compile lets the headers
    # settle first), none matches after this.
    touch_metadata(*headers, first["path"])
    time.sleep(SETTLE)
    # The first hit re-hashes each file once and records the stamps; the next reads nothing.
    hit = build(tmp_path, src, "-I", str(inc))
    assert hit["cache"] == "hit"
    assert hit["rehashed"]["files"] == len(headers) + 1
    assert build(tmp_path, src, "-I", str(inc))["rehashed"] == {"files": 0, "bytes": 0}
    # A metadata-only change (same mode: only ctime moves) of the module's own headers.
    for h in headers:
        os.chmod(h, h.stat().st_mode & 0o7777)
    time.sleep(SETTLE)
    after = build(tmp_path, src, "-I", str(inc))
    assert after["cache"] == "hit"
    assert after["rehashed"] == {"files": len(headers), "bytes": sum(h.stat().st_size for h in headers)}
    assert build(tmp_path, src, "-I", str(inc))["rehashed"] == {"files": 0, "bytes": 0}
    stats = cache_stats(tmp_path)
    assert stats["rehashed_files"] == 2 * len(headers) + 1


def test_same_size_flip_of_an_8_mib_module_is_a_miss(tmp_path):
    """Above 4 MiB a hit used to check the artifact's size only."""
    src = tmp_path / "big.cc"
    src.write_text(EXPORT.format(includes='extern "C" const unsigned char big_pad[8 << 20] = {1, 2, 3};',
                                 extra="big_pad[0]"))
    built = build(tmp_path, src)
    artifact = Path(built["path"])
    assert artifact.stat().st_size > 8 << 20
    touch_metadata(artifact)
    time.sleep(SETTLE)
    stamping = build(tmp_path, src)  # stamped by its first settled hit
    proven = build(tmp_path, src)
    assert stamping["cache"] == proven["cache"] == "hit"
    # One byte flipped in place: same size, same inode, mtime set back.
    st = artifact.stat()
    with open(artifact, "r+b") as f:
        f.seek(st.st_size // 2)
        b = f.read(1)
        f.seek(st.st_size // 2)
        f.write(bytes([b[0] ^ 0xFF]))
    os.utime(artifact, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert artifact.stat().st_size == st.st_size and artifact.stat().st_mtime_ns == st.st_mtime_ns
    again = build(tmp_path, src)
    assert again["cache"] == "miss"
    assert "SHA-256" in again["miss_reason"]
    # What it cost: one re-hash to stamp it, then none while the stamp held.
    assert stamping["rehashed"]["files"] == 1
    assert proven["rehashed"]["files"] == 0  # 8 MiB proven by a stat
    assert again["rehashed"]["files"] >= 1


def test_missing_or_malformed_stamps_cost_one_rehash_then_a_stamp(tmp_path):
    src, inc, headers = module_with_headers(tmp_path, 2)
    first = build(tmp_path, src, "-I", str(inc))
    touch_metadata(*headers, first["path"])
    time.sleep(SETTLE)
    assert build(tmp_path, src, "-I", str(inc))["rehashed"]["files"] == 3
    entry_json = Path(first["entry_dir"]) / "entry.json"
    entry = json.loads(entry_json.read_text())
    entry["artifacts"][0]["stat"] = 42  # malformed
    own = [h for h in entry["headers"] if h["path"].startswith(str(inc))]
    assert len(own) == 2
    own[0].pop("stat")  # missing
    own[1]["stat"] = "1:2:3:4"  # a stamp of some other file
    entry_json.write_text(json.dumps(entry))
    hit = build(tmp_path, src, "-I", str(inc))
    assert hit["cache"] == "hit"  # never an error, never a hit without a check
    assert hit["rehashed"]["files"] == 3
    assert build(tmp_path, src, "-I", str(inc))["rehashed"]["files"] == 0


def test_entry_bin_follows_entry_json_and_never_decides_a_hit_alone(tmp_path):
    """entry.bin (docs/cache.md) is derived from a settled entry.json and used only while entry.json
    keeps that stamp: damaged, it is rewritten; entry.json edited, entry.json's record decides."""
    src, inc, headers = module_with_headers(tmp_path, 2)
    first = build(tmp_path, src, "-I", str(inc))
    entry_dir = Path(first["entry_dir"])
    entry_bin = entry_dir / "entry.bin"
    for _ in range(3):  # the first settled hit re-stamps (a new entry.json); a later one derives entry.bin
        time.sleep(SETTLE)
        assert build(tmp_path, src, "-I", str(inc))["cache"] == "hit"
        if entry_bin.is_file():
            break
    assert entry_bin.is_file()
    time.sleep(SETTLE)  # whatever entry.json the last hit left has settled: entry.bin is derived from it
    hit = build(tmp_path, src, "-I", str(inc))
    assert (hit["cache"], hit["rehashed"]["files"]) == ("hit", 0)
    good = entry_bin.read_bytes()
    assert build(tmp_path, src, "-I", str(inc))["cache"] == "hit"
    assert entry_bin.read_bytes() == good  # read, not rewritten

    # Damaged: not used, and written again from entry.json.
    for damaged in (good[: len(good) // 2], b"\xff" * len(good), good[:-1] + bytes([good[-1] ^ 1])):
        entry_bin.write_bytes(damaged)
        hit = build(tmp_path, src, "-I", str(inc))
        assert (hit["cache"], hit["path"]) == ("hit", first["path"])
        assert entry_bin.read_bytes() == good

    # entry.json edited (its stamp moves): its record decides, whatever entry.bin says.
    entry_json = entry_dir / "entry.json"
    entry = json.loads(entry_json.read_text())
    entry["artifacts"][0]["sha256"] = "0" * 64
    entry["artifacts"][0].pop("stat", None)
    entry_json.write_text(json.dumps(entry))
    assert entry_bin.read_bytes() == good
    rebuilt = build(tmp_path, src, "-I", str(inc))
    assert rebuilt["cache"] != "hit"


@pytest.mark.skipif(not ENGINE.is_file(), reason=f"no engine library at {ENGINE}")
def test_a_process_remembers_what_it_rehashed_when_entry_json_cannot_be_rewritten(tmp_path):
    """With the entry's lock held elsewhere (as with a read-only root, where it
    cannot be written at all) the stamps stay out of entry.json: each new
    process re-hashes, and a process re-hashes each changed file only once."""
    src, inc, headers = module_with_headers(tmp_path, 2)
    first = build(tmp_path, src, "-I", str(inc))
    locks = tmp_path / "cache" / "locks"
    locks.mkdir(exist_ok=True)
    lock = open(locks / (Path(first["entry_dir"]).name + ".lock"), "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    touch_metadata(*headers, first["path"])
    time.sleep(SETTLE)
    code = textwrap.dedent(f"""
        import json
        from tvmffi_jit import _engine
        argv = ["build", {str(src)!r}, "-I", {str(inc)!r}, "--json", "-q", "--only-if-cached"]
        for _ in range(3):
            r = _engine.run(argv)
            print(json.dumps(json.loads(r["stdout"])["rehashed"]))
    """)
    env = {**os.environ, "PYTHONPATH": str(SOURCE_DIR / "python"), "TVMFFI_JIT_BIN": str(TOOL),
           "TVMFFI_JIT_CACHE_DIR": str(tmp_path / "cache")}
    for _ in range(2):  # two processes: neither could record the stamps for the other
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                             cwd=tmp_path).stdout.splitlines()
        counts = [json.loads(line)["files"] for line in out]
        assert counts == [3, 0, 0], out
    lock.close()
    assert build(tmp_path, src, "-I", str(inc))["rehashed"]["files"] == 3  # lock free: recorded now
    assert build(tmp_path, src, "-I", str(inc))["rehashed"]["files"] == 0


FORK_SCRIPT = """
import os, sys, threading, time
import tvmffi_jit
src = "int64_t add(int64_t a, int64_t b) { return a + b; }"
first = tvmffi_jit.build_inline("forked", cpp_sources=src, functions=["add"])
stop = threading.Event()
def keep_hitting():
    while not stop.is_set():
        assert tvmffi_jit.build_inline("forked", cpp_sources=src, functions=["add"]) == first
hitter = threading.Thread(target=keep_hitting)
hitter.start()
hung = failed = 0
for i in range(20):
    pid = os.fork()
    if pid == 0:
        try:
            ok = tvmffi_jit.build_inline("forked", cpp_sources=src, functions=["add"]) == first
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    deadline = time.monotonic() + 30  # generous: a healthy child answers in milliseconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            failed += os.waitstatus_to_exitcode(status) != 0
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            hung += 1
            break
        time.sleep(0.01)
    if hung:
        break  # one is enough to fail
stop.set()
hitter.join()
print(hung, failed)
"""


@pytest.mark.skipif(not ENGINE.is_file(), reason=f"no engine library at {ENGINE}")
def test_children_forked_while_a_thread_hits_in_process_answer_their_own_hits(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(SOURCE_DIR / "python"), "TVMFFI_JIT_BIN": str(TOOL),
           "TVMFFI_JIT_CACHE_DIR": str(tmp_path / "cache"), "PYTHONWARNINGS": "ignore::DeprecationWarning"}
    p = subprocess.run([sys.executable, "-c", FORK_SCRIPT], env=env, capture_output=True, text=True, cwd=tmp_path,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0", "0"], f"hung, failed children: {p.stdout}\n{p.stderr}"
