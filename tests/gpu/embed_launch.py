#!/usr/bin/env python3
"""GPU check for NVRTC outputs and embedded cubins (run on a machine with a GPU).

Takes the artifacts `tests/gpu/nvrtc_embed.sh prepare DIR` built (from
share/tvmffi-jit/examples/embed_cubin) and checks, on the GPU:

  module   DIR/embed_example.so: a TVM FFI module whose cubin is embedded as
           __tvm_ffi__cubin_example_kernels; its add_one / scale functions launch
           the kernels through TVM_FFI_EMBED_CUBIN_GET_KERNEL on torch tensors
           (through tvm_ffi), and the results are compared with torch's.
  library  DIR/kernels.<backend>.<kind>: every cubin / PTX / fatbin present is
           loaded with cuLibraryLoadFromFile, both kernels (extern "C" add_one and
           the template instance scale<float>) are looked up and launched with
           cuLaunchKernel on driver-allocated memory, and the results checked.

Prints one "PASS <check>" or "FAIL <check>: <why>" line per check and exits 1
if any check failed or could not run (a missing prerequisite is a failure:
nothing was validated). Needs numpy and the driver (libcuda.so.1, called
through ctypes) for the library checks, and torch + apache-tvm-ffi for the
module check.

    python3 tests/gpu/embed_launch.py --artifacts DIR [--only module|library] [--libcuda PATH]
"""

import argparse
import ctypes
import glob
import os
import sys
import traceback
from pathlib import Path

SCALE_KERNEL = "_Z5scaleIfEvPT_S0_x"  # scale<float>(float*, float, long long)
N = 100_003  # not a multiple of the block size: the bounds check matters

results = []


def report(name, ok, why=""):
    results.append(ok)
    print(f"PASS {name}" if ok else f"FAIL {name}: {why}", flush=True)


# ---------------------------------------------------------------- driver API

# The driver is called through ctypes rather than cuda-python: the C API is
# what tvmffi-jit's validator and tvm-ffi's launcher use, and this way the
# check has no Python dependency beyond numpy.
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class Driver:
    def __init__(self, library="libcuda.so.1"):
        self.cuda = ctypes.CDLL(library)
        c = ctypes
        self._declare("cuGetErrorName", [c.c_int, c.POINTER(c.c_char_p)])
        self._declare("cuInit", [c.c_uint])
        self._declare("cuDeviceGet", [c.POINTER(c.c_int), c.c_int])
        self._declare("cuDeviceGetAttribute", [c.POINTER(c.c_int), c.c_int, c.c_int])
        self._declare("cuDevicePrimaryCtxRetain", [c.POINTER(c.c_void_p), c.c_int])
        self._declare("cuCtxSetCurrent", [c.c_void_p])
        self._declare("cuCtxSynchronize", [])
        self._declare("cuLibraryLoadFromFile", [c.POINTER(c.c_void_p), c.c_char_p, c.c_void_p, c.c_void_p, c.c_uint,
                                                 c.c_void_p, c.c_void_p, c.c_uint])
        self._declare("cuLibraryUnload", [c.c_void_p])
        self._declare("cuLibraryGetKernel", [c.POINTER(c.c_void_p), c.c_void_p, c.c_char_p])
        self._declare("cuKernelGetFunction", [c.POINTER(c.c_void_p), c.c_void_p])
        self._declare("cuLaunchKernel", [c.c_void_p, c.c_uint, c.c_uint, c.c_uint, c.c_uint, c.c_uint, c.c_uint,
                                         c.c_uint, c.c_void_p, c.POINTER(c.c_void_p), c.POINTER(c.c_void_p)])
        # cuda.h maps these names to their _v2 entry points.
        self._declare("cuMemAlloc_v2", [c.POINTER(c.c_uint64), c.c_size_t])
        self._declare("cuMemFree_v2", [c.c_uint64])
        self._declare("cuMemcpyHtoD_v2", [c.c_uint64, c.c_void_p, c.c_size_t])
        self._declare("cuMemcpyDtoH_v2", [c.c_void_p, c.c_uint64, c.c_size_t])

        self.call("cuInit", 0)
        device = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(device), 0)
        self.device = device.value
        context = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), self.device)
        self.call("cuCtxSetCurrent", context)
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.call("cuDeviceGetAttribute", ctypes.byref(major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.device)
        self.call("cuDeviceGetAttribute", ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.device)
        self.capability = (major.value, minor.value)

    def _declare(self, name, argtypes):
        fn = getattr(self.cuda, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int

    def call(self, name, *args):
        rc = getattr(self.cuda, name)(*args)
        if rc != 0:
            text = ctypes.c_char_p()
            self.cuda.cuGetErrorName(rc, ctypes.byref(text))
            raise RuntimeError(f"{name} failed: {text.value.decode() if text.value else 'CUresult'} ({rc})")

    def load_library(self, path):
        library = ctypes.c_void_p()
        self.call("cuLibraryLoadFromFile", ctypes.byref(library), str(path).encode(), None, None, 0, None, None, 0)
        return library

    def unload(self, library):
        self.call("cuLibraryUnload", library)

    def function(self, library, kernel_name):
        kernel, function = ctypes.c_void_p(), ctypes.c_void_p()
        self.call("cuLibraryGetKernel", ctypes.byref(kernel), library, kernel_name.encode())
        self.call("cuKernelGetFunction", ctypes.byref(function), kernel)
        return function

    def launch(self, function, blocks, threads, *args):
        # kernelParams: an array of pointers, each to one argument's value.
        values = [ctype(value) for value, ctype in args]
        params = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in values])
        self.call("cuLaunchKernel", function, blocks, 1, 1, threads, 1, 1, 0, None, params, None)
        try:
            self.call("cuCtxSynchronize")
        except RuntimeError as e:
            raise RuntimeError(f"the kernel failed: {e}") from None

    def upload(self, array):
        ptr = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(ptr), array.nbytes)
        self.call("cuMemcpyHtoD_v2", ptr.value, array.ctypes.data, array.nbytes)
        return ptr.value

    def download(self, ptr, like):
        import numpy as np

        out = np.empty_like(like)
        self.call("cuMemcpyDtoH_v2", out.ctypes.data, ptr, out.nbytes)
        return out

    def free(self, ptr):
        self.call("cuMemFree_v2", ptr)


def check_library(drv, path):
    import numpy as np

    lib = drv.load_library(path)
    try:
        x = np.arange(N, dtype=np.float32)
        dx = drv.upload(x)
        dy = drv.upload(np.zeros_like(x))
        blocks = (N + 255) // 256
        drv.launch(drv.function(lib, "add_one"), blocks, 256,
                   (dx, ctypes.c_uint64), (dy, ctypes.c_uint64), (N, ctypes.c_longlong))
        y = drv.download(dy, x)
        if not np.array_equal(y, x + 1):
            bad = int(np.argmax(y != x + 1))
            raise AssertionError(f"add_one: y[{bad}] = {y[bad]}, expected {x[bad] + 1}")
        drv.launch(drv.function(lib, SCALE_KERNEL), blocks, 256,
                   (dx, ctypes.c_uint64), (2.5, ctypes.c_float), (N, ctypes.c_longlong))
        scaled = drv.download(dx, x)
        if not np.array_equal(scaled, x * np.float32(2.5)):
            raise AssertionError("scale<float>: wrong result")
        drv.free(dx)
        drv.free(dy)
    finally:
        drv.unload(lib)


def run_library_checks(artifacts, libcuda):
    files = sorted(p for p in Path(artifacts).glob("kernels.*") if p.suffix in (".cubin", ".ptx", ".fatbin"))
    if not files:
        report("library artifacts", False, f"no kernels.*.cubin/.ptx/.fatbin in {artifacts} (run nvrtc_embed.sh prepare)")
        return
    try:
        drv = Driver(libcuda)
    except Exception as e:  # no driver, no GPU
        report(f"driver ({libcuda})", False, f"{type(e).__name__}: {e}")
        return
    print(f"# device 0: compute capability {drv.capability[0]}.{drv.capability[1]}", flush=True)
    for path in files:
        try:
            check_library(drv, path)
            report(f"load+launch {path.name}", True)
        except Exception as e:
            report(f"load+launch {path.name}", False, f"{type(e).__name__}: {e}")


# ---------------------------------------------------------------- TVM FFI module


def preload_cudart():
    """The module needs libcudart; make sure the loader can resolve it."""
    candidates = []
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates += glob.glob(os.path.join(home, "lib64", "libcudart.so.*"))
    for entry in sys.path:
        candidates += glob.glob(os.path.join(entry, "nvidia", "*", "lib", "libcudart.so.*"))
        candidates += glob.glob(os.path.join(entry, "nvidia", "cuda_runtime", "lib", "libcudart.so.*"))
    for c in sorted(candidates, reverse=True):
        try:
            ctypes.CDLL(c, mode=ctypes.RTLD_GLOBAL)
            return c
        except OSError:
            continue
    return None


def run_module_check(artifacts):
    so = Path(artifacts) / "embed_example.so"
    if not so.exists():
        report("module artifact", False, f"{so} is missing (run nvrtc_embed.sh prepare)")
        return
    try:
        import torch
        import tvm_ffi
    except ImportError as e:
        report("module prerequisites (torch, tvm_ffi)", False, str(e))
        return
    if not torch.cuda.is_available():
        report("module: torch sees a GPU", False, "torch.cuda.is_available() is False")
        return
    torch.cuda.init()
    try:
        module = tvm_ffi.load_module(str(so))
    except Exception:
        loaded = preload_cudart()
        try:
            module = tvm_ffi.load_module(str(so))
        except Exception as e:
            report("module: tvm_ffi.load_module", False, f"{e} (libcudart preloaded from: {loaded})")
            return
    report("module: tvm_ffi.load_module", True)
    try:
        x = torch.arange(N, dtype=torch.float32, device="cuda")
        y = torch.empty_like(x)
        module.add_one(x, y)
        torch.cuda.synchronize()
        if not torch.equal(y, x + 1):
            bad = int(torch.nonzero(y != x + 1)[0])
            raise AssertionError(f"y[{bad}] = {float(y[bad])}, expected {float(x[bad]) + 1}")
        report("module: add_one through TVM_FFI_EMBED_CUBIN_GET_KERNEL", True)
    except Exception as e:
        report("module: add_one through TVM_FFI_EMBED_CUBIN_GET_KERNEL", False, f"{type(e).__name__}: {e}")
    try:
        z = torch.arange(N, dtype=torch.float32, device="cuda")
        module.scale(z, 0.5)
        torch.cuda.synchronize()
        expected = torch.arange(N, dtype=torch.float32, device="cuda") * 0.5
        if not torch.equal(z, expected):
            raise AssertionError("wrong result")
        report("module: scale<float> (mangled name) through TVM_FFI_EMBED_CUBIN_GET_KERNEL", True)
    except Exception as e:
        report("module: scale<float> (mangled name) through TVM_FFI_EMBED_CUBIN_GET_KERNEL", False,
               f"{type(e).__name__}: {e}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--artifacts", required=True, help="directory written by nvrtc_embed.sh prepare")
    parser.add_argument("--only", choices=["module", "library"], help="run one group of checks")
    parser.add_argument("--libcuda", default=os.environ.get("TVMFFI_JIT_LIBCUDA", "libcuda.so.1"),
                        help="driver library to load (default: libcuda.so.1, or $TVMFFI_JIT_LIBCUDA)")
    args = parser.parse_args()
    try:
        if args.only in (None, "library"):
            run_library_checks(args.artifacts, args.libcuda)
        if args.only in (None, "module"):
            run_module_check(args.artifacts)
    except Exception:
        traceback.print_exc()
        report("embed_launch.py", False, "unexpected error (traceback above)")
    failed = results.count(False)
    print(f"# {len(results) - failed} passed, {failed} failed", flush=True)
    return 1 if failed or not results else 0


if __name__ == "__main__":
    sys.exit(main())
