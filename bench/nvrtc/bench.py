#!/usr/bin/env python3
"""NVRTC against nvcc, source to cubin, for a small kernel and a many-kernel file.

For each case it times, each run a cache miss (the source gets a new comment
line per run, as after an edit) with the tool's cache otherwise warm (its
tvm-ffi discovery memo is kept between runs, as in a CI job's cache):

  nvcc              nvcc -cubin -arch=sm_XX (the compiler alone, no tool around it)
  jit nvcc          tvmffi-jit build --compiler nvcc --emit cubin (whole process)
  jit nvrtc         tvmffi-jit build --compiler nvrtc --emit cubin (whole process)
  jit nvrtc (root)  the same with TVM_FFI_ROOT set (tvm-ffi is given, not looked for)
  nvrtc in-process  the time spent inside nvrtcCompileProgram, from the -v log

Wall time is the median of --repeat runs after one warm-up; CPU time
(user + sys of the child) is reported too, as it is steadier on a loaded
machine. Both outputs are checked to hold the same number of kernels.

    bench.py --tool build/tvmffi-jit [--arch 9.0] [--repeat 5] [--kernels 200] [--json OUT]
"""

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from gen_kernels import kernel_source  # noqa: E402

SMALL = r"""
extern "C" __global__ void saxpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""

NVRTC_MS = re.compile(r"\(([0-9.]+) ms in NVRTC\)")


def cubin_kernel_count(path):
    d = Path(path).read_bytes()
    shoff, = struct.unpack_from("<Q", d, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", d, 0x3A)
    count = 0
    for i in range(shnum):
        _, typ, _, _, off, size, link, _, _, _ = struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize)
        if typ != 2:  # SHT_SYMTAB
            continue
        for o in range(off, off + size, 24):
            _, info, other, _, _, _ = struct.unpack_from("<IBBHQQ", d, o)
            count += (info & 0xF) == 2 and bool(other & 0x10)
    return count


def timed(argv, env=None):
    """(wall seconds, child CPU seconds, stderr text, stdout text) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(map(str, argv))}\n{r.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r.stderr, r.stdout


def find_nvcc():
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and (Path(home) / "bin" / "nvcc").exists():
            return str(Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


def tvm_ffi_root():
    r = subprocess.run([sys.executable, "-c", "import tvm_ffi, os; print(os.path.dirname(tvm_ffi.__file__))"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def run_case(name, stem, source, args, scratch):
    sm = "sm_" + args.arch.replace(".", "")
    root = tvm_ffi_root()
    variants = {
        "nvcc": lambda src, d: ([find_nvcc(), "-cubin", f"-arch={sm}", "-o", str(d / "out.cubin"), str(src)], {},
                                d / "out.cubin"),
        "jit nvcc": lambda src, d: ([args.tool, "build", str(src), "--compiler", "nvcc", "--emit", "cubin",
                                     "--arch", args.arch], {}, None),
        "jit nvrtc": lambda src, d: ([args.tool, "-v", "build", str(src), "--compiler", "nvrtc", "--emit", "cubin",
                                      "--arch", args.arch], {}, None),
    }
    if root:
        variants["jit nvrtc (root)"] = lambda src, d: (
            [args.tool, "-v", "build", str(src), "--compiler", "nvrtc", "--emit", "cubin", "--arch", args.arch],
            {"TVM_FFI_ROOT": root}, None)
    row = {"case": name, "kernels": None}
    in_process = []
    for label, make in variants.items():
        walls, cpus = [], []
        cache = scratch / ("cache-" + label.replace(" ", "-").replace("(", "").replace(")", ""))
        for i in range(args.repeat + 1):  # the first run warms the page cache and the tool's memo; dropped
            d = Path(tempfile.mkdtemp(dir=scratch))
            src = d / f"{stem}.cu"
            src.write_text(f"// {label} run {i}\n" + source)  # new content: a cache miss every time
            argv, extra_env, artifact = make(src, d)
            env = dict(os.environ, TVMFFI_JIT_CACHE_DIR=str(cache), **extra_env)
            wall, cpu, err, out = timed(argv, env)
            artifact = artifact or Path(out.strip().splitlines()[-1])
            kernels = cubin_kernel_count(artifact)
            if row["kernels"] is None:
                row["kernels"] = kernels
            elif kernels != row["kernels"]:
                sys.exit(f"{name}: {label} produced {kernels} kernels, expected {row['kernels']}")
            if i:
                walls.append(wall)
                cpus.append(cpu)
                m = NVRTC_MS.search(err)
                if m and label == "jit nvrtc":
                    in_process.append(float(m.group(1)) / 1000)
            shutil.rmtree(d, ignore_errors=True)
        row[label] = {"wall": statistics.median(walls), "cpu": statistics.median(cpus), "min": min(walls)}
    if in_process:
        row["nvrtc in-process"] = {"wall": statistics.median(in_process), "min": min(in_process)}
    return row


def fmt(seconds):
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def print_table(rows):
    cols = ["nvcc", "jit nvcc", "jit nvrtc", "jit nvrtc (root)", "nvrtc in-process"]
    present = [c for c in cols if any(c in r for r in rows)]
    print("| case | kernels | " + " | ".join(f"{c} wall (cpu)" if c != "nvrtc in-process" else c for c in present)
          + " | nvcc / jit nvrtc, wall (cpu) | nvcc / nvrtc in-process |")
    print("|---" * (len(present) + 4) + "|")
    for r in rows:
        cells = []
        for c in present:
            v = r.get(c)
            if not v:
                cells.append("-")
            elif "cpu" in v:
                cells.append(f"{fmt(v['wall'])} ({fmt(v['cpu'])})")
            else:
                cells.append(fmt(v["wall"]))
        wall = r["nvcc"]["wall"] / r["jit nvrtc"]["wall"]
        cpu = r["nvcc"]["cpu"] / r["jit nvrtc"]["cpu"]
        ratio_in = r["nvcc"]["wall"] / r["nvrtc in-process"]["wall"] if "nvrtc in-process" in r else float("nan")
        print(f"| {r['case']} | {r['kernels']} | " + " | ".join(cells) +
              f" | {wall:.1f}x ({cpu:.1f}x) | {ratio_in:.1f}x |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tool", required=True, help="the tvmffi-jit binary")
    p.add_argument("--arch", default="9.0")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--kernels", type=int, default=200, help="kernels in the large case")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args()
    args.tool = str(Path(args.tool).resolve())
    with tempfile.TemporaryDirectory(prefix="bench-nvrtc-") as tmp:
        scratch = Path(tmp)
        rows = [run_case("small", "small", SMALL, args, scratch),
                run_case("large", f"kernels{args.kernels}", kernel_source(args.kernels), args, scratch)]
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
