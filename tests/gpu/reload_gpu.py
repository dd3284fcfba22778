#!/usr/bin/env python3
"""GPU check of edit and reload in one process (docs/python.md "Edit and reload",
docs/gpu-validation.md): a kernel's header edited 1 -> 2 -> 3 -> 2, the module
rebuilt and loaded again in the same process each time, and the kernel launched
on the GPU must add the new value. Two kinds of CUDA module:

  embed    a manifest whose launcher embeds a cubin built from kernels.cu
           (TVM_FFI_EMBED_CUBIN), built by the CLI and loaded with
           tvm_ffi.load_module(path): the new cubin's kernels must run;
  inline   tvmffi_jit.load_inline(cuda_sources=...) with a __global__ kernel
           launched from host code in the module.

A fifth load of content already loaded must map no new library
(/proc/self/maps). Prints one PASS/FAIL line per check; exit 1 if any failed.

    TVMFFI_JIT_BIN=... python3 tests/gpu/reload_gpu.py [--arch 9.0]

Needs torch (CUDA), apache-tvm-ffi, nvcc and a host compiler; the tvmffi_jit
package is taken from this checkout's python/.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

KERNELS = r"""
#include "value.h"
extern "C" __global__ void add_value(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + VALUE;
}
"""

LAUNCHER = r"""
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/cuda/cubin_launcher.h>
#include <tvm/ffi/function.h>

TVM_FFI_EMBED_CUBIN(reload_kernels);

void AddValue(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  static auto kernel = TVM_FFI_EMBED_CUBIN_GET_KERNEL(reload_kernels, "add_value");
  const void* x_ptr = x.data_ptr();
  void* y_ptr = y.data_ptr();
  long long n = x.size(0);
  void* args[] = {&x_ptr, &y_ptr, &n};
  auto stream = static_cast<tvm::ffi::cuda_api::StreamHandle>(
      TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(
      kernel.Launch(args, tvm::ffi::dim3(static_cast<unsigned>((n + 255) / 256)), tvm::ffi::dim3(256), stream));
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(add_value, AddValue);
"""

INLINE = r"""
#include "value.h"
__global__ void add_value_kernel(const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + VALUE;
}
void add_value(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  long long n = x.size(0);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  add_value_kernel<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<const float*>(x.data_ptr()),
                                                         static_cast<float*>(y.data_ptr()), n);
}
"""

results = []


def report(name, ok, why=""):
    results.append(ok)
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}", flush=True)


def mapped(fragment):
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if fragment in line and line.rstrip().endswith(".so")})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="9.0")
    args = ap.parse_args()
    tool = os.environ.get("TVMFFI_JIT_BIN", str(ROOT / "build" / "tvmffi-jit"))
    os.environ["TVMFFI_JIT_BIN"] = tool
    os.environ["TVM_FFI_CUDA_ARCH_LIST"] = args.arch
    work = Path(tempfile.mkdtemp(prefix="tvmffi-jit-reload-gpu."))
    os.environ.setdefault("TVMFFI_JIT_CACHE_DIR", str(work / "cache"))
    import torch  # noqa: PLC0415
    import tvm_ffi  # noqa: PLC0415
    import tvmffi_jit  # noqa: PLC0415

    inc = work / "inc"
    inc.mkdir()
    (work / "kernels.cu").write_text(KERNELS)
    (work / "launcher.cu").write_text(LAUNCHER)
    manifest = work / "manifest.json"
    manifest.write_text(json.dumps({"name": "reload_embed", "sources": ["launcher.cu"],
                                    "embed_cubin": {"reload_kernels": "kernels.cu"},
                                    "extra_include_paths": ["inc"], "cuda_arch": args.arch}))
    x = torch.arange(1000, dtype=torch.float32, device="cuda")

    def run(kind):
        if kind == "embed":
            out = subprocess.run([tool, "build", "-q", "-m", str(manifest)], capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(out.stderr)
            path = out.stdout.strip()
            return tvm_ffi.load_module(path), path
        m = tvmffi_jit.load_inline("reload_inline", cuda_sources=INLINE, functions=["add_value"],
                                   extra_include_paths=[str(inc)])
        return m, None

    for kind in ("embed", "inline"):
        got, paths, modules = [], [], []
        try:
            for v in (1, 2, 3, 2):
                (inc / "value.h").write_text(f"#define VALUE {v}\n")
                m, path = run(kind)
                modules.append(m)
                paths.append(path)
                y = torch.empty_like(x)
                m.add_value(x, y)
                torch.cuda.synchronize()
                got.append(int(round((y - x).mean().item())))
            report(f"{kind}: header 1,2,3,2 reloaded in one process runs {got}", got == [1, 2, 3, 2],
                   "expected [1, 2, 3, 2]")
            fragment = "reload_embed" if kind == "embed" else "reload_inline"
            before = mapped(fragment)
            m, path = run(kind)
            y = torch.empty_like(x)
            m.add_value(x, y)
            torch.cuda.synchronize()
            after = mapped(fragment)
            report(f"{kind}: a fifth load of loaded content maps nothing new ({len(after)} libraries mapped)",
                   after == before and len(after) == 3 and int(round((y - x).mean().item())) == 2,
                   f"before {before}, after {after}")
            if kind == "embed":
                report("embed: each content has its own path, the same content the same path",
                       len(set(paths[:3])) == 3 and paths[3] == paths[1], str(paths))
        except Exception as e:  # noqa: BLE001 - every failure is reported as a FAIL line
            report(f"{kind}: reload", False, repr(e))
    print(f"# {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) and results else 1


if __name__ == "__main__":
    sys.exit(main())
