"""``build``, ``build_inline``, ``load``, ``load_inline`` and ``inspect``.

The four build functions take exactly the parameters of ``tvm_ffi.cpp``'s
(apache-tvm-ffi 0.1.15) and normalise them the same way; the build itself is
one run of ``tvmffi-jit build --json``, and loading is ``tvm_ffi.load_module``.
``tvm_ffi`` is imported only to load a module: building never needs it.
docs/python.md says how each parameter maps onto the tool.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence

from . import _binary, _engine

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (import cost)
if TYPE_CHECKING:  # pragma: no cover - annotations only; tvm_ffi is imported lazily
    from typing import Any

    from tvm_ffi.module import Module


class BuildError(RuntimeError):
    """``tvmffi-jit build`` failed.

    The message holds the tool's whole error output: for a failed compile or
    link, the command (as a pasteable ``cd DIR && ...`` line) and everything
    the compiler printed. ``exit_code`` follows the tool's contract (1 a
    compiler or the linker failed, 2 bad arguments, 4 a missing toolchain or
    tvm-ffi, 5 an I/O or cache failure); ``argv`` is the command that ran.
    """

    def __init__(self, message: str, *, exit_code: int, argv: list[str], stderr: str) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.argv = argv
        self.stderr = stderr


class JitWarning(UserWarning):
    """Something the build survived but the caller should know: the cache
    could not store the module (every call will rebuild it), a remote cache
    failed, a header changed during the build. The text is the tool's warning.
    """


class InspectError(RuntimeError):
    """``tvmffi-jit inspect`` found the file invalid (exit 3) or could not run (2, 5).

    ``report`` is the parsed JSON report when the tool printed one (each
    file's ``error`` says what and where), else ``None``.
    """

    def __init__(self, message: str, *, exit_code: int, report: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.report = report


# ---------------------------------------------------------------------------
# Normalisation, as tvm_ffi.cpp.extension does it, and the arguments checked
# here, in the caller's terms: the tool reads them from a temp manifest that
# the caller never wrote, so its messages would name that file and its keys.

_C_IDENTIFIER = "a C identifier ([A-Za-z_][A-Za-z0-9_]*)"


def _is_c_identifier(text: str) -> bool:
    return text.isascii() and text.isidentifier()  # ASCII Python identifiers are exactly C's


def _type_name(value: object) -> str:
    return type(value).__name__


def _check_name(caller: str, name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{caller}(): name must be a str, not {_type_name(name)}")
    if not _is_c_identifier(name):
        raise ValueError(f"{caller}(): name = {name!r} is not {_C_IDENTIFIER}: it names the module's file")
    return name


def _str_seq2list(seq: Sequence[str] | str | None, caller: str = "", arg: str = "", paths: bool = False) -> list[str]:
    """A str or a sequence of them (file paths too, with ``paths``) as a list; anything else is a TypeError naming ``arg``."""
    if seq is None:
        return []
    if isinstance(seq, str) or (paths and isinstance(seq, os.PathLike)):
        return [os.fspath(seq)] if paths else [seq]
    if isinstance(seq, (bytes, bytearray)) or not isinstance(seq, (Sequence, set, frozenset)):
        raise TypeError(f"{caller}(): {arg} must be a str or a list of str, not {_type_name(seq)}")
    out = list(seq)
    for i, item in enumerate(out):
        if isinstance(item, str) or (paths and isinstance(item, os.PathLike)):
            continue
        raise TypeError(f"{caller}(): {arg}[{i}] must be a str{' or a path' if paths else ''}, not {_type_name(item)}")
    return [os.fspath(item) for item in out] if paths else out


def _function_map(
    functions: Mapping[str, str] | Sequence[str] | str | None, caller: str = "", arg: str = "functions"
) -> dict[str, str]:
    if functions is None:
        return {}
    if isinstance(functions, Mapping):
        out = {}
        for name, doc in functions.items():
            if not isinstance(name, str) or not _is_c_identifier(name):
                raise ValueError(f"{caller}(): {arg} key {name!r} is not {_C_IDENTIFIER}")
            if not isinstance(doc, str):
                raise TypeError(f"{caller}(): {arg}[{name!r}] (its docstring) must be a str, not {_type_name(doc)}")
            out[name] = doc
        return out
    names = _str_seq2list(functions, caller, arg)
    for i, name in enumerate(names):
        if not _is_c_identifier(name):
            where = arg if isinstance(functions, str) else f"{arg}[{i}]"
            raise ValueError(f"{caller}(): {where} = {name!r} is not {_C_IDENTIFIER}")
    return {name: "" for name in names}


def _list_argument(value: object, caller: str, arg: str, paths: bool = False) -> list:
    """A list-typed argument (``extra_cflags``, ...): a list or tuple of str
    (or paths, with ``paths``). A str is a TypeError, not a list of its
    characters (tvm_ffi.cpp turns ``extra_cflags="-O3"`` into ``- O 3``)."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        raise TypeError(
            f"{caller}(): {arg} must be a list of str, not a {_type_name(value)}: write {arg}=[{os.fspath(value)!r}]"
        )
    if isinstance(value, (bytes, bytearray)):
        raise TypeError(f"{caller}(): {arg} must be a list of str, not {_type_name(value)}")
    return _str_seq2list(value, caller, arg, paths)


def _flag_list(flags: Sequence[str] | None, caller: str = "", arg: str = "") -> list[str]:
    # tvm_ffi writes its flags space-joined into build.ninja, whose commands
    # run through /bin/sh, so "-O3 -g" is two flags there and quotes are
    # shell quotes. The tool passes each flag as one argv element (no shell),
    # so a flag holding whitespace, quotes or backslashes is split as sh
    # would split it (shlex); plain flags pass through untouched.
    out: list[str] = []
    for flag in _list_argument(flags, caller, arg):
        flag = flag.strip()
        if not flag:
            continue
        if any(c in flag for c in " \t\n'\"\\"):
            import shlex  # noqa: PLC0415 - rare; keeps the import cheap

            out.extend(shlex.split(flag))
        else:
            out.append(flag)
    return out


def _resolve(path: str | os.PathLike[str]) -> str:
    # tvm_ffi resolves sources and include paths with Path.resolve()
    # (absolute, symlinks followed); the tool reads relative paths from the
    # manifest's folder, which is a temp folder here.
    return os.path.realpath(os.fspath(path))


def _existing(caller: str, arg: str, index: int, path: str, directory: bool) -> str:
    """``path`` resolved, or FileNotFoundError / NotADirectoryError /
    IsADirectoryError naming the argument, its index and the value given."""
    resolved = _resolve(path)
    where = f"{caller}(): {arg}[{index}] = {path!r}"
    shown = "" if resolved == path else f" (resolved: {resolved})"
    if not os.path.exists(resolved):
        raise FileNotFoundError(f"{where}: no such {'directory' if directory else 'file'}{shown}")
    if directory and not os.path.isdir(resolved):
        raise NotADirectoryError(f"{where}: not a directory{shown}")
    if not directory and os.path.isdir(resolved):
        raise IsADirectoryError(f"{where}: a directory, not a source file{shown}")
    return resolved


def _check_backend(backend: str | None) -> None:
    if backend is None or backend in ("cuda", "hip"):
        return
    raise ValueError(f"Invalid backend: {backend}. Supported backends are 'cuda' and 'hip'.")


def _resolve_backend(manifest: dict[str, Any], backend: str | None, has_gpu_sources: bool) -> None:
    """Set the manifest's ``backend`` as tvm_ffi.cpp would choose it.

    A given backend is passed on. Without one, tvm_ffi looks (for GPU sources
    only) at ``TVM_FFI_GPU_BACKEND``, then at torch's build, then at which
    compiler is installed; the tool does the first and the last itself, and
    torch is asked here, only if the program already imported it (importing
    torch costs seconds).
    """
    if backend is not None:
        manifest["backend"] = backend
        return
    if not has_gpu_sources or os.environ.get("TVM_FFI_GPU_BACKEND", "").lower() in ("cuda", "hip"):
        return
    version = getattr(sys.modules.get("torch"), "version", None)
    if getattr(version, "hip", None):
        manifest["backend"] = "hip"
    elif getattr(version, "cuda", None):
        manifest["backend"] = "cuda"


def _write_if_changed(path: str, data: bytes) -> None:
    # An unchanged file keeps its mtime, so an incremental build_directory
    # does not see a new input (tvm_ffi's _maybe_write does the same).
    try:
        with open(path, "rb") as f:
            if f.read(len(data) + 1) == data:
                return
    except OSError:
        pass
    with open(path, "wb") as f:
        f.write(data)


def _output_kind(output: str | None) -> tuple[str, str | None]:
    """(emit, file name) for tvm_ffi's ``output``: ``.o``/``.obj`` is an object."""
    if output is None:
        return "module", None
    base = os.path.basename(output)
    ext = os.path.splitext(base)[1].lower()
    return ("object" if ext in (".o", ".obj") else "module"), base


# ---------------------------------------------------------------------------
# Running the tool.


_tvm_ffi_root_found: str | None = None


def _tvm_ffi_root() -> str | None:
    """The folder of the ``tvm_ffi`` package this interpreter would import.

    Passed as ``--tvm-ffi-root`` so the module is compiled against the tvm-ffi
    that will load it (the tool on its own asks ``python3`` on PATH, which may
    be another environment). Found without importing tvm_ffi (~100 ms).
    """
    global _tvm_ffi_root_found  # noqa: PLW0603 - a per-process memo (find_spec walks sys.path: ~0.1 ms)
    module = sys.modules.get("tvm_ffi")
    if module is not None and getattr(module, "__file__", None):
        return os.path.dirname(os.path.abspath(module.__file__))
    if _tvm_ffi_root_found is not None:
        return _tvm_ffi_root_found
    import importlib.util  # noqa: PLC0415

    try:
        spec = importlib.util.find_spec("tvm_ffi")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    _tvm_ffi_root_found = os.path.abspath(next(iter(spec.submodule_search_locations)))
    return _tvm_ffi_root_found


_manifest_counter = 0
# Manifest text -> the private file holding it, written by this process (its
# pid): a repeated call (a cache hit) reuses the file instead of writing and
# removing one, which cost more than the in-process hit itself. The files sit
# in $TMPDIR itself (the manifest's folder is its default base dir, part of
# the key: it must not change from process to process) and are removed at exit.
_manifest_files: dict[bytes, str] = {}
_manifest_files_pid = 0
_MAX_MANIFEST_FILES = 256


def _remove_manifest_files(pid: int) -> None:
    if os.getpid() != pid:  # a forked child's exit: the files are its parent's
        return
    for path in _manifest_files.values():
        try:
            os.unlink(path)
        except OSError:
            pass
    _manifest_files.clear()


def _write_manifest(manifest: dict[str, Any]) -> str:
    """The path of a private file holding the manifest: written once per
    distinct manifest and process, then reused while it exists."""
    global _manifest_files_pid  # noqa: PLW0603 - a per-process memo
    text = json.dumps(manifest).encode("utf-8")
    if _manifest_files_pid != os.getpid():
        if _manifest_files_pid == 0:
            import atexit  # noqa: PLC0415 - once per process

            atexit.register(lambda: _remove_manifest_files(_manifest_files_pid))
        _manifest_files.clear()  # a forked child writes its own: its parent removes these
        _manifest_files_pid = os.getpid()
    path = _manifest_files.get(text)
    if path is not None and os.path.isfile(path):
        return path
    if len(_manifest_files) >= _MAX_MANIFEST_FILES:
        _remove_manifest_files(os.getpid())
    path = _write_new_manifest_file(text, ".json")
    _manifest_files[text] = path
    return path


def _write_new_manifest_file(text: bytes, suffix: str) -> str:
    """A new private file in $TMPDIR holding ``text``: the folder every
    manifest of this package is written to, since a manifest's folder is its
    default base dir, part of the key (it must not change between calls)."""
    global _manifest_counter  # noqa: PLW0603 - a per-process counter
    directory = os.environ.get("TMPDIR") or "/tmp"
    while True:
        _manifest_counter += 1
        path = os.path.join(directory, f"tvmffi-jit-py-{os.getpid()}-{_manifest_counter}{suffix}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as f:  # a full write (os.write may stop short)
                f.write(text)
        except BaseException:
            os.unlink(path)
            raise
        return path


# Per-process folder that the binary gets as its TMPDIR: whatever a call
# leaves there (an artifact the cache could not store, the directory of a
# failed compile) is removed by this package, at the latest when the process
# exits, so no Python call leaves a temp dir behind.
_private_tmp: str | None = None


def _call_tmpdir() -> str:
    global _private_tmp  # noqa: PLW0603 - one per process
    import tempfile  # noqa: PLC0415 - only on a miss

    if _private_tmp is None or not os.path.isdir(_private_tmp):
        import atexit  # noqa: PLC0415
        import shutil  # noqa: PLC0415

        _private_tmp = tempfile.mkdtemp(prefix="tvmffi-jit-py-")
        atexit.register(shutil.rmtree, _private_tmp, True)
    return tempfile.mkdtemp(prefix="call-", dir=_private_tmp)


def _remove_tree(path: str) -> None:
    import shutil  # noqa: PLC0415

    shutil.rmtree(path, ignore_errors=True)


# The tool's advice names its command-line flags; a Python caller sets
# these instead. (pattern, replacement), applied to error and warning text.
_PYTHON_WORDS = (
    # toolchain/cuda_arch.cpp: no arch from anywhere.
    (
        r"pass --arch \(e\.g\. --arch [0-9.]+\), set \"cuda_arch\" in the manifest, or set TVM_FFI_CUDA_ARCH_LIST"
        r"(?: \(e\.g\. TVM_FFI_CUDA_ARCH_LIST=\"[^\"]*\"\))?",
        'set TVM_FFI_CUDA_ARCH_LIST (e.g. os.environ["TVM_FFI_CUDA_ARCH_LIST"] = "8.0 9.0", before the call)',
    ),
    (r"(?<![\w-])--arch(?![\w-])", "TVM_FFI_CUDA_ARCH_LIST"),
    (r"(?<![\w-])--cuda-cflag(?![\w-])", "extra_cuda_cflags"),
    (r"(?<![\w-])--cflag(?![\w-])", "extra_cflags"),
    (r"(?<![\w-])--ldflag(?![\w-])", "extra_ldflags"),
    (r"(?<![\w-])--include(?![\w-])", "extra_include_paths"),
    (r"(?<![\w-])--build-dir(?![\w-])", "build_directory"),
    (r"(?<![\w-])--embed-cubin(?![\w-])", "embed_cubin"),
    (r"(?<![\w-])--function(?![\w-])", "functions"),
    (r"(?<![\w-])--split-compile(?![\w-])", "split_compile"),
    (r"(?<![\w-])--job-trace(?![\w-])", "job_trace"),
    (r"(?<![\w-])(?:-k, )?--keep-going(?![\w-])", "keep_going"),
)


def _python_words(text: str) -> str:
    """The tool's message with its flags named as this package's arguments."""
    if "--" not in text:
        return text
    import re  # noqa: PLC0415 - errors only

    for pattern, replacement in _PYTHON_WORDS:
        text = re.sub(pattern, lambda _m, r=replacement: r, text)
    return text


def _caller_terms(text: str, manifest_path: str) -> str:
    """The tool's message about the temp manifest (``/tmp/x.json: /functions/1add: ...``)
    as one about the argument (``functions: ...``): the caller never saw that file.
    What the arguments' checks here catch never gets that far; this is for the rest."""
    if manifest_path not in text:
        return text
    import re  # noqa: PLC0415 - errors only

    text = re.sub(re.escape(manifest_path) + r": /([A-Za-z_]+)(?:/[^:\s]*)?: ", r"argument \1: ", text)
    return text.replace(manifest_path, "the arguments")


def _warn(result: dict[str, Any]) -> None:
    found = result.get("warnings") or []
    if found:
        import warnings  # noqa: PLC0415 - only when there is something to say

        for text in found:
            warnings.warn(f"tvmffi-jit: {_python_words(text)}", JitWarning, stacklevel=4)


class _Built:
    """A build's artifact path, and the private folder holding it when the
    cache could not store it (removed after loading, else at exit)."""

    __slots__ = ("path", "private_dir")

    def __init__(self, path: str, private_dir: str | None) -> None:
        self.path = path
        self.private_dir = private_dir


def _run_build(manifest: dict[str, Any], build_directory: str | None, output_name: str | None) -> _Built:
    argv = ["build", "--json", "-q"]  # -q: no progress lines; errors still come in full
    root = _tvm_ffi_root()
    if root is not None:
        argv += ["--tvm-ffi-root", root]
    jobs = os.environ.get("MAX_JOBS")  # tvm_ffi passes it to ninja -j
    if jobs:
        argv += ["-j", jobs]
    if build_directory is not None:
        build_dir = _resolve(build_directory)
        argv += ["--build-dir", build_dir]
        if output_name is not None:
            argv += ["--output", os.path.join(build_dir, output_name)]
    path = _write_manifest(manifest)  # reused by the next identical call: never removed here
    argv += ["-m", path]
    if build_directory is None:
        # A local hit, answered in this process (no fork/exec): a miss
        # (or no engine) goes on to the binary, which builds it.
        answer = _engine.run([*argv, "--only-if-cached"])
        if answer is not None and answer.get("exit_code") == 0:
            result = json.loads(answer["stdout"])
            if result.get("cache") == "hit":
                _warn(result)
                return _Built(result.get("output") or result["path"], None)
    call_dir = _call_tmpdir()
    try:
        proc = _binary.run(argv, tmpdir=call_dir)
    except BaseException:
        _remove_tree(call_dir)
        raise
    if proc.returncode != 0:
        _remove_tree(call_dir)  # a failed compile's kept directory: the message shows its command
        shown = [_binary.find_binary(), *argv]
        message = _python_words(_caller_terms(proc.stderr.rstrip(), path))
        if call_dir in message:
            message += f"\n(the build directory under {call_dir} was removed: tvmffi_jit leaves no temp dir behind)"
        raise BuildError(
            f"tvmffi-jit build of {manifest['name']!r} failed (exit {proc.returncode}):\n{message}",
            exit_code=proc.returncode,
            argv=shown,
            stderr=proc.stderr,
        )
    result = json.loads(proc.stdout)
    # What the compilers printed on success (warnings) is shown, as the CLI
    # shows it, rather than swallowed (tvm_ffi hides it unless
    # TVM_FFI_CPP_EXTENSION_LOG_BUILD is set). A cache hit runs no command.
    printed = "".join(c.get("output") or "" for c in result.get("commands", []))
    if printed:
        sys.stderr.write(printed)
    _warn(result)
    artifact = result.get("output") or result["path"]
    if artifact.startswith(call_dir + os.sep):
        return _Built(artifact, call_dir)  # not stored in the cache: ours to remove
    _remove_tree(call_dir)
    return _Built(artifact, None)


def _base_manifest(
    caller: str,
    name: str,
    extra_cflags: Sequence[str] | None,
    extra_cuda_cflags: Sequence[str] | None,
    extra_ldflags: Sequence[str] | None,
    extra_include_paths: Sequence[str] | None,
    backend: str | None,
    output: str | None,
) -> tuple[dict[str, Any], str | None]:
    _check_backend(backend)
    emit, output_name = _output_kind(output)
    manifest: dict[str, Any] = {"name": name, "emit": emit}
    manifest["extra_cflags"] = _flag_list(extra_cflags, caller, "extra_cflags")
    manifest["extra_cuda_cflags"] = _flag_list(extra_cuda_cflags, caller, "extra_cuda_cflags")
    manifest["extra_ldflags"] = _flag_list(extra_ldflags, caller, "extra_ldflags")
    include_paths = _list_argument(extra_include_paths, caller, "extra_include_paths", paths=True)
    manifest["extra_include_paths"] = [
        _existing(caller, "extra_include_paths", i, p, directory=True) for i, p in enumerate(include_paths)
    ]
    return manifest, output_name


# build_directory= keeps tvm_ffi's contract (the user's folder, the same file
# name), so a rebuilt module there keeps its path, and the dynamic loader
# hands back the library it already mapped for that path: the old code. The
# cache's paths name one artifact each and never need this (docs/python.md,
# "Edit and reload"). Path -> (device, inode, size, mtime) when first loaded.
_first_loaded: dict[str, tuple[int, int, int, int]] = {}
_warned_stale: set[str] = set()


def _note_fixed_path_load(path: str) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    stamp = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    first = _first_loaded.setdefault(path, stamp)
    if first != stamp and path not in _warned_stale:
        _warned_stale.add(path)
        import warnings  # noqa: PLC0415

        warnings.warn(
            f"tvmffi_jit: {path} changed since this process first loaded it; with build_directory= the "
            "module keeps its path, and the dynamic loader returns the library it already mapped there, "
            "so this process still runs the old code (as tvm_ffi.cpp does). Leave out build_directory= "
            "(each cached build has a path of its own) or restart the process to run the new code.",
            RuntimeWarning,
            stacklevel=3,
        )


def _load_built(built: _Built, keep_module_alive: bool, fixed_path: bool = False) -> Module:
    from tvm_ffi import load_module  # noqa: PLC0415 - the expensive import, only to load

    if fixed_path:
        _note_fixed_path_load(built.path)
    try:
        return load_module(built.path, keep_module_alive=keep_module_alive)
    finally:
        # A module the cache could not store was built in our private folder:
        # once loaded (dlopen keeps the mapping) it is not needed on disk.
        if built.private_dir is not None:
            _remove_tree(built.private_dir)


# ---------------------------------------------------------------------------
# The public functions: signatures identical to tvm_ffi.cpp's.


def build_inline(  # noqa: PLR0913
    name: str,
    *,
    cpp_sources: Sequence[str] | str | None = None,
    cuda_sources: Sequence[str] | str | None = None,
    functions: Mapping[str, str] | Sequence[str] | str | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    embed_cubin: Mapping[str, bytes] | None = None,
    backend: str | None = None,
    output: str | None = None,
) -> str:
    """Build a TVM FFI module (or, with ``output="x.o"``, an object) from inline C++/CUDA source.

    Same parameters and result as ``tvm_ffi.cpp.build_inline``: ``cpp_sources``
    and ``cuda_sources`` are a string or a list of strings (joined with
    newlines); ``functions`` is a name, a list of names, or a mapping name ->
    docstring, exported from the C++ source if there is one, else from the CUDA
    source; ``extra_*`` flags go after the defaults; ``embed_cubin`` maps a
    ``TVM_FFI_EMBED_CUBIN(name)`` name to cubin (or fatbin) bytes. Returns the
    absolute path of the artifact.

    Without ``build_directory`` the result comes from tvmffi-jit's cache
    (shared with the command line; a hit spawns no compiler). With it, the
    module is built in that directory and returned from it.
    """
    return _build_inline(
        "build_inline", name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags, extra_ldflags,
        extra_include_paths, build_directory, embed_cubin, backend, output,
    ).path


def _build_inline(  # noqa: PLR0913
    caller, name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags, extra_ldflags,
    extra_include_paths, build_directory, embed_cubin, backend, output,
) -> _Built:
    _check_name(caller, name)
    cpp_list = _str_seq2list(cpp_sources, caller, "cpp_sources")
    cuda_list = _str_seq2list(cuda_sources, caller, "cuda_sources")
    manifest, output_name = _base_manifest(
        caller, name, extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths, backend, output
    )
    # tvm_ffi joins the pieces with "\n" and counts a side as present when
    # the list is non-empty (even [""]); the tool does the same with a list.
    if cpp_list:
        manifest["cpp_sources"] = ["\n".join(cpp_list)]
    if cuda_list:
        manifest["cuda_sources"] = ["\n".join(cuda_list)]
    function_map = _function_map(functions, caller)
    if function_map:
        manifest["functions"] = function_map
    _resolve_backend(manifest, backend, bool(cuda_list))
    if embed_cubin is not None and not isinstance(embed_cubin, Mapping):
        raise TypeError(f"{caller}(): embed_cubin must be a mapping of name to bytes, not {_type_name(embed_cubin)}")
    for cubin_name, data in (embed_cubin or {}).items():
        if not isinstance(cubin_name, str) or not _is_c_identifier(cubin_name):
            raise ValueError(f"{caller}(): embed_cubin key {cubin_name!r} is not {_C_IDENTIFIER}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"{caller}(): embed_cubin[{cubin_name!r}] must be bytes, not {_type_name(data)}")
    if not embed_cubin:
        return _run_build(manifest, build_directory, output_name)
    # The tool embeds files; the bytes go to files named after their key, in
    # the build directory (as tvm_ffi writes <name>.cubin there) or in a
    # private temp folder removed after the build. The cache keys embedded
    # binaries by content, so the folder does not matter for hits.
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    if build_directory is not None:
        folder, temp = _resolve(build_directory), None
        os.makedirs(folder, exist_ok=True)
    else:
        folder = temp = tempfile.mkdtemp(prefix="tvmffi-jit-embed-")
    try:
        manifest["embed_cubin"] = {}
        for cubin_name, data in embed_cubin.items():
            path = os.path.join(folder, f"{cubin_name}.cubin")
            _write_if_changed(path, bytes(data))
            manifest["embed_cubin"][cubin_name] = path
        return _run_build(manifest, build_directory, output_name)
    finally:
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


def load_inline(  # noqa: PLR0913
    name: str,
    *,
    cpp_sources: Sequence[str] | str | None = None,
    cuda_sources: Sequence[str] | str | None = None,
    functions: Mapping[str, str] | Sequence[str] | str | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    embed_cubin: Mapping[str, bytes] | None = None,
    keep_module_alive: bool = True,
    backend: str | None = None,
) -> Module:
    """:func:`build_inline`, then ``tvm_ffi.load_module(path, keep_module_alive)``."""
    built = _build_inline(
        "load_inline", name, cpp_sources, cuda_sources, functions, extra_cflags, extra_cuda_cflags, extra_ldflags,
        extra_include_paths, build_directory, embed_cubin, backend, None,
    )
    return _load_built(built, keep_module_alive, fixed_path=build_directory is not None)


def build(  # noqa: PLR0913
    name: str,
    *,
    sources: Sequence[str] | str | None = None,
    cpp_files: Sequence[str] | str | None = None,
    cuda_files: Sequence[str] | str | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    backend: str | None = None,
    output: str | None = None,
) -> str:
    """Build a TVM FFI module (or, with ``output="x.o"``, an object) from source files.

    Same parameters and result as ``tvm_ffi.cpp.build``: ``sources`` (and its
    aliases ``cpp_files``, ``cuda_files``) are ``.c``, ``.cc``/``.cpp``/``.cxx``,
    ``.cu`` or ``.o`` files, relative to the current directory; nothing is
    exported for you (use ``TVM_FFI_DLL_EXPORT_TYPED_FUNC`` in the sources).
    Returns the absolute path of the artifact.
    """
    return _build(
        "build", name, sources, cpp_files, cuda_files, extra_cflags, extra_cuda_cflags, extra_ldflags,
        extra_include_paths, build_directory, backend, output,
    ).path


def _build(  # noqa: PLR0913
    caller, name, sources, cpp_files, cuda_files, extra_cflags, extra_cuda_cflags, extra_ldflags,
    extra_include_paths, build_directory, backend, output,
) -> _Built:
    _check_name(caller, name)
    merged = []
    for arg, value in (("sources", sources), ("cpp_files", cpp_files), ("cuda_files", cuda_files)):
        given = _str_seq2list(value, caller, arg, paths=True)
        merged += [_existing(caller, arg, i, p, directory=False) for i, p in enumerate(given)]
    if not merged:
        raise ValueError(f"{caller}({name!r}): sources must be provided (sources=, cpp_files= or cuda_files=)")
    manifest, output_name = _base_manifest(
        caller, name, extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths, backend, output
    )
    # tvm_ffi compiles the files in sorted order of their resolved paths
    # (which decides the object numbering); the tool keeps the given order.
    manifest["sources"] = sorted(merged)
    gpu_files = any(os.path.splitext(p)[1].lower() in (".cu", ".hip") for p in manifest["sources"])
    _resolve_backend(manifest, backend, gpu_files)
    return _run_build(manifest, build_directory, output_name)


def load(  # noqa: PLR0913
    name: str,
    *,
    sources: Sequence[str] | str | None = None,
    cpp_files: Sequence[str] | str | None = None,
    cuda_files: Sequence[str] | str | None = None,
    extra_cflags: Sequence[str] | None = None,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    keep_module_alive: bool = True,
    backend: str | None = None,
) -> Module:
    """:func:`build`, then ``tvm_ffi.load_module(path, keep_module_alive)``."""
    built = _build(
        "load", name, sources, cpp_files, cuda_files, extra_cflags, extra_cuda_cflags, extra_ldflags,
        extra_include_paths, build_directory, backend, None,
    )
    return _load_built(built, keep_module_alive, fixed_path=build_directory is not None)


# ---------------------------------------------------------------------------
# build_many: several modules as one batch of the tool (docs/python.md,
# "Several modules at once").

# A description's keys: the manifest's (share/tvmffi-jit/manifest.schema.json,
# whose keys that build() and build_inline() also take are spelled as they
# spell them), and build()'s aliases of sources. test_python_build_many.py
# checks them against the schema.
_DESCRIPTION_KEYS = (
    "name", "sources", "cpp_files", "cuda_files", "cpp_sources", "cuda_sources", "functions",
    "extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths", "system_include_paths",
    "cuda_runtime", "cuda_driver", "cuda_arch", "rocm_arch", "emit", "embed_cubin", "compiler", "kernel_names",
    "cxx_launcher", "cuda_launcher", "backend",
)
# build()'s parameters that a batch decides, as the CLI's batch does (docs/build.md#batch-builds).
_DECIDED_BY_THE_BATCH = {
    "output": "a batch names each artifact after its module and returns its path (the CLI refuses --output in "
    "a batch); for an object file set emit='object'",
    "build_directory": "a batch builds every module in build_many(build_directory=DIR)'s DIR/<name> (as the "
    "CLI's --build-dir does for a batch); pass it to build_many()",
}
_BATCH_CALLER = "build_many"


def _string_or_strings(value: object, where: str) -> str | list[str]:
    """A key the manifest takes as a string or a list of strings (archs, launchers), passed on as given."""
    if isinstance(value, str):
        return value
    return _list_argument(value, _BATCH_CALLER, where)


def _check_bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{_BATCH_CALLER}(): {where} must be True or False, not {_type_name(value)}")
    return value


def _description_manifest(index: int, description: object, embed_dir) -> dict[str, Any]:
    """The manifest of ``modules[index]``, with every path resolved against the
    current directory; TypeError/ValueError naming the index and the key.
    ``embed_dir(name)`` is the folder for the ``embed_cubin`` bytes of module ``name``."""
    caller, here = _BATCH_CALLER, f"modules[{index}]"
    if not isinstance(description, Mapping):
        raise TypeError(
            f"{caller}(): {here} must be a dict describing one module (keys as build()'s and the manifest's), "
            f"not {_type_name(description)}"
        )
    for key in description:
        if not isinstance(key, str):
            raise TypeError(f"{caller}(): {here} has a key {key!r} of type {_type_name(key)}; keys are str")
        if key in _DECIDED_BY_THE_BATCH:
            raise ValueError(f"{caller}(): {here}[{key!r}]: {_DECIDED_BY_THE_BATCH[key]}")
        if key not in _DESCRIPTION_KEYS:
            import difflib  # noqa: PLC0415 - errors only

            close = difflib.get_close_matches(key, _DESCRIPTION_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"{caller}(): {here}[{key!r}]: unknown key{hint}; a description takes {', '.join(_DESCRIPTION_KEYS)}"
            )
    given = {k: v for k, v in description.items() if v is not None}  # None: as if left out, as in build()
    if "name" not in given:
        raise ValueError(f"{caller}(): {here}['name'] is missing: every module needs a name")
    name = given["name"]
    if not isinstance(name, str):
        raise TypeError(f"{caller}(): {here}['name'] must be a str, not {_type_name(name)}")
    if not _is_c_identifier(name):
        raise ValueError(f"{caller}(): {here}['name'] = {name!r} is not {_C_IDENTIFIER}: it names the module's file")

    def where(key: str) -> str:
        return f"{here}[{key!r}]"

    manifest: dict[str, Any] = {"name": name}
    files: list[str] = []
    for key in ("sources", "cpp_files", "cuda_files"):
        listed = _str_seq2list(given.get(key), caller, where(key), paths=True)
        files += [_existing(caller, where(key), i, p, directory=False) for i, p in enumerate(listed)]
    if files:
        manifest["sources"] = sorted(files)  # as build() (and tvm_ffi) order them
    for key in ("cpp_sources", "cuda_sources"):
        pieces = _str_seq2list(given.get(key), caller, where(key))
        if pieces:
            manifest[key] = ["\n".join(pieces)]  # as build_inline() joins them
    if not files and "cpp_sources" not in manifest and "cuda_sources" not in manifest:
        raise ValueError(f"{caller}(): {here} ({name!r}) has no source: give sources (or cpp_files, cuda_files), "
                         "cpp_sources or cuda_sources")
    if "functions" in given:
        manifest["functions"] = _function_map(given["functions"], caller, where("functions"))
    for key in ("extra_cflags", "extra_cuda_cflags", "extra_ldflags"):
        if key in given:
            manifest[key] = _flag_list(given[key], caller, where(key))
    for key in ("extra_include_paths", "system_include_paths"):
        if key in given:
            listed = _list_argument(given[key], caller, where(key), paths=True)
            manifest[key] = [_existing(caller, where(key), i, p, directory=True) for i, p in enumerate(listed)]
    for key in ("cuda_runtime", "cuda_driver"):
        if key in given:
            manifest[key] = _check_bool(given[key], where(key))
    for key in ("cuda_arch", "rocm_arch", "cxx_launcher", "cuda_launcher"):
        if key in given:
            manifest[key] = _string_or_strings(given[key], where(key))
    for key in ("emit", "compiler"):
        if key in given:
            if not isinstance(given[key], str):
                raise TypeError(f"{caller}(): {where(key)} must be a str, not {_type_name(given[key])}")
            manifest[key] = given[key]
    if "kernel_names" in given:
        manifest["kernel_names"] = _list_argument(given["kernel_names"], caller, where("kernel_names"))
    if "embed_cubin" in given:
        manifest["embed_cubin"] = _embed_cubin_paths(given["embed_cubin"], where("embed_cubin"), lambda: embed_dir(name))
    backend = given.get("backend")
    if backend is not None and backend not in ("cuda", "hip"):
        raise ValueError(f"{caller}(): {where('backend')} = {backend!r}: expected 'cuda' or 'hip'")
    gpu_files = any(os.path.splitext(p)[1].lower() in (".cu", ".hip") for p in files)
    _resolve_backend(manifest, backend, gpu_files or "cuda_sources" in manifest)
    return manifest


def _embed_cubin_paths(embed: object, where: str, folder) -> dict[str, str]:
    """``embed_cubin``: name -> bytes (written to ``folder()``, as build_inline() does) or a path."""
    caller = _BATCH_CALLER
    if not isinstance(embed, Mapping):
        raise TypeError(f"{caller}(): {where} must be a dict of name to bytes or a file path, not {_type_name(embed)}")
    out: dict[str, str] = {}
    for cubin_name, data in embed.items():
        if not isinstance(cubin_name, str) or not _is_c_identifier(cubin_name):
            raise ValueError(f"{caller}(): {where} key {cubin_name!r} is not {_C_IDENTIFIER}")
        if isinstance(data, (bytes, bytearray, memoryview)):
            path = os.path.join(folder(), f"{cubin_name}.cubin")
            _write_if_changed(path, bytes(data))
            out[cubin_name] = path
        elif isinstance(data, (str, os.PathLike)):
            resolved = _resolve(data)
            if not os.path.isfile(resolved):
                raise FileNotFoundError(f"{caller}(): {where}[{cubin_name!r}] = {os.fspath(data)!r}: no such file")
            out[cubin_name] = resolved
        else:
            raise TypeError(f"{caller}(): {where}[{cubin_name!r}] must be bytes or a file path, not {_type_name(data)}")
    return out


def _write_batch_manifest(manifests: list[dict[str, Any]]) -> str:
    """A modules manifest holding every module inline, in the folder build()
    writes its manifests to, so build_many() and build() share cache entries.
    Removed by the caller."""
    return _write_new_manifest_file(json.dumps({"modules": manifests}).encode("utf-8"), "-batch.json")


def _batch_terms(text: str, manifest_path: str) -> str:
    """The tool's words about the batch's temp manifest in the caller's:
    ``/tmp/x.json: /modules/2/sources/0: ...`` and ``/tmp/x.json#/modules/2``
    read ``modules[2]['sources'][0]: ...`` and ``modules[2]``."""
    if manifest_path not in text:
        return text
    import re  # noqa: PLC0415 - errors only

    def pointer(match: re.Match[str]) -> str:
        out = f"modules[{match.group(1)}]"
        for token in filter(None, (match.group(2) or "").split("/")):
            out += f"[{token}]" if token.isdigit() else f"[{token!r}]"
        return out

    path = re.escape(manifest_path)
    text = re.sub(path + r": /modules/(\d+)((?:/[^:\s/]+)*): ", lambda m: pointer(m) + ": ", text)
    text = re.sub(path + r"#/modules/(\d+)()", pointer, text)
    return text.replace(manifest_path, "the descriptions")


def build_many(  # noqa: PLR0913, PLR0912
    modules: Sequence[Mapping[str, Any]],
    *,
    build_directory: str | os.PathLike[str] | None = None,
    keep_going: bool = False,
    jobs: int | None = None,
    split_compile: str | int | None = None,
    job_trace: str | os.PathLike[str] | None = None,
) -> list[str | BuildError]:
    """Build several modules as one batch: one run of ``tvmffi-jit build`` with
    one job pool, the cost log and one summary (docs/build.md#batch-builds).

    ``modules`` is a list of dicts, one per module, with the keys of a
    manifest (docs/manifest.md) spelled as :func:`build` and
    :func:`build_inline` spell theirs: ``name`` (required, distinct),
    ``sources``/``cpp_files``/``cuda_files`` (relative to the current
    directory), ``cpp_sources``, ``cuda_sources``, ``functions``,
    ``extra_cflags``, ``extra_cuda_cflags``, ``extra_ldflags``,
    ``extra_include_paths``, ``system_include_paths``, ``cuda_runtime``,
    ``cuda_driver``, ``cuda_arch``, ``rocm_arch``, ``emit``, ``embed_cubin``
    (name -> bytes or a path), ``compiler``, ``kernel_names``,
    ``cxx_launcher``, ``cuda_launcher``, ``backend``. Every description is
    checked before anything runs: a bad one raises ``TypeError`` or
    ``ValueError`` naming ``modules[i]`` and the key, and nothing is built.

    ``build_directory``: module ``name`` is built in ``DIR/name``,
    incrementally, without the cache (``--build-dir``). ``keep_going``: a
    module that fails does not stop the others. ``jobs``: parallel jobs
    (default ``$MAX_JOBS``, else one per core). ``split_compile``: ``"off"``
    (the default), ``"auto"`` (nvcc's split passes take the idle job slots)
    or a number of nvcc threads. ``job_trace``: a file for the
    job trace (``.json``: Chrome's trace-event format).

    Returns one entry per module, in order: the artifact's absolute path, or
    (with ``keep_going`` only) the :class:`BuildError` of a module that
    failed. Without ``keep_going`` the first failure is raised, once the
    modules already running have finished. Progress is shown on stderr as
    the CLI shows it.
    """
    caller = _BATCH_CALLER
    if not isinstance(modules, (list, tuple)):
        hint = " (for one module: build_many([description]))" if isinstance(modules, Mapping) else ""
        raise TypeError(f"{caller}(): modules must be a list of module descriptions (dicts), not "
                        f"{_type_name(modules)}{hint}")
    if not isinstance(keep_going, bool):
        raise TypeError(f"{caller}(): keep_going must be True or False, not {_type_name(keep_going)}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0):
        raise ValueError(f"{caller}(): jobs = {jobs!r}: expected a number of jobs, 0 (one per core) or more")
    if split_compile is not None and (isinstance(split_compile, bool) or not isinstance(split_compile, (str, int))):
        raise TypeError(f"{caller}(): split_compile must be 'off', 'auto' or a number, not {_type_name(split_compile)}")
    # Names first: a duplicate is reported before any file is checked or written.
    seen: dict[str, int] = {}
    for i, description in enumerate(modules):
        name = description.get("name") if isinstance(description, Mapping) else None
        if isinstance(name, str):
            if name in seen:
                raise ValueError(
                    f"{caller}(): modules[{i}]['name'] = {name!r} is also modules[{seen[name]}]'s: names identify a "
                    "batch's artifacts (<name>.so, and DIR/<name> with build_directory); rename one"
                )
            seen[name] = i
    build_dir = _resolve(build_directory) if build_directory is not None else None
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    embed_temp: list[str] = []

    def embed_dir(name: str) -> str:
        # As build_inline(): in the module's build directory, else a temp
        # folder removed after the build (the cache keys cubins by content).
        if build_dir is not None:
            folder = os.path.join(build_dir, name)
            os.makedirs(folder, exist_ok=True)
            return folder
        if not embed_temp:
            embed_temp.append(tempfile.mkdtemp(prefix="tvmffi-jit-embed-"))
        return embed_temp[0]

    try:
        manifests = [_description_manifest(i, d, embed_dir) for i, d in enumerate(modules)]
        if not manifests:
            return []
        return _run_batch(manifests, build_dir, keep_going, jobs, split_compile, job_trace)
    finally:
        for folder in embed_temp:
            shutil.rmtree(folder, ignore_errors=True)


def _run_batch(  # noqa: PLR0913
    manifests: list[dict[str, Any]],
    build_dir: str | None,
    keep_going: bool,
    jobs: int | None,
    split_compile: str | int | None,
    job_trace: str | os.PathLike[str] | None,
) -> list[str | BuildError]:
    argv = ["build", "--json"]  # no -q: the progress lines and the summary are shown
    root = _tvm_ffi_root()
    if root is not None:
        argv += ["--tvm-ffi-root", root]
    if jobs is None and os.environ.get("MAX_JOBS"):
        argv += ["-j", os.environ["MAX_JOBS"]]
    elif jobs is not None:
        argv += ["-j", str(jobs)]
    if keep_going:
        argv.append("--keep-going")
    if split_compile is not None:
        argv += ["--split-compile", str(split_compile)]
    if job_trace is not None:
        argv += ["--job-trace", os.path.abspath(os.fspath(job_trace))]
    if build_dir is not None:
        argv += ["--build-dir", build_dir]
    path = _write_batch_manifest(manifests)
    argv += ["-m", path]
    call_dir = _call_tmpdir()
    try:
        try:
            proc = _binary.run(argv, tmpdir=call_dir, progress=True)
        except BaseException:
            _remove_tree(call_dir)
            raise
        shown = [_binary.find_binary(), *argv]
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{") and '"origin"' in line]
        if len(lines) != len(manifests):
            # The batch did not start (a missing toolchain, an option the tool
            # refused): one failure object, or nothing after a signal.
            _remove_tree(call_dir)
            try:
                error = json.loads(proc.stdout).get("error") or proc.stderr
            except ValueError:
                error = proc.stderr or f"no result (stdout: {proc.stdout[:200]!r})"
            message = _python_words(_batch_terms(error.rstrip(), path))
            raise BuildError(
                f"tvmffi-jit build of the batch ({len(manifests)} modules) failed (exit {proc.returncode}):\n{message}",
                exit_code=proc.returncode or 1,
                argv=shown,
                stderr=proc.stderr,
            )
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
    results: list[str | BuildError] = []
    skipped: list[str] = []
    kept_call_dir = False
    for i, line in enumerate(lines):
        status = line.get("status")
        if status in ("built", "hit"):
            artifact = line["path"]
            kept_call_dir = kept_call_dir or artifact.startswith(call_dir + os.sep)  # not in the cache: ours
            results.append(artifact)
            continue
        name = line.get("name", manifests[i]["name"])
        if status == "skipped":
            skipped.append(name)
            error = "skipped: an earlier module failed (keep_going=True builds the others)"
            code = 1
        else:
            error = _python_words(_batch_terms(str(line.get("error", "")).rstrip(), path))
            code = int(line.get("exit_code") or 1)
        results.append(
            BuildError(
                f"tvmffi-jit build of {name!r} (modules[{i}]) failed (exit {code}):\n{error}",
                exit_code=code,
                argv=shown,
                stderr=proc.stderr,
            )
        )
    if not kept_call_dir:
        _remove_tree(call_dir)
    if not keep_going:
        failed = [r for r, line in zip(results, lines) if line.get("status") == "failed"]
        if failed:
            error = failed[0]
            if skipped:
                error.args = (f"{error.args[0]}\n({len(skipped)} modules not started: {', '.join(skipped)}; "
                              "keep_going=True builds them)",)
            raise error
    return results


def inspect(path: str | os.PathLike[str], *, scan_data: bool = False) -> dict[str, Any]:
    """Return ``tvmffi-jit inspect --json PATH`` parsed (schema: docs/inspect.md).

    Lists the GPU code of a cubin, fatbin, PTX file, static library or host
    ELF (a built module: its exported functions and embedded cubins), offline.
    ``scan_data`` adds ``--scan-data``. An invalid file raises
    :class:`InspectError`.
    """
    argv = ["inspect", "--json"]
    if scan_data:
        argv.append("--scan-data")
    argv += ["--", os.fspath(path)]
    proc = _binary.run(argv)
    report = None
    if proc.stdout.strip():
        try:
            report = json.loads(proc.stdout)
        except ValueError:
            report = None
    if proc.returncode != 0 or report is None:
        raise InspectError(
            f"tvmffi-jit inspect {os.fspath(path)!r} failed (exit {proc.returncode}):\n{proc.stderr.rstrip()}",
            exit_code=proc.returncode,
            report=report,
        )
    return report
