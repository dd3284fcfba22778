#!/usr/bin/env python3
"""Is nvcc's split compilation safe for speed? Compiles each CUDA unit to a
cubin twice, unsplit and with --split-compile=N, and compares, kernel by
kernel, the sections the GPU runs: the code (.text.K), its resource and
launch attributes (.nv.info.K), its constant banks (.nv.constant*.K), its
shared-memory layout (.nv.shared.K). Identical sections mean identical
machine code, so identical speed; a kernel whose code differs is listed
(then time it on the GPU). docs/build.md, "Split compilation".

    python3 bench/split_sass/compare.py --ninja FILE.ninja [--split 16] [--arch sm_90a] [-j 2] SOURCE...

--ninja: a FlashInfer-style ninja file whose `cuda_cflags` (with `$var`
expansion) are the flags of every SOURCE; the -gencode flags are replaced
by -arch, and -Xfatbin flags dropped (a cubin has no fatbin).
Prints one line per unit and exits 1 if any kernel's code differs.
"""

import argparse
import re
import struct
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def ninja_cuda_flags(path):
    text = Path(path).read_text().replace("$\n", "")
    variables = {}
    for line in text.splitlines():
        m = re.match(r"^(\w+)\s*=\s*(.*)$", line)
        if m:
            variables[m.group(1)] = m.group(2)
    flags = variables.get("cuda_cflags", "")
    for _ in range(8):
        flags = re.sub(r"\$(\w+)", lambda m: variables.get(m.group(1), ""), flags)
    return [f for f in flags.split() if not f.startswith(("-gencode", "-Xfatbin", "--generate-code"))]


def elf_sections(path):
    """name -> bytes of every section of a 64-bit little-endian ELF (NOBITS: b'')."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx]
    names = data[strtab[4] : strtab[4] + strtab[5]]
    out = {}
    for name_off, sh_type, _flags, _addr, off, size, *_ in headers:
        name = names[name_off : names.index(b"\0", name_off)].decode()
        out[name] = b"" if sh_type == 8 else data[off : off + size]
    return out


GPU_SECTIONS = (".text.", ".nv.info.", ".nv.constant", ".nv.shared.")


def compare(unsplit, split):
    a, b = elf_sections(unsplit), elf_sections(split)
    kernels = sorted(n[len(".text.") :] for n in a if n.startswith(".text."))
    differing = sorted(
        n for n in set(a) | set(b) if n.startswith(GPU_SECTIONS) and a.get(n) != b.get(n)
    )
    return kernels, differing


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ninja", required=True)
    ap.add_argument("--split", type=int, default=16)
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("sources", nargs="+")
    args = ap.parse_args()
    flags = ninja_cuda_flags(args.ninja)
    work = Path(tempfile.mkdtemp(prefix="tvmffi-jit-split-sass-"))

    def build(job):
        src, split = job
        out = work / f"{Path(src).stem}.{'split' if split else 'unsplit'}.cubin"
        argv = [args.nvcc, "-cubin", f"-arch={args.arch}", *flags, src, "-o", str(out)]
        if split:
            argv.insert(1, f"--split-compile={args.split}")
        t = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"{' '.join(argv)}\nexited {p.returncode}:\n{p.stderr}")
        return out, time.perf_counter() - t

    jobs = [(s, split) for s in args.sources for split in (False, True)]
    with ThreadPoolExecutor(args.j) as pool:
        built = list(pool.map(build, jobs))
    failed = False
    print(f"| unit | kernels | GPU sections differing | unsplit s | split {args.split} s |")
    print("|---|---:|---:|---:|---:|")
    for i, src in enumerate(args.sources):
        (unsplit, t0), (split, t1) = built[2 * i], built[2 * i + 1]
        kernels, differing = compare(unsplit, split)
        failed |= bool(differing) or not kernels
        print(f"| {Path(src).name} | {len(kernels)} | {len(differing)} | {t0:.1f} | {t1:.1f} |")
        for name in differing[:20]:
            print(f"  differs: {name}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
