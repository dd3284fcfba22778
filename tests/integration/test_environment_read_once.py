"""The environment is read in one place (ARCHITECTURE.md): getenv() is called
only by toolchain::process_environment(), which cli::run() asks once per
command; everything below the CLI gets values. These tests read the sources,
so a new getenv() anywhere else fails here, before review.
"""

import os
import re
from pathlib import Path

SOURCE_DIR = Path(os.environ["TVMFFI_JIT_SOURCE_DIR"])

# The one reader of variables, and the one place that reads the whole
# environment block, for what children inherit (not a variable's value).
GETENV_ALLOWED = {"src/toolchain/environment.cpp"}
ENVIRON_ALLOWED = {"src/util/process.cpp"}

GETENV = re.compile(r"\b(?:secure_)?getenv\s*\(")
ENVIRON = re.compile(r"\b(?:__)?environ\b")


def code_lines(path):
    """(number, code, line): the code is the line with // comments and string
    literals blanked, so a comment saying "getenv()" does not count."""
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        code = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
        yield number, code.split("//", 1)[0], line


def uses(pattern, allowed):
    found = []
    for top in ("src", "include"):
        for path in sorted((SOURCE_DIR / top).rglob("*")):
            if path.suffix not in (".cpp", ".h", ".hpp", ".cc"):
                continue
            rel = path.relative_to(SOURCE_DIR).as_posix()
            if rel in allowed:
                continue
            found += [f"{rel}:{n}: {line.strip()}" for n, code, line in code_lines(path) if pattern.search(code)]
    return found


def test_getenv_is_called_only_by_toolchain_process_environment():
    found = uses(GETENV, GETENV_ALLOWED)
    assert not found, ("getenv outside toolchain/environment.cpp: read the variable in the CLI "
                       "(cli/environment.h or the build request) and pass its value down:\n" + "\n".join(found))


def test_the_environment_block_is_read_only_where_children_are_spawned():
    found = uses(ENVIRON, ENVIRON_ALLOWED)
    assert not found, ("environ outside util/process.cpp: children's environment is built there "
                       "(util::run_process, util::child_environment_bytes):\n" + "\n".join(found))


def test_the_one_reader_is_still_there():
    # The allowlist names a real reader: a rename must update this test, not hollow it out.
    text = (SOURCE_DIR / "src/toolchain/environment.cpp").read_text()
    assert GETENV.search(text) and "process_environment" in text
