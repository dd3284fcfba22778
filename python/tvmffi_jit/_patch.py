"""``patch()``: route ``tvm_ffi.cpp``'s four build functions through tvmffi-jit."""

from __future__ import annotations

from . import _api

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

# The names patched, in tvm_ffi.cpp (the package users call) and in
# tvm_ffi.cpp.extension (where load/load_inline look build/build_inline up).
PATCHED_NAMES = ("build", "build_inline", "load", "load_inline")

_originals: dict[tuple[str, str], Any] = {}


def patch() -> None:
    """Make ``tvm_ffi.cpp.build``/``build_inline``/``load``/``load_inline`` use tvmffi-jit.

    Opt-in and process-wide: after the call, code that looks the functions
    up on ``tvm_ffi.cpp`` (``tvm_ffi.cpp.load_inline(...)``) builds with the
    tool and its cache. A name imported before the call
    (``from tvm_ffi.cpp import load_inline``) keeps the original. Calling it
    again does nothing; :func:`unpatch` restores the originals.
    """
    import tvm_ffi.cpp  # noqa: PLC0415 - patching needs it; importing tvmffi_jit does not
    import tvm_ffi.cpp.extension  # noqa: PLC0415

    for module in (tvm_ffi.cpp, tvm_ffi.cpp.extension):
        for name in PATCHED_NAMES:
            key = (module.__name__, name)
            if key not in _originals:
                _originals[key] = getattr(module, name)
            setattr(module, name, getattr(_api, name))


def unpatch() -> None:
    """Undo :func:`patch` (nothing happens if it was not applied)."""
    import sys  # noqa: PLC0415

    for (module_name, name), original in list(_originals.items()):
        setattr(sys.modules[module_name], name, original)
        del _originals[(module_name, name)]


def is_patched() -> bool:
    """Whether :func:`patch` is in effect."""
    return bool(_originals)
