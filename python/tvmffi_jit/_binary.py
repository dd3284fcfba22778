"""Finding the ``tvmffi-jit`` binary and running it.

Only ``os``, ``sys`` and ``subprocess`` are imported here: ``import tvmffi_jit`` must
stay cheap, because a cache hit costs the tool about 2 ms and everything else
a fresh process spends is Python's own start-up and imports.
"""

from __future__ import annotations

import os
import subprocess
import sys

BINARY_NAME = "tvmffi-jit"
BINARY_ENV = "TVMFFI_JIT_BIN"

_found: str | None = None


class BinaryNotFoundError(FileNotFoundError):
    """The ``tvmffi-jit`` binary is nowhere this package looks for it."""


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _candidates() -> list[str]:
    """Where the binary may be, in the order :func:`find_binary` tries them."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    site_dir = os.path.dirname(package_dir)
    out = []
    # Installed from the wheel: the binary is in the wheel's scripts tree,
    # which pip puts in <prefix>/bin for a package in
    # <prefix>/lib/pythonX.Y/site-packages (venv, system, --user, --prefix).
    prefix = os.path.dirname(os.path.dirname(os.path.dirname(site_dir)))
    out.append(os.path.join(prefix, "bin", BINARY_NAME))
    # The interpreter's own scripts directory (a venv whose site-packages
    # layout differs from the one above).
    out.append(os.path.join(os.path.dirname(sys.executable), BINARY_NAME))
    # A source checkout: python/tvmffi_jit next to the CMake build folder.
    out.append(os.path.join(os.path.dirname(site_dir), "build", BINARY_NAME))
    return out


def find_binary() -> str:
    """Return the absolute path of the ``tvmffi-jit`` binary this package runs.

    Looked for, in order: ``$TVMFFI_JIT_BIN`` (used as given, and an error if it
    is not an executable file); the ``bin`` folder of the environment this
    package is installed in (where the wheel puts it); the folder of
    ``sys.executable``; ``build/`` of a source checkout holding this package;
    then every directory on ``PATH``. The result is remembered for the process.
    """
    global _found  # noqa: PLW0603 - a per-process memo
    if _found is not None:
        return _found
    explicit = os.environ.get(BINARY_ENV)
    if explicit:
        if not _executable(explicit):
            raise BinaryNotFoundError(
                f"${BINARY_ENV} is {explicit!r}, which is not an executable file; "
                f"point it at a tvmffi-jit binary or unset it"
            )
        _found = os.path.abspath(explicit)
        return _found
    tried = _candidates()
    for path in tried:
        if _executable(path):
            _found = os.path.abspath(path)
            return _found
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if directory:
            path = os.path.join(directory, BINARY_NAME)
            if _executable(path):
                _found = os.path.abspath(path)
                return _found
            tried.append(path)
    raise BinaryNotFoundError(
        "cannot find the tvmffi-jit binary; tried " + ", ".join(tried) + ". Install the wheel "
        f"(pip install tvmffi-jit, or pip install . in a checkout) or set ${BINARY_ENV}"
    )


def run(argv: list[str], *, tmpdir: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``tvmffi-jit ARGV...`` with stdout and stderr captured as text.

    ``tmpdir``: the child's ``TMPDIR`` (where the tool puts builds it cannot
    cache), a folder the caller removes.
    """
    env = None
    if tmpdir is not None:
        env = dict(os.environ)
        env["TMPDIR"] = tmpdir
    return subprocess.run(
        [find_binary(), *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        check=False,
    )
