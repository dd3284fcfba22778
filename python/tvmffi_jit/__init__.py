"""tvmffi_jit: tvm_ffi.cpp's build and load functions, run by the tvmffi-jit binary.

``build``, ``build_inline``, ``load`` and ``load_inline`` take the parameters
of ``tvm_ffi.cpp``'s functions and give the same results; the compile runs
through ``tvmffi-jit build --json`` and its content-addressed cache (shared
with the command line), so a hit spawns no compiler and no ninja.
``build_many`` builds several modules as one batch (one job pool);
``inspect(path)`` lists the GPU code of a file; ``patch()`` redirects
``tvm_ffi.cpp``'s four functions here. docs/python.md has the details.

Importing this package imports neither tvm_ffi nor numpy: ``load``/``load_inline``
import tvm_ffi when they load a module.
"""

from __future__ import annotations

from ._api import BuildError, InspectError, build, build_inline, build_many, inspect, load, load_inline
from ._binary import BinaryNotFoundError, find_binary
from ._patch import is_patched, patch, unpatch

__all__ = [
    "BinaryNotFoundError",
    "BuildError",
    "InspectError",
    "__version__",
    "build",
    "build_inline",
    "build_many",
    "find_binary",
    "inspect",
    "is_patched",
    "load",
    "load_inline",
    "patch",
    "unpatch",
]


def __getattr__(name: str) -> str:
    # The wheel build writes _version.py from the CMake project version (the
    # one place it is set); a source checkout has none and asks the binary.
    if name == "__version__":
        try:
            from ._version import __version__ as version  # noqa: PLC0415
        except ImportError:
            from . import _binary  # noqa: PLC0415

            try:
                proc = _binary.run(["--version"])
                first = proc.stdout.split("\n", 1)[0].split()
                version = first[1] if proc.returncode == 0 and len(first) > 1 else "unknown"
            except _binary.BinaryNotFoundError:
                version = "unknown"
        globals()["__version__"] = version
        return version
    raise AttributeError(f"module 'tvmffi_jit' has no attribute {name!r}")
