#!/usr/bin/env python3
"""Compares `tvmffi-jit inspect --json` with `cuobjdump -res-usage` on whole files.

For every file: the multiset of (arch, kernel, REG, STACK, SHARED) over all ELF
entries must be equal. Prints one line per file (PASS/FAIL, kernel counts, both
tools' wall times) and the first differences; exit 1 if any file differs.

Usage: compare_cuobjdump.py TVMFFI_JIT FILE...   (cuobjdump on PATH; the GPU machine has it)
"""
import collections
import json
import re
import subprocess
import sys
import time

ARCH = re.compile(r"^arch = (\S+)$", re.M)
FUNC = re.compile(r"^ Function ([^:\n]+):\n  REG:(\d+) STACK:(\d+) SHARED:(\d+)", re.M)


def theirs(path):
    t = time.perf_counter()
    out = subprocess.run(["cuobjdump", "-res-usage", path], capture_output=True, text=True).stdout
    dt = time.perf_counter() - t
    found = collections.Counter()
    # Each "Fatbin elf code" header names the arch of the resource block after
    # it; a bare cubin has one block and no header (its arch: `arch`).
    blocks = [b for b in out.split("Fatbin ")[1:] if b.startswith("elf code")] if "Fatbin " in out else [out]
    for block in blocks:
        m = ARCH.search(block)
        arch = m.group(1) if m else None
        for f in FUNC.finditer(block):
            found[(arch, f.group(1), int(f.group(2)), int(f.group(3)), int(f.group(4)))] += 1
    return found, dt


def ours(tool, path):
    t = time.perf_counter()
    p = subprocess.run([tool, "inspect", "--json", path], capture_output=True, text=True)
    dt = time.perf_counter() - t
    doc = json.loads(p.stdout)["files"][0]
    found = collections.Counter()
    for e in doc["entries"]:
        if e["kind"] != "elf":
            continue
        for k in e["kernels"]:
            found[(e["arch"] if doc["format"] != "cubin" else None, k["name"], k["registers"], k["stack_bytes"], k["shared_bytes"])] += 1
    return found, dt, p.returncode, doc.get("error")


def main():
    tool, files = sys.argv[1], sys.argv[2:]
    failed = False
    for path in files:
        a, ta = theirs(path)
        b, tb, rc, err = ours(tool, path)
        same = a == b
        failed |= not same
        print(f"{'PASS' if same else 'FAIL'}  {path}: cuobjdump {sum(a.values())} kernels in {ta:.2f} s, "
              f"inspect {sum(b.values())} in {tb:.2f} s (exit {rc}{', error: ' + err if err else ''})")
        if not same:
            for k in list((a - b).keys())[:5]:
                print("   only cuobjdump:", k)
            for k in list((b - a).keys())[:5]:
                print("   only inspect:  ", k)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
