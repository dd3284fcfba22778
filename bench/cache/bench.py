#!/usr/bin/env python3
"""Cache benchmarks for docs/benchmarks.md, section "cache".

1. Hit latency: median wall time of >= 50 whole `tvmffi-jit build` processes for
   a 2-source manifest already in the cache (target <= 5 ms), next to the floor
   of spawning /bin/true the same way.
2. Cold build: a miss (--force: every unit compiled, entry published; warm root)
   and a first build into an empty root, against running the very compiler
   commands the tool ran (taken from its --json) directly in a fresh directory,
   sequentially (-j 1 for both). Target: miss overhead <= 3 %.
3. 1 of 8 sources changed: rebuild time against the full cold build and against
   running that one compile plus the link directly.
4. What re-hashing the module artifact on a hit costs (docs/cache.md, "What the
   cache promises"): hits of the README example (when nvcc is on PATH) and of
   modules padded to 64 KiB .. 64 MiB, default (proven by its stamp, re-hashed once after a change) against
   --verify (always re-hashed); anchor: the 2-source hit of row 1.
5. What the complete key costs a hit of the README CUDA example (when nvcc is
   on PATH): its entry as built (headers incl. system ones, the files the
   linker read, shadow candidates) against a copy of the entry with the link
   inputs and shadows taken out, both with the stat shortcut (a local hit)
   and without it (the first hit of an entry adopted from a remote).

Usage: bench.py TOOL [--runs N] [--cold-runs N] [--work DIR]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TVM_SOURCE = """#include <tvm/ffi/function.h>
#include "common.h"
int64_t {name}(int64_t x) {{ return x + OFFSET + {value}; }}
TVM_FFI_DLL_EXPORT_TYPED_FUNC({name}, {name});
"""


def timed(argv, cwd=None, env=None):
    """(wall seconds, CPU seconds of the process and its children) of one run."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    dt = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(map(str, argv))}")
    return dt, ru.ru_utime + ru.ru_stime


def wall(argv, cwd=None, env=None):
    return timed(argv, cwd, env)[0]


def tool_json(tool, args, env=None):
    p = subprocess.run([tool, "build", *map(str, args), "--json"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(p.stderr)
    return json.loads(p.stdout)


def run_direct(commands, build_dir, keep_dir=None):
    """Runs recorded argvs sequentially in a fresh directory (or `keep_dir`), as the tool does."""
    d = keep_dir or Path(tempfile.mkdtemp(dir=build_dir))
    t = time.perf_counter()
    for c in commands:
        if c["argv"]:
            subprocess.run(c["argv"], cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t
    if keep_dir is None:
        shutil.rmtree(d)
    return dt


def write_project(folder, n):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "common.h").write_text("#define OFFSET 1\n")
    sources = []
    for i in range(n):
        f = folder / f"f{i}.cc"
        f.write_text(TVM_SOURCE.format(name=f"f{i}", value=i))
        sources.append(f)
    return sources


def ms(x):
    return f"{x * 1000:.1f} ms"


PADDED_SOURCE = """#include <tvm/ffi/function.h>
// {size} bytes of read-only data: a module of about that size that compiles in no time.
asm(".pushsection .rodata.pad,\\"a\\",@progbits\\n.fill {size},1,0x5a\\n.popsection");
int64_t pad(int64_t x) {{ return x; }}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(pad, pad);
"""


def median_hit(argv, env, runs):
    for _ in range(3):
        wall(argv, env=env)  # warm the page cache
    return statistics.median(wall(argv, env=env) for _ in range(runs))


def rehash_rows(tool, work, root, env, runs, anchor):
    """Rows of section 4: (label, artifact bytes, default hit, --verify hit)."""
    rows = []
    example = Path(__file__).resolve().parents[2] / "share/tvmffi-jit/examples/cuda_add_one/manifest.json"
    if shutil.which("nvcc"):
        r = tool_json(tool, ["-m", example, "--cache-dir", root], env)
        argv = [tool, "build", "-m", example, "--cache-dir", root]
        rows.append(("README example (cuda_add_one)", Path(r["path"]).stat().st_size,
                     median_hit(argv, env, runs), median_hit(argv + ["--verify"], env, runs)))
    for size in (64 << 10, 1 << 20, 4000 << 10, 16 << 20, 64 << 20):
        src = work / "pad" / f"pad{size}.cc"
        src.parent.mkdir(exist_ok=True)
        src.write_text(PADDED_SOURCE.format(size=size))
        r = tool_json(tool, [src, "--name", f"pad{size}", "--cache-dir", root], env)
        argv = [tool, "build", src, "--name", f"pad{size}", "--cache-dir", root]
        rows.append((f"module padded to {size >> 10} KiB", Path(r["path"]).stat().st_size,
                     median_hit(argv, env, runs), median_hit(argv + ["--verify"], env, runs)))
    out = []
    for label, size, plain, verified in rows:
        rehashed = "re-hashed" if size <= 4 << 20 else "size only"  # cache::kVerifyOnHitMaxBytes
        out.append(f"| hit, {label}, {size / 1e6:.2f} MB, default ({rehashed}) | {ms(plain)} | {ms(anchor)} (row 1) | "
                   f"{plain / anchor:.2f}x |")
        out.append(f"| hit, {label}, --verify (re-hashed) | {ms(verified)} | {ms(plain)} (default) | "
                   f"+{ms(verified - plain)} |")
    return out


def is_link_input(path):
    """A recorded file the linker read rather than a header (by its name)."""
    name = Path(path).name
    return name.endswith((".so", ".a", ".o")) or ".so." in name


def record_rows(tool, root, env, runs):
    """Rows of section 5: the README CUDA example's hit with and without its newer records."""
    if not shutil.which("nvcc"):
        return []
    example = Path(__file__).resolve().parents[2] / "share/tvmffi-jit/examples/cuda_add_one/manifest.json"
    r = tool_json(tool, ["-m", example, "--cache-dir", root], env)
    entry_file = Path(r["entry_dir"]) / "entry.json"
    full = json.loads(entry_file.read_text())
    headers = full["headers"]
    links = [h for h in headers if is_link_input(h.get("path", ""))]
    shadows = sum(len(h.get("shadows", [])) for h in headers)
    argv = [tool, "build", "-m", example, "--cache-dir", root]
    time.sleep(2.1)  # the stat shortcut trusts files at least 2 s old: let the entry's own records age

    def texts(stats):
        out = []
        for entry in (full, without):
            e = json.loads(json.dumps(entry))
            if not stats:
                for h in e["headers"]:
                    h.pop("stat", None)
            out.append(json.dumps(e, indent=2) + "\n")
        return out

    def hit_with(text):
        entry_file.write_text(text)
        t = wall(argv, env=env)
        # A lookup that missed would have rebuilt and replaced the entry.
        assert entry_file.read_text() == text, "the edited entry no longer hits"
        return t

    without = dict(full, headers=[{k: v for k, v in h.items() if k != "shadows"} for h in headers
                                  if not is_link_input(h.get("path", ""))])
    rows = []
    for label, stats in (("stat shortcut (local hit)", True), ("no stats (the one re-hash when an entry is adopted)", False)):
        with_text, without_text = texts(stats)
        for _ in range(3):
            hit_with(with_text), hit_with(without_text)  # warm the page cache
        pairs = [(hit_with(with_text), hit_with(without_text)) for _ in range(runs)]  # interleaved: same load
        with_t, without_t = (statistics.median(p[i] for p in pairs) for i in (0, 1))
        rows.append(f"| README CUDA hit, {label} | {ms(with_t)} | {ms(without_t)} (without link inputs and "
                    f"shadows) | +{ms(with_t - without_t)} |")
    entry_file.write_text(json.dumps(full, indent=2) + "\n")
    assert tool_json(tool, ["-m", example, "--cache-dir", root], env)["cache"] == "hit"
    link_bytes = sum(h["size"] for h in links)
    rows.append(f"| README CUDA entry: {len(headers) - len(links)} headers, {len(links)} link inputs "
                f"({link_bytes / 1e6:.1f} MB), {shadows} shadow candidates | | | |")
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--cold-runs", type=int, default=5)
    ap.add_argument("--work", default=tempfile.mkdtemp(prefix="tvmffi-jit-bench-cache-"))
    ap.add_argument("--records-only", action="store_true", help="section 5 only")
    a = ap.parse_args()
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    env = dict(os.environ)
    env.pop("TVMFFI_JIT_CACHE_DIR", None)
    root = work / "cache"
    if a.records_only:
        print("| measurement | tvmffi-jit | anchor | added |")
        print("|---|---|---|---|")
        for row in record_rows(a.tool, root, env, a.runs):
            print(row)
        return

    # 1. Hit latency (2-source manifest).
    two = write_project(work / "two", 2)
    manifest = work / "two" / "manifest.json"
    manifest.write_text(json.dumps({"name": "two", "sources": [s.name for s in two]}))
    hit_args = [a.tool, "build", "-m", manifest, "--cache-dir", root]
    first = tool_json(a.tool, hit_args[2:], env)
    assert first["cache"] == "miss", first
    again = tool_json(a.tool, hit_args[2:], env)
    assert again["cache"] == "hit", again
    for _ in range(5):
        wall(hit_args, env=env)  # warm the page cache
    hits = [timed(hit_args, env=env) for _ in range(a.runs)]
    floor = [timed(["/bin/true"], env=env) for _ in range(a.runs)]
    base = [timed([a.tool, "cache", "path", "--cache-dir", root], env=env) for _ in range(a.runs)]
    hit_median, floor_median = statistics.median(h[0] for h in hits), statistics.median(f[0] for f in floor)
    hit_cpu = statistics.median(h[1] for h in hits)
    base_median, base_cpu = statistics.median(b[0] for b in base), statistics.median(b[1] for b in base)

    # 2. Cold build vs the same compiler commands run directly (-j 1 both).
    cold_args = ["-m", manifest, "--cache-dir", root, "-j", "1", "--force"]
    commands = tool_json(a.tool, cold_args, env)["commands"]
    miss_t, direct_t, empty_t = [], [], []
    for i in range(a.cold_runs):  # interleaved, so drifting machine load hits both alike
        miss_t.append(wall([a.tool, "build", *cold_args], env=env))
        direct_t.append(run_direct(commands, work))
        empty = work / f"empty{i}"
        empty_t.append(wall([a.tool, "build", "-m", manifest, "--cache-dir", empty, "-j", "1"], env=env))
    miss_m, direct_m, empty_m = map(statistics.median, (miss_t, direct_t, empty_t))

    # 3. One of eight sources changed.
    eight = write_project(work / "eight", 8)
    e_args = [*eight, "--name", "eight", "--cache-dir", root, "-j", "1"]
    full = tool_json(a.tool, e_args, env)
    direct_dir = work / "eight-direct"
    direct_dir.mkdir()
    run_direct(full["commands"], work, keep_dir=direct_dir)  # all 8 objects, as the tool's reuse has them
    full_t = statistics.median(wall([a.tool, "build", *e_args, "--force"], env=env) for _ in range(3))
    one_t, one_direct_t = [], []
    for i in range(a.cold_runs):
        eight[3].write_text(TVM_SOURCE.format(name="f3", value=100 + i))
        t = time.perf_counter()
        r = tool_json(a.tool, e_args, env)
        one_t.append(time.perf_counter() - t)
        assert r["objects_compiled"] == 1 and r["objects_reused"] == 7, r
        one_direct_t.append(run_direct(r["commands"], work, keep_dir=direct_dir))
    one_m, one_direct_m = statistics.median(one_t), statistics.median(one_direct_t)

    # 4. Re-hashing the artifact on a hit.
    rehash = rehash_rows(a.tool, work, root, env, max(20, a.runs // 2), hit_median)

    print("| measurement | tvmffi-jit | anchor | ratio |")
    print("|---|---|---|---|")
    print(f"| hit, 2-source manifest (median of {a.runs} processes) | {ms(hit_median)} | "
          f"{ms(floor_median)} (spawn /bin/true) | {hit_median / floor_median:.1f}x |")
    print(f"| hit, CPU time (user+sys, median) | {ms(hit_cpu)} | {ms(base_cpu)} (`cache path`: start-up only) | "
          f"+{ms(hit_cpu - base_cpu)} |")
    print(f"| `tvmffi-jit cache path` wall (process start-up floor) | {ms(base_median)} | | |")
    print(f"| miss (--force, warm root), 2 sources, -j1 (median of {a.cold_runs}) | {ms(miss_m)} | "
          f"{ms(direct_m)} (same {len([c for c in commands if c['argv']])} commands run directly) | "
          f"{(miss_m / direct_m - 1) * 100:+.1f} % |")
    print(f"| first build into an empty root (includes tvm-ffi discovery) | {ms(empty_m)} | {ms(direct_m)} | "
          f"{(empty_m / direct_m - 1) * 100:+.1f} % |")
    print(f"| 1 of 8 sources changed, -j1 (median of {a.cold_runs}) | {ms(one_m)} | {ms(full_t)} (all 8, --force) | "
          f"{one_m / full_t:.2f}x |")
    print(f"| 1 of 8: the same compile + link run directly (7 objects in place) | {ms(one_m)} | "
          f"{ms(one_direct_m)} | {(one_m / one_direct_m - 1) * 100:+.1f} % |")
    for row in rehash:
        print(row)
    for row in record_rows(a.tool, root, env, max(20, a.runs // 2)):
        print(row)


if __name__ == "__main__":
    main()
