"""Driver validation (`inspect --load`, `build --validate`) through the real
binary, against the fake libcuda built by tests/fake_libcuda (no GPU needed).

Every fake behaviour gives the verdict and exit code of the contract
(docs/driver.md), and the tool survives a driver that crashes or hangs. The
toolkit's stub libcuda and a missing libcuda are "no driver" (exit 4).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
BINARY_DIR = Path(os.environ.get("TVMFFI_JIT_BINARY_DIR", SOURCE_DIR / "build"))
ORACLES = SOURCE_DIR / "tests" / "fixtures" / "oracles"
FAKE = BINARY_DIR / "tests" / "fake_libcuda" / "libfakecuda.so"
STUB = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "lib64" / "stubs" / "libcuda.so"
CUBIN = ORACLES / "a90.cubin"
HOST_SO = ORACLES / "libk.so"

pytestmark = pytest.mark.skipif(not FAKE.exists(), reason=f"fake libcuda not built at {FAKE}")


def run(args, mode="ok", libcuda=FAKE, extra_env=None, timeout=60):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("FAKE_CUDA_") or k in ("TVMFFI_JIT_LIBCUDA", "TVMFFI_JIT_VALIDATE_UNGATED"):
            del env[k]
    if libcuda is not None:
        env["TVMFFI_JIT_LIBCUDA"] = str(libcuda)
    env["FAKE_CUDA_MODE"] = mode
    env.update(extra_env or {})
    return subprocess.run([TOOL] + list(args), capture_output=True, text=True, env=env, timeout=timeout)


def load_json(args, **kw):
    r = run(["inspect", "--load", "--json"] + list(args), **kw)
    doc = json.loads(r.stdout)
    return r, [f["driver"] for f in doc["files"]]


def test_valid_cubin_lists_and_resolves_every_kernel():
    r, (d,) = load_json([str(CUBIN)])
    assert r.returncode == 0, r.stderr
    assert d["verdict"] == "valid" and d["valid"] is True
    assert d["driver_version"] == "13.0"
    assert d["device"] == {"ordinal": 0, "name": "Fake GPU (tvmffi-jit tests)", "compute_capability": "9.0"}
    assert d["load_mode"] == "lazy"
    (e,) = d["entries"]
    assert e["kernel_count"] == 4 and e["offline_kernel_count"] == 4
    assert sorted(k["name"] for k in e["kernels"]) == ["_Z3locIfEvPT_1Bi", "_Z4smemPf", "add", "clu"]
    assert all(k["resolved"] and "num_regs" in k["attributes"] for k in e["kernels"])
    assert e["error_log"] == "" and e["failed_step"] is None


def test_attribute_mismatches_are_flagged_and_documented_offsets_are_not():
    # The fake reports what FAKE_CUDA_ATTR_<n> says for every kernel: 12
    # registers is right only for `add`; 4360 shared bytes (the driver's view
    # of the 5384-byte .nv.shared with its 1 KiB base) only for _Z4smemPf.
    r, (d,) = load_json([str(CUBIN)], extra_env={"FAKE_CUDA_ATTR_4": "12", "FAKE_CUDA_ATTR_1": "4360"})
    assert r.returncode == 0
    mm = {(m["kernel"], m["attribute"]) for m in d["entries"][0]["mismatches"]}
    assert ("add", "registers") not in mm
    assert ("_Z4smemPf", "registers") in mm
    assert ("_Z4smemPf", "shared") not in mm
    assert ("add", "shared") in mm


def test_zero_kernels_with_an_error_log_is_invalid_and_names_the_cuerror_and_log():
    r, (d,) = load_json([str(CUBIN)], mode="zero_kernels")
    assert r.returncode == 3
    (e,) = d["entries"]
    assert e["kernel_count"] == 0
    assert e["failed_step"] == "cuLibraryGetModule" and e["result"] == "CUDA_ERROR_INVALID_PTX"
    assert "retx" in e["error_log"]
    assert "CUDA_ERROR_INVALID_PTX" in d["message"] and "retx" in d["message"]
    assert "CUDA_ERROR_INVALID_PTX" in r.stderr


def test_an_error_from_culibrarygetkernel_is_invalid():
    r, (d,) = load_json([str(CUBIN)], mode="kernel_error")
    assert r.returncode == 3
    assert "CUDA_ERROR_NO_BINARY_FOR_GPU" in d["message"]
    assert all(not k["resolved"] for k in d["entries"][0]["kernels"])


def test_a_load_error_is_invalid_with_the_log():
    r, (d,) = load_json([str(CUBIN)], mode="load_error")
    assert r.returncode == 3
    assert d["entries"][0]["failed_step"] == "cuLibraryLoadFromFile"
    assert "CUDA_ERROR_INVALID_IMAGE" in d["message"] and "not recognized" in d["message"]


def test_a_kernel_name_that_is_not_utf8_is_loaded_and_resolved_by_its_real_bytes(tmp_path):
    # One flipped bit in "add" (0x64 -> 0xe4, a UTF-8 lead byte with no continuation) wherever the
    # name is stored: symbol and section names agree, so the cubin stays consistent. The probe
    # child gets and returns the name byte for byte; only the user-facing JSON shows U+FFFD.
    data = bytearray(CUBIN.read_bytes())
    for m in re.finditer(rb"add\x00", bytes(data)):
        data[m.start() + 1] ^= 0x80
    flipped = tmp_path / "flipped.cubin"
    flipped.write_bytes(bytes(data))
    r, (d,) = load_json([str(flipped)])
    assert r.returncode == 0, r.stderr
    assert d["verdict"] == "valid"
    (e,) = d["entries"]
    assert sorted(k["name"] for k in e["kernels"]) == ["_Z3locIfEvPT_1Bi", "_Z4smemPf", "a\ufffdd", "clu"]
    assert all(k["resolved"] for k in e["kernels"])


def test_the_tool_survives_a_driver_crash_and_reports_it():
    r, (d,) = load_json([str(CUBIN)], mode="crash")
    assert r.returncode == 3  # not -SIGSEGV: the child died, the tool did not
    assert "driver crashed with SIGSEGV while loading entry 1 in cuLibraryLoadFromFile" in d["message"]
    assert d["entries"][0]["crashed"] is True


def test_a_crash_on_the_second_entry_blames_entry_2_and_keeps_entry_1():
    r, (d,) = load_json([str(HOST_SO)], mode="crash", extra_env={"FAKE_CUDA_FAIL_ON_LOAD": "2"})
    assert r.returncode == 3
    e1, e2 = d["entries"]
    assert e1["valid"] and not e1["crashed"]
    assert e2["crashed"]
    assert "while loading entry 2 (.nv_fatbin fatbin at 0x8fff8)" in d["message"]


def test_the_tool_survives_a_driver_that_never_returns():
    t0 = time.monotonic()
    r, (d,) = load_json(["--timeout", "1", str(CUBIN)], mode="hang")
    assert time.monotonic() - t0 < 15
    assert r.returncode == 3
    assert "driver did not return within 1 s while loading entry 1 in cuLibraryLoadFromFile" in d["message"]


def test_files_after_a_crashed_one_are_still_validated(tmp_path):
    r, ds = load_json([str(CUBIN), str(CUBIN), str(CUBIN)], mode="crash", extra_env={"FAKE_CUDA_FAIL_ON_LOAD": "2"})
    assert r.returncode == 3
    assert [d["verdict"] for d in ds] == ["valid", "invalid", "valid"]


def test_an_offline_invalid_file_never_reaches_the_driver(tmp_path):
    truncated = tmp_path / "truncated.cubin"
    truncated.write_bytes(CUBIN.read_bytes()[:8000])
    trace = tmp_path / "calls.log"
    r, (d,) = load_json([str(truncated)], mode="crash", extra_env={"FAKE_CUDA_LOG": str(trace)})
    assert r.returncode == 3
    assert d["offline_valid"] is False and d["entries"] == []
    calls = trace.read_text() if trace.exists() else ""
    assert "cuLibraryLoadFromFile" not in calls


def test_a_driver_without_kernel_enumeration_resolves_offline_names():
    r, (d,) = load_json([str(CUBIN)], mode="old_driver")
    assert r.returncode == 0, d["message"]
    (e,) = d["entries"]
    assert e["kernel_count"] is None
    assert d["kernel_enumeration"] is False
    assert sorted(k["name"] for k in e["kernels"]) == ["_Z3locIfEvPT_1Bi", "_Z4smemPf", "add", "clu"]


@pytest.mark.skipif(not STUB.exists(), reason="no CUDA toolkit stub libcuda")
def test_the_toolkit_stub_is_no_driver_exit_4():
    r, (d,) = load_json([str(CUBIN)], libcuda=STUB)
    assert r.returncode == 4
    assert d["verdict"] == "no-driver" and "CUDA_ERROR_STUB_LIBRARY" in d["message"]


def test_a_missing_libcuda_is_no_driver_exit_4(tmp_path):
    r, (d,) = load_json([str(CUBIN)], libcuda=tmp_path / "libcuda.so.1")
    assert r.returncode == 4
    assert "could not be loaded" in d["message"]


def test_no_device_is_exit_4():
    r, (d,) = load_json([str(CUBIN)], mode="no_device")
    assert r.returncode == 4
    assert "CUDA_ERROR_NO_DEVICE" in d["message"]


def test_a_device_ordinal_the_driver_does_not_have_is_exit_4():
    r, (d,) = load_json(["--device", "3", str(CUBIN)])
    assert r.returncode == 4
    assert d["message"].startswith("no device: device 3 not found")
    assert "CUDA_ERROR_INVALID_DEVICE" in d["message"]


def test_offline_invalid_wins_over_no_driver(tmp_path):
    bad = tmp_path / "bad.cubin"
    bad.write_bytes(CUBIN.read_bytes()[:1000])
    r = run(["inspect", "--load", str(bad), str(CUBIN)], libcuda=tmp_path / "none.so")
    assert r.returncode == 3


def test_text_output_has_the_driver_block_and_verdict():
    r = run(["inspect", "--load", str(CUBIN)])
    assert r.returncode == 0
    assert "a90.cubin: driver" in r.stdout
    assert "verdict: valid: 4 kernel(s) in 1 entry on Fake GPU" in r.stdout


def test_text_output_without_a_driver_says_why_nothing_was_loaded(tmp_path):
    # It used to print "entry 1 (file): not loaded, offline 4".
    r = run(["inspect", "--load", str(CUBIN)], libcuda=tmp_path / "libcuda.so.1")
    assert r.returncode == 4
    assert "entry 1 (file): not loaded (no driver or device, see the verdict), 4 kernel(s) listed offline" in r.stdout
    assert "offline 4" not in r.stdout
    assert "verdict: no driver: " in r.stdout


def test_a_decompression_bomb_is_refused_offline_and_never_reaches_the_driver(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import hostile_inputs
    bomb = tmp_path / "bomb.fatbin"
    bomb.write_bytes(hostile_inputs.cases()["zstd-bomb-8x1g.fatbin"][0])
    trace = tmp_path / "calls.log"
    r, (d,) = load_json([str(bomb)], extra_env={"FAKE_CUDA_LOG": str(trace)})
    assert r.returncode == 3
    assert d["offline_valid"] is False
    assert "offline structure check failed: entry 0: decompressed size 1073741824 would bring the file past" in d["message"]
    assert "cuLibraryLoadFromFile" not in (trace.read_text() if trace.exists() else "")


def test_the_probe_is_hidden_from_help():
    r = run(["--help"])
    assert "__driver-probe" not in r.stdout


# --- TVM FFI modules and build --validate ------------------------------------

MODULE_SRC = r"""
#include <cstdint>
int64_t twice(int64_t a) { return 2 * a; }
"""

BROKEN_SRC = r"""
#include <cstdint>
extern "C" int64_t defined_nowhere(int64_t);
int64_t twice(int64_t a) { return defined_nowhere(a); }
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    if shutil.which("tvm-ffi-config") is None:
        pytest.skip("tvm-ffi not installed")
    return tmp_path_factory.mktemp("cache")


def build(tmp_path, cache, source, *extra, mode="ok", libcuda=FAKE):
    src = tmp_path / "m.cc"
    src.write_text(source)
    return run(["build", str(src), "--function", "twice", "--cache-dir", str(cache), "--validate"] + list(extra),
               mode=mode, libcuda=libcuda, timeout=300)


def test_build_validate_loads_a_module_and_resolves_its_functions(tmp_path, cache):
    r = build(tmp_path, cache, MODULE_SRC, "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["validation"]["driver"]
    assert v["verdict"] == "valid"
    assert v["module"]["loaded"] is True
    assert v["module"]["functions"] == [{"symbol": "__tvm_ffi_twice", "resolved": True}]


def test_build_validate_catches_an_undefined_symbol(tmp_path, cache):
    r = build(tmp_path, cache, BROKEN_SRC)
    assert r.returncode == 3
    assert "defined_nowhere" in r.stderr and "dlopen of the module failed" in r.stderr


CUDA_SRC = r"""
#include <cstdint>
__global__ void scale(float* x, float s) { x[threadIdx.x] *= s; }
int64_t twice(int64_t a) { scale<<<1, 1>>>(nullptr, 2.0f); return 2 * a; }
"""


@pytest.fixture(scope="module")
def cuda_module(tmp_path_factory, cache):
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("no nvcc")
    d = tmp_path_factory.mktemp("cuda")
    src = d / "m.cu"
    src.write_text(CUDA_SRC)
    args = ["build", str(src), "--function", "twice", "--arch", "9.0", "--cache-dir", str(cache)]
    r = run(args, timeout=300)
    assert r.returncode == 0, r.stderr
    return args


def test_build_validate_without_a_driver_warns_and_checks_offline(tmp_path, cuda_module):
    r = run(cuda_module + ["--validate"], libcuda=tmp_path / "none.so")
    assert r.returncode == 0, r.stderr
    assert "warning" in r.stderr and "only the offline checks" in r.stderr


def test_build_validate_require_driver_without_a_driver_is_exit_4(tmp_path, cuda_module):
    r = run(cuda_module + ["--validate", "--require-driver"], libcuda=tmp_path / "none.so")
    assert r.returncode == 4


def test_build_validate_with_a_driver_checks_the_kernels(cuda_module):
    r = run(cuda_module + ["--validate", "--json"])
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)["validation"]["driver"]
    assert v["verdict"] == "valid"
    assert [k["name"] for e in v["entries"] for k in e["kernels"]] == ["_Z5scalePff"]
    r = run(cuda_module + ["--validate"], mode="kernel_error")
    assert r.returncode == 3
