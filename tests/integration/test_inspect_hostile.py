"""`tvmffi-jit inspect` on hostile input (issue #11): a FIFO, decompression
bombs, huge entry/section/symbol counts, overlapping sections and blobs,
fatbin lookalikes, archives sharing one long name. Each is refused (exit 3,
the limit named in the error) or listed (exit 0); none may hang. Wall time
and memory are the benchmark's business (bench/hostile/run.sh), not these
tests': the timeout here only keeps a regression from hanging the suite."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile_inputs  # noqa: E402

BIN = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
CASES = hostile_inputs.cases()


def inspect(*args, timeout=120):
    p = subprocess.run([BIN, "inspect", "--json", "-j2", *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, (json.loads(p.stdout) if p.stdout else None), p.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input_is_refused_or_listed_with_the_limit_named(tmp_path, name):
    data, args, code, expect = CASES[name]
    path = tmp_path / name
    path.write_bytes(data)
    rc, doc, err = inspect(*args, str(path))
    assert rc == code, err
    f = doc["files"][0]
    if code == 0:
        assert f["error"] is None
        assert len(f["entries"]) == expect
    else:
        assert expect in f["error"], f["error"]
        assert f"tvmffi-jit: {path}: " in err


def test_a_fifo_is_not_a_regular_file_and_does_not_block(tmp_path):
    fifo = tmp_path / "k.fatbin"
    os.mkfifo(fifo)
    good = tmp_path / "empty.fatbin"
    good.write_bytes(hostile_inputs.fatbin([hostile_inputs.fatbin_entry(0x40, b"")]))
    rc, doc, err = inspect(str(fifo), str(good), timeout=30)  # used to wait for a writer forever
    assert rc == 3
    assert doc["files"][0]["error"] == f"cannot open {fifo}: not a regular file (a FIFO)"
    assert doc["files"][1]["error"] is None  # the other files are still inspected
    assert f"tvmffi-jit: {fifo}: cannot open {fifo}: not a regular file (a FIFO)" in err


def test_a_directory_is_not_a_regular_file(tmp_path):
    rc, doc, _ = inspect(str(tmp_path))
    assert rc == 3
    assert doc["files"][0]["error"] == f"cannot open {tmp_path}: not a regular file (a directory)"
