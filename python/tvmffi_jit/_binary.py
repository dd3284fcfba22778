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


# How long the tool gets, after an interrupt is forwarded to it, to stop its
# compilers (it gives them 2 s before SIGKILL) and remove its staging folder,
# before its process group and those of everything it started are killed.
INTERRUPT_GRACE_SECONDS = 5.0


def run(argv: list[str], *, tmpdir: str | None = None, progress: bool = False) -> subprocess.CompletedProcess[str]:
    """Run ``tvmffi-jit ARGV...`` with stdout and stderr captured as text.

    ``tmpdir``: the child's ``TMPDIR`` (where the tool puts builds it cannot
    cache), a folder the caller removes.

    ``progress``: the tool's stderr (its progress, compiler output, errors,
    a batch's summary) is shown as it comes, as the CLI shows it: on a
    terminal (``sys.stderr`` is file descriptor 2 and a tty) the tool writes
    there itself and draws its status line, and the result's ``stderr`` is
    empty; anywhere else (Jupyter, a redirected or captured ``sys.stderr``)
    each chunk is copied to ``sys.stderr`` as it arrives (the tool then
    prints one line per step) and also kept in the result's ``stderr``.

    The tool runs in a process group of its own. When this thread is
    interrupted while it runs (KeyboardInterrupt: Ctrl-C in a terminal, the
    interrupt button of Jupyter, which signals the kernel process only), the
    interrupt is forwarded to the tool as SIGINT, on which it stops its
    compilers and removes its staging folder; if it has not exited within
    :data:`INTERRUPT_GRACE_SECONDS` (or a second interrupt comes), its group
    and the groups of the processes it started are killed. Then the
    KeyboardInterrupt goes on. (``subprocess.run`` would SIGKILL the tool at
    once, leaving its compilers running and its staging folder behind.)
    """
    env = None
    if tmpdir is not None:
        env = dict(os.environ)
        env["TMPDIR"] = tmpdir
    group: dict = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
    relay = None
    stderr: int | None = subprocess.PIPE
    if progress:
        _flush(sys.stderr)  # what the caller wrote comes before the tool's lines
        if _stderr_is_terminal():
            stderr = None  # inherited: the tool draws its status line on the terminal
        else:
            relay = _StderrRelay()
            stderr = relay.write_fd
    try:
        proc = subprocess.Popen(
            [find_binary(), *argv],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            errors="replace",
            **group,
        )
    except BaseException:
        if relay is not None:
            relay.started()
            relay.finish()
        raise
    if relay is not None:
        relay.started()  # the child holds the write end now
    try:
        out, err = proc.communicate()
    except BaseException:
        _stop(proc)
        if relay is not None:
            relay.finish()
        raise
    if relay is not None:
        err = relay.finish()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err or "")


def _flush(stream: object) -> None:
    try:
        stream.flush()  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        pass


def _stderr_is_terminal() -> bool:
    """Whether ``sys.stderr`` writes straight to a terminal on descriptor 2,
    which a child can then inherit."""
    try:
        return sys.stderr is not None and sys.stderr.fileno() == 2 and os.isatty(2)
    except (AttributeError, OSError, ValueError):  # Jupyter's stream, pytest's capture: no usable fileno
        return False


class _StderrRelay:
    """A pipe for the tool's stderr and a thread copying what arrives to
    ``sys.stderr`` (and keeping it), for :func:`run` with ``progress``."""

    # After the tool exited, how long the copy may take to reach the end of
    # the pipe: a process the tool started and left running (an sccache
    # server) may hold its write end open for good.
    DRAIN_SECONDS = 5.0

    def __init__(self) -> None:
        import threading  # noqa: PLC0415 - only for a batch

        self._read_fd, self.write_fd = os.pipe()
        self._chunks: list[str] = []
        self._thread = threading.Thread(target=self._copy, name="tvmffi-jit stderr", daemon=True)

    def started(self) -> None:
        os.close(self.write_fd)
        self._thread.start()

    def _copy(self) -> None:
        import codecs  # noqa: PLC0415

        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while True:
            try:
                data = os.read(self._read_fd, 65536)
            except OSError:
                data = b""
            text = decoder.decode(data, final=not data)
            if text:
                self._chunks.append(text)
                try:
                    sys.stderr.write(text)
                    sys.stderr.flush()
                except (AttributeError, OSError, ValueError):
                    pass  # no stderr to show it on: it is still kept
            if not data:
                return

    def finish(self) -> str:
        """Everything copied once the pipe is drained (or DRAIN_SECONDS passed)."""
        self._thread.join(self.DRAIN_SECONDS)
        if not self._thread.is_alive():
            os.close(self._read_fd)
        return "".join(self._chunks)


def _stop(proc: subprocess.Popen) -> None:
    """Stop the tool after the calling thread was interrupted (see :func:`run`)."""
    if proc.poll() is None:
        import signal  # noqa: PLC0415 - only when interrupted

        try:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=INTERRUPT_GRACE_SECONDS)  # drains its pipes while it cleans up
        except (subprocess.TimeoutExpired, KeyboardInterrupt):  # slow, or a second interrupt: no more waiting
            _kill_tree(proc)
        except OSError:
            pass  # gone already
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    proc.wait()


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the tool's process group and the groups of every process
    below it (it starts each compiler in a group of its own)."""
    import signal  # noqa: PLC0415

    groups = [proc.pid, *_descendant_groups(proc.pid)]
    own = os.getpgrp()
    for group in dict.fromkeys(groups):
        if group > 1 and group != own:  # never this process's own group
            try:
                os.killpg(group, signal.SIGKILL)
            except OSError:
                pass


def _descendant_groups(root: int) -> list[int]:
    """The process groups of the processes below ``root`` (from /proc; none where there is no /proc)."""
    parent_of: dict[int, tuple[int, int]] = {}  # pid -> (ppid, pgrp)
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()  # after "(comm)", which may hold spaces
            parent_of[int(name)] = (int(fields[1]), int(fields[2]))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in parent_of.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(parent_of[child][1])
            todo.append(child)
    return out
