"""The in-process hit path: ``libtvmffi_jit_engine.so`` through ctypes.

The engine is the CLI compiled as a shared library with a two-function C ABI
(src/cli/engine.cpp): a request ``{"argv": [...]}`` in, ``{"exit_code",
"stdout", "stderr"}`` out. The package asks it with ``--only-if-cached``
first, which answers a local cache hit without starting a process and a miss
without building; the ``tvmffi-jit`` binary builds the misses as before.

ctypes rather than a CPython extension: the library does not link libpython,
so the wheel stays ``py3-none`` (one wheel for every CPython 3) and needs no
Python headers to build (docs/python.md, "In-process hits").

Set ``TVMFFI_JIT_IN_PROCESS=0`` to run every call through the binary.
"""

from __future__ import annotations

import json
import os

from . import _binary

LIBRARY_NAME = "libtvmffi_jit_engine.so"
IN_PROCESS_ENV = "TVMFFI_JIT_IN_PROCESS"

_UNSET = object()
_engine = _UNSET  # the loaded library, or None when there is none
_lock = None  # a lock (_thread), made on first use


def _new_lock_in_child():
    """A forked child has only the forking thread: a lock another thread held at
    the fork would stay locked forever there (PyTorch DataLoader workers,
    multiprocessing's fork start method). The child gets a new one; the library
    itself waits, before the fork, for a call in flight to end (its engine lock,
    util/fork_safe.h), so the child's engine is idle and consistent."""
    global _lock  # noqa: PLW0603 - a per-process memo
    if _lock is not None:
        import _thread  # noqa: PLC0415 - already imported by _load()

        _lock = _thread.allocate_lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


def library_path() -> str | None:
    """The engine library that goes with the binary :func:`find_binary` returns, or ``None``.

    With ``$TVMFFI_JIT_BIN`` the library must sit beside that binary (a build
    tree: ``build/``), so that the two always come from one build; else the
    wheel's copy in this package's folder, else the one beside the binary.
    """
    candidates = []
    if not os.environ.get(_binary.BINARY_ENV):
        candidates.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME))
    try:
        candidates.append(os.path.join(os.path.dirname(_binary.find_binary()), LIBRARY_NAME))
    except _binary.BinaryNotFoundError:
        pass
    for path in candidates:
        if os.path.isfile(path):
            return path
    return None


def _load():
    global _engine, _lock  # noqa: PLW0603 - a per-process memo
    if _engine is not _UNSET:
        return _engine
    _engine = None
    if os.environ.get(IN_PROCESS_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    path = library_path()
    if path is None:
        return None
    import _thread  # noqa: PLC0415 - a lock without threading's import (a fresh process's hit pays it)
    import ctypes  # noqa: PLC0415 - only when there is an engine to load

    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None  # an unloadable engine (another platform): the binary answers
    lib.tvmffi_jit_run.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.tvmffi_jit_run.restype = ctypes.c_int
    lib.tvmffi_jit_free.argtypes = [ctypes.c_void_p]
    lib.tvmffi_jit_free.restype = None
    _lock = _thread.allocate_lock()
    _engine = (lib, ctypes)
    return _engine


def run(argv: list[str]) -> dict | None:
    """``tvmffi-jit ARGV...`` in this process: ``{"exit_code", "stdout", "stderr"}``,
    or ``None`` when there is no engine (or it refused the request)."""
    loaded = _load()
    if loaded is None:
        return None
    lib, ctypes = loaded
    request = json.dumps({"argv": argv}).encode("utf-8", "surrogateescape")
    out = ctypes.c_void_p()
    with _lock:  # the engine's logger and output capture are process-wide
        rc = lib.tvmffi_jit_run(request, ctypes.byref(out))
    if not out.value:
        return None
    try:
        text = ctypes.string_at(out.value)
    finally:
        lib.tvmffi_jit_free(out)
    if rc != 0:
        return None
    return json.loads(text.decode("utf-8", "replace"))
