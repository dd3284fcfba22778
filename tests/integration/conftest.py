"""Every integration test file writes only inside its own pytest base folder,
whatever HOME, XDG_CACHE_HOME or TMPDIR say (issue 31).

Each setting below has a default under HOME or TMPDIR that something the tests
run falls back to; here it points into the base folder instead, for the whole
session, before any test or fixture runs:

  TVMFFI_JIT_CACHE_DIR  the tool's cache root (else $XDG_CACHE_HOME/tvmffi-jit,
                        else ~/.cache/tvmffi-jit)
  XDG_CACHE_HOME        the tool's toolchain memo ($XDG_CACHE_HOME/tvmffi-jit-
                        toolchain, no variable of its own), sccache's local cache
                        and sccache-dist's client toolchain archives
                        (sccache, sccache-dist-client under it)
  TVM_FFI_CACHE_DIR     tvm_ffi.cpp's build folder (~/.cache/tvm-ffi)
  TMPDIR                the tool's --no-cache and uncachable builds
                        ($TMPDIR/tvmffi-jit-<name>-XXXXXX, kept by design), the
                        Python package's manifests and per-process folder, and
                        Python's tempfile
  CUDA_CACHE_PATH       the CUDA driver's JIT cache (~/.nv/ComputeCache)

ctest gives each test file its own base folder (--basetemp=<build>/pytest/<ctest
name>, tests/CMakeLists.txt), which pytest empties when the file runs again: a
second run, even one that reuses the same paths (and so the same cache keys),
starts from empty caches. A test whose assertion needs a cold cache still makes
its own (its tmp_path), since the other tests of its file share these.
"""

import os
import tempfile

import pytest

# What tests/CMakeLists.txt and scripts/test.sh expect of a test's environment.
OWN_FOLDERS = {
    "TVMFFI_JIT_CACHE_DIR": "tvmffi-jit-cache",
    "XDG_CACHE_HOME": "xdg-cache",
    "TVM_FFI_CACHE_DIR": "tvm-ffi-cache",
    "TMPDIR": "tmp",
    "CUDA_CACHE_PATH": "cuda-cache",
}


@pytest.fixture(scope="session", autouse=True)
def own_temp_folders(tmp_path_factory):
    """Points every default folder above into this session's base folder."""
    base = tmp_path_factory.getbasetemp() / "env"
    with pytest.MonkeyPatch.context() as mp:
        for var, name in OWN_FOLDERS.items():
            (base / name).mkdir(parents=True, exist_ok=True)
            mp.setenv(var, str(base / name))
        mp.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
        yield base
