"""Trust at every door (docs/remote.md, "Trust"): every entry and object
records its provenance, and the policy of the build that finds it decides,
whichever tier it is found in; a signing build and a signing export sign only
what the key's own builds made; --force replaces; an empty trusted-key list
and a secret key others can read fail closed.

The attacker writes to the team's server (the forged blobs of
test_remote_trust.py) or to a CI runner's shared cache root, as a
pull-request job does. Their module is a real one that returns 1337.
"""

import hashlib
import http.server
import json
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import remote_servers  # noqa: E402
from counting_compiler import compiles  # noqa: E402
from test_remote import Project, k_value, run  # noqa: E402
from test_remote_trust import forge, plant, victim_entry, world  # noqa: E402,F401 (fixture)

needs_redis = pytest.mark.skipif(not (shutil.which("redis-server") or os.path.exists("/usr/bin/redis-server")),
                                 reason="redis-server comes from scripts/setup.sh")



def failed_with_2(p):
    """Exit 2, and stdout holds at most build --json's failure object (docs/build.md)."""
    return p.returncode == 2 and (p.stdout == "" or json.loads(p.stdout)["exit_code"] == 2)

def evil_build(world):
    """The attacker's own build of the project, with k_value returning 1337."""
    d = world.tmp / "evil" / "proj"
    shutil.copytree(world.a.dir, d)
    (d / "src" / "k.cc").write_text(
        '#include <tvm/ffi/function.h>\n'
        "int64_t k_value(int64_t x) { return 1337; }\n"
        "TVM_FFI_DLL_EXPORT_TYPED_FUNC(k_value, k_value);\n")
    p = Project(world.tmp, d, world.tmp / "evil-root", world.env)
    return p, p.build()


def object_entry(root, source_suffix):
    for meta in Path(root, "objects").glob("*/*/entry.json"):
        if json.loads(meta.read_text())["name"].endswith(source_suffix):
            return meta.parent
    raise AssertionError(f"no object of {source_suffix} in {root}")


def evil_object(world):
    """The attacker's compiled k.cc (after evil_build)."""
    d = object_entry(world.tmp / "evil-root", "k.cc")
    meta = json.loads((d / "entry.json").read_text())
    return (d / meta["artifacts"][0]["file"]).read_bytes()


def replace_artifact(entry_dir, data):
    """What anyone who can write the root can do: a self-consistent entry with other bytes."""
    meta_path = Path(entry_dir) / "entry.json"
    meta = json.loads(meta_path.read_text())
    art = meta["artifacts"][0]
    (Path(entry_dir) / art["file"]).write_bytes(data)
    art.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    meta_path.write_text(json.dumps(meta))


def plant_forgery(world, srv):
    """What a writer to the Redis server `srv` does: the attacker's module (k_value returns 1337)
    as a self-consistent result of the victim's key (built in root A). (portable key, blob, id)."""
    victim = victim_entry(world)
    _, evil = evil_build(world)
    portable, blob, rid = forge(victim, Path(evil["path"]).read_bytes())
    plant(srv, "redis", portable, blob, rid)
    return portable, blob, rid


@needs_redis
def test_an_entry_adopted_without_trusted_keys_is_not_a_local_hit_for_a_build_with_them(world):
    with remote_servers.server("redis", world.tmp / "redis") as srv:
        portable, blob, rid = plant_forgery(world, srv)
        # A build without keys adopts the forgery into root B (what the docs warn about).
        plain = world.b.build("--remote-read-only", remote=srv.url)
        assert plain["cache"] == "remote-hit" and k_value(plain["path"], 5) == 1337
    meta = json.loads((Path(plain["entry_dir"]) / "entry.json").read_text())
    assert meta["provenance"]["origin"] == "adopted" and meta["provenance"]["source"].startswith("redis://")
    # `cache verify` with the trusted key names it; without keys it is self-consistent.
    run("cache", "verify", "--cache-dir", world.b.cache, check=0)
    v = run("cache", "verify", "--json", "--trusted-key", world.keys / "ci.pub", "--cache-dir", world.b.cache, check=3)
    bad = json.loads(v.stdout)["bad"]
    assert [b["dir"] for b in bad] == [plain["entry_dir"]] and "not signed" in bad[0]["problem"], bad
    # A later build in the same root that trusts only CI's key: not a local hit, built here, replaced.
    for trust in (world.trust, []):
        env = dict(world.env, TVMFFI_JIT_REMOTE_TRUSTED_KEYS=str(world.keys / "ci.pub")) if not trust else None
        b = world.b.build(*trust, env=env)
        assert b["cache"] == "miss", b["stderr"]
        assert "not signed" in b["stderr"] and "remote untrusted" in b["stderr"]
        assert k_value(b["path"], 5) == 16
        again = world.b.build(*trust, env=env)
        assert again["cache"] == "hit" and k_value(again["path"], 5) == 16
        # The built entry replaced the adopted one; adopt the forgery again for the next round.
        assert json.loads((Path(again["entry_dir"]) / "entry.json").read_text())["provenance"]["origin"] == "built"
        shutil.rmtree(Path(again["entry_dir"]).parent)  # the key's directory: the refused forgery is a result of it too
        with remote_servers.server("redis", world.tmp / f"redis-{len(trust)}") as srv:
            plant(srv, "redis", portable, blob, rid)
            assert world.b.build("--remote-read-only", remote=srv.url)["cache"] == "remote-hit"
    # A signed adoption stays a local hit under the keys (no compile, verified again).
    shutil.rmtree(world.b.cache)
    with remote_servers.server("redis", world.tmp / "redis3") as srv:
        world.a.build("--force", *world.sign, remote=srv.url)
        assert world.b.build(*world.trust, remote=srv.url)["cache"] == "remote-hit"
        before = compiles(world.log)
        hit = world.b.build(*world.trust)
        assert hit["cache"] == "hit" and compiles(world.log) == before and k_value(hit["path"], 5) == 16


@needs_redis
def test_a_signing_export_and_upload_sign_only_what_the_keys_builds_made(world):
    victim = victim_entry(world)  # built in root A without the key
    out = world.tmp / "signed.tar.zst"
    p = run("cache", "export", out, "--sign-key", world.keys / "ci.sec", "--cache-dir", world.a.cache, check=2)
    assert "does not carry the signature of ci" in p.stderr and "nothing to export" in p.stderr
    assert not out.exists()
    # An adopted forgery in the root is not signed either.
    _, evil = evil_build(world)
    with remote_servers.server("redis", world.tmp / "redis") as srv:
        portable, blob, rid = forge(victim, Path(evil["path"]).read_bytes())
        plant(srv, "redis", portable, blob, rid)
        ok = world.b.build("--remote-read-only", remote=srv.url)
        assert ok["cache"] == "remote-hit", ok["stderr"]
    p = run("cache", "export", out, "--sign-key", world.keys / "ci.sec", "--cache-dir", world.b.cache, check=2)
    assert "adopted, not signed by that key" in p.stderr
    # What a build with the key made is exported signed, and trusted by readers.
    world.a.build("--force", *world.sign)
    run("cache", "export", out, "--sign-key", world.keys / "ci.sec", "--cache-dir", world.a.cache, check=0)
    c = Project(world.tmp, world.b.dir, world.tmp / "root-c", world.env)
    run("cache", "import", out, "--cache-dir", c.cache, check=0)
    got = c.build(*world.trust)
    assert got["cache"] == "remote-hit" and got["remote"] == "imported" and k_value(got["path"], 5) == 16


@needs_redis
def test_a_signing_build_does_not_link_an_object_planted_in_a_shared_root(world):
    # A pull-request job (no key) fills the runner's shared root A...
    first = world.a.build()
    _, evil = evil_build(world)
    # ...and plants its own object under the key of the real k.cc.
    replace_artifact(object_entry(world.a.cache, "k.cc"), evil_object(world))
    shutil.rmtree(first["entry_dir"])  # so the main-branch build links
    with remote_servers.server("redis", world.tmp / "redis") as srv:
        before = compiles(world.log)
        main = world.a.build(*world.sign, remote=srv.url)
        assert main["cache"] == "miss" and main["objects_reused"] == 0, main["stderr"]
        assert compiles(world.log) == before + 2
        assert k_value(main["path"], 5) == 16
        # Every reader trusting CI gets CI's module, not the planted one.
        b = world.b.build(*world.trust, remote=srv.url)
        assert b["cache"] == "remote-hit" and k_value(b["path"], 5) == 16
    # The objects it compiled replaced the planted ones and carry its signature:
    # the next signing build links them without compiling.
    meta = json.loads((object_entry(world.a.cache, "k.cc") / "entry.json").read_text())
    assert meta["provenance"]["origin"] == "built" and meta["provenance"]["signatures"][0]["signer"] == "ci"
    (world.a.dir / "src" / "other.cc").write_text("int other_value() { return 3; }\n")
    before = compiles(world.log)
    again = world.a.build(*world.sign)
    assert again["objects_reused"] == 1 and compiles(world.log) == before + 1


@needs_redis
def test_a_forgery_a_keyless_job_adopted_into_a_shared_root_is_not_served_to_the_signing_build(world):
    with remote_servers.server("redis", world.tmp / "redis") as srv:
        plant_forgery(world, srv)
        # A pull-request job (no keys) adopts the forgery into the runner's shared root B.
        pr = world.b.build("--remote-read-only", remote=srv.url)
        assert pr["cache"] == "remote-hit" and k_value(pr["path"], 5) == 1337
    # The main-branch job signs, in the same root: the adopted forgery is not its hit.
    before = compiles(world.log)
    main = world.b.build(*world.sign)
    assert main["cache"] == "miss" and compiles(world.log) > before, main["stderr"]
    assert k_value(main["path"], 5) == 16
    assert "not signed" in main["stderr"] and "remote untrusted" in main["stderr"]
    # What it built carries its key's signature: the next signing build hits it.
    again = world.b.build(*world.sign)
    assert again["cache"] == "hit" and k_value(again["path"], 5) == 16


@needs_redis
def test_a_forged_result_on_a_writable_server_is_not_served_to_a_signing_build_on_a_fresh_root(world):
    with remote_servers.server("redis", world.tmp / "redis") as srv:
        portable, _, rid = plant_forgery(world, srv)
        before = compiles(world.log)
        main = world.b.build(*world.sign, remote=srv.url)
        assert main["cache"] == "miss" and compiles(world.log) > before, main["stderr"]
        assert k_value(main["path"], 5) == 16
        assert "not signed" in main["stderr"]
        s = world.b.stats()
        assert (s["remote_untrusted"], s["remote_hits"]) == (1, 0), s
        # Its own result is uploaded (signed) and listed before the forgery; a reader trusting CI gets it.
        listing = json.loads(srv.get(f"tvmffi-jit:{portable}"))
        assert len(listing["results"]) == 2 and listing["results"][1] == rid, listing
        c = Project(world.tmp, world.b.dir, world.tmp / "root-c", world.env)
        got = c.build(*world.trust, remote=srv.url)
        assert got["cache"] == "remote-hit" and k_value(got["path"], 5) == 16


def test_force_replaces_the_entry_it_rebuilds(world):
    first = world.a.build()
    _, evil = evil_build(world)
    replace_artifact(first["entry_dir"], Path(evil["path"]).read_bytes())
    assert k_value(world.a.build()["path"], 5) == 1337  # a self-consistent tampered entry is a hit
    before = compiles(world.log)
    forced = world.a.build("--force")
    assert forced["cache"] == "miss" and compiles(world.log) == before + 2
    assert k_value(forced["path"], 5) == 16, forced["stderr"]
    after = world.a.build()
    assert after["cache"] == "hit" and k_value(after["path"], 5) == 16
    # The objects are replaced too: a planted object is not the one --force leaves behind.
    k_obj = object_entry(world.a.cache, "k.cc")
    replace_artifact(k_obj, evil_object(world))
    world.a.build("--force")
    (world.a.dir / "src" / "other.cc").write_text("int other_value() { return 3; }\n")
    assert k_value(world.a.build()["path"], 5) == 16


@pytest.mark.parametrize("value", ["", ":", "::"])
def test_an_explicitly_empty_trusted_key_list_is_exit_2_naming_the_variable(world, value):
    env = dict(world.env, TVMFFI_JIT_REMOTE_TRUSTED_KEYS=value)
    p = world.a.build(env=env, check=2)
    assert "TVMFFI_JIT_REMOTE_TRUSTED_KEYS" in p.stderr and failed_with_2(p)
    assert compiles(world.log) == 0
    p = run("cache", "verify", "--cache-dir", world.a.cache, env=env, check=2)
    assert "TVMFFI_JIT_REMOTE_TRUSTED_KEYS" in p.stderr


def test_a_secret_key_file_others_can_read_is_refused_as_ssh_does(world):
    sec = world.keys / "ci.sec"
    os.chmod(sec, 0o644)
    p = world.a.build(*world.sign, check=2)
    assert str(sec) in p.stderr and "chmod 600" in p.stderr and failed_with_2(p)
    p = run("cache", "export", world.tmp / "x.tar.zst", "--sign-key", sec, "--cache-dir", world.a.cache)
    assert p.returncode == 2 and "chmod 600" in p.stderr
    os.chmod(sec, 0o640)
    assert "chmod 600" in world.a.build(*world.sign, check=2).stderr
    os.chmod(sec, 0o600)
    assert world.a.build(*world.sign)["cache"] == "miss"


# ---- secrets and parsing ----------------------------------------------------------

def test_credentials_in_an_s3_url_or_aws_endpoint_url_are_redacted_in_exit_2_messages(world):
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    p = world.a.build(remote=f"s3://AKIAIOSFODNN7EXAMPLE:{secret}@team-cache/kernels", check=2)
    assert secret not in p.stderr and "wJalr" not in p.stderr and "AKIAIOSFODNN7EXAMPLE" not in p.stderr, p.stderr
    assert "s3://***@team-cache" in p.stderr and "AWS_ACCESS_KEY_ID" in p.stderr
    env = dict(world.env, AWS_ENDPOINT_URL=f"http://minio:{secret}@127.0.0.1:9000?x=1")
    p = world.a.build(remote="s3://team-cache", env=env, check=2)
    assert "AWS_ENDPOINT_URL" in p.stderr and secret not in p.stderr and "wJalr" not in p.stderr, p.stderr
    assert compiles(world.log) == 0


@pytest.mark.parametrize("port", ["71915", "6379x", "0", "", "-1", "99999999999"])
def test_a_redis_port_that_is_not_1_to_65535_is_exit_2_at_url_parse(world, port):
    p = world.a.build(remote=f"redis://:hunter2@127.0.0.1:{port}", check=2)
    assert "port" in p.stderr and "hunter2" not in p.stderr and failed_with_2(p), p.stderr
    assert compiles(world.log) == 0


@pytest.mark.parametrize("var", ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"])
def test_a_cr_or_lf_in_an_aws_variable_is_exit_2_naming_it(world, var):
    env = dict(world.env, AWS_ENDPOINT_URL="http://127.0.0.1:1", AWS_ACCESS_KEY_ID="AKIDEXAMPLE",
               AWS_SECRET_ACCESS_KEY="s3cr3t-value", AWS_SESSION_TOKEN="tok-value")
    env[var] = env[var] + "\r\nX-Injected: yes"
    p = world.a.build(remote="s3://team-cache", env=env, check=2)
    assert var in p.stderr and "X-Injected" not in p.stderr and "s3cr3t" not in p.stderr, p.stderr
    assert compiles(world.log) == 0


class _EchoingS3(http.server.BaseHTTPRequestHandler):
    """Refuses every request with an S3 error whose Message echoes the session
    token and a signature, as some servers' InvalidToken answers do."""
    signatures = []

    def answer(self):
        if self.command == "PUT":
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
        token = self.headers.get("x-amz-security-token", "")
        sig = self.headers.get("Authorization", "").split("Signature=")[-1]
        self.signatures.append(sig)
        body = (f"<?xml version='1.0'?><Error><Code>InvalidToken</Code><Message>The token {token} "
                f"with signature {sig} is malformed</Message></Error>").encode()
        self.send_response(400)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = answer

    def log_message(self, *args):
        pass


def test_a_server_message_echoing_the_session_token_or_signature_is_redacted(world):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EchoingS3)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token = "FwoGZXIvYXdzEJr0123456789abcdefTOKEN"
    try:
        env = dict(world.env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{server.server_port}", AWS_ACCESS_KEY_ID="AKIDEXAMPLE",
                   AWS_SECRET_ACCESS_KEY="secret-never-shown", AWS_SESSION_TOKEN=token)
        a = world.a.build(remote="s3://team-cache", env=env)
    finally:
        server.shutdown()
        server.server_close()
    assert a["cache"] == "miss" and "InvalidToken" in a["stderr"] and "with signature ***" in a["stderr"], a["stderr"]
    for text in (a["stderr"], json.dumps(a)):
        assert token not in text and token[:20] not in text
        assert _EchoingS3.signatures and all(sig[:16] not in text for sig in _EchoingS3.signatures), text


@needs_redis
def test_an_adopted_entry_may_not_name_paths_outside_the_base_and_the_toolchain(world):
    victim = victim_entry(world)
    artifact = Path(victim["path"]).read_bytes()
    probe = world.tmp / "home" / "bob" / ".ssh" / "id_ed25519"
    probe.parent.mkdir(parents=True)
    probe.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    record = {"path": str(probe), "size": probe.stat().st_size,
              "sha256": hashlib.sha256(probe.read_bytes()).hexdigest()}
    with remote_servers.server("redis", world.tmp / "redis") as srv:
        for edit in (lambda e: e["headers"].append(dict(record)),
                     lambda e: e["headers"][0].setdefault("shadows", []).append(str(probe.parent / "k.h"))):
            portable, blob, rid = forge(victim, artifact, edit=edit)
            plant(srv, "redis", portable, blob, rid)
            before = compiles(world.log)
            b = world.b.build("--remote-read-only", remote=srv.url)
            assert b["cache"] == "miss" and compiles(world.log) > before, b["stderr"]
            assert "outside the base directory and the toolchain" in b["stderr"]
            shutil.rmtree(world.b.cache)
        # The same blob without the probe is adopted: the rule refuses only what it should.
        portable, blob, rid = forge(victim, artifact)
        plant(srv, "redis", portable, blob, rid)
        ok = world.b.build("--remote-read-only", remote=srv.url)
        assert ok["cache"] == "remote-hit", ok["stderr"]
