"""Signed remote entries and the blob rules that hold whatever the keys
(docs/remote.md, "Trust"), against real redis-server and nginx (WebDAV) on
127.0.0.1. The attacker is anyone who can write to the server: they plant
self-consistent blobs (every SHA-256 right) under the victim's key, built here
by a small ustar + zstd writer of the test's own, so nothing of the tool's
writer is trusted to produce the attack.
"""

import base64
import hashlib
import json
import os
import shutil
import stat
import struct
import sys
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import remote_servers  # noqa: E402
from counting_compiler import compiles, counting_cxx_env  # noqa: E402
from test_remote import (  # noqa: E402
    BACKENDS, Project, k_value, make_two_checkouts, remote_names, result_id, run, sha256,
)

pytestmark = pytest.mark.skipif(not (shutil.which("redis-server") or os.path.exists("/usr/bin/redis-server"))
                                or not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")),
                                reason="redis-server and nginx come from scripts/setup.sh")

# ---- a blob writer of the test's own (the attacker's) -------------------------

def ustar(dir_name, name, data):
    h = bytearray(512)
    h[0:len(name)] = name.encode()
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = b"%011o\0" % len(data)
    h[136:148] = b"%011o\0" % 0
    h[156] = ord("0")
    h[257:263] = b"ustar\0"
    h[263:265] = b"00"
    h[345:345 + len(dir_name)] = dir_name.encode()
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h) + data + b"\0" * ((512 - len(data) % 512) % 512)


def zstd_raw_frame(data):
    """One zstd frame of raw (stored) blocks of at most 128 KiB."""
    out = bytearray(struct.pack("<IB", 0xFD2FB528, 0xE0) + struct.pack("<Q", len(data)))
    pos = 0
    while True:
        chunk = data[pos:pos + (128 << 10)]
        pos += len(chunk)
        last = pos >= len(data)
        out += struct.pack("<I", (1 if last else 0) | (len(chunk) << 3))[:3] + chunk
        if last:
            return bytes(out)


def make_blob(dir_name, key, files):
    """files: [(name, bytes)], entry.json first."""
    manifest = {"format": "tvmffi-jit-blob", "version": 1, "entries": [{
        "dir": dir_name, "key": key,
        "files": [{"name": n, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in files]}]}
    tar = ustar("", "tvmffi-jit-blob.json", json.dumps(manifest).encode())
    for n, d in files:
        tar += ustar(dir_name, n, d)
    return zstd_raw_frame(tar + b"\0" * 1024)


def portable_entry(entry_dir, base):
    """The portable form of a local entry.json, as an uploader would send it."""
    e = json.loads((Path(entry_dir) / "entry.json").read_text())
    e["key"] = e["portable_key"]
    e.pop("base_dir")
    for h in e["headers"]:
        h.pop("stat", None)
        if h["path"].startswith(str(base) + "/"):
            h["path"] = h["path"][len(str(base)) + 1:]
        # Shadows under the base travel relative too, as the tool's own uploads do.
        h["shadows"] = [x[len(str(base)) + 1:] if isinstance(x, str) and x.startswith(str(base) + "/") else x
                        for x in h.get("shadows", [])]
    return e


def plant(srv, kind, portable_key, blob, rid):
    """What a writer to the server can do: put any bytes under any key (the
    result under its id, and the key's list naming it)."""
    listing = json.dumps({"format": "tvmffi-jit results 1", "key": portable_key, "results": [rid]}).encode()
    list_name, result_name = remote_names(portable_key, rid, ":" if kind == "redis" else "/")
    for name, data in ((result_name, blob), (list_name, listing)):
        if kind == "redis":
            srv.set(name, data)
        else:
            req = urllib.request.Request(f"{srv.url}/{name}", data=data, method="PUT")
            urllib.request.urlopen(req, timeout=10).close()


def forge(victim, artifact, *, extra_files=(), edit=None):
    """A self-consistent blob for the victim's entry with the attacker's artifact."""
    e = portable_entry(victim["entry_dir"], victim["base"])
    e["artifacts"] = [{"file": "remote_k.so", "size": len(artifact), "sha256": hashlib.sha256(artifact).hexdigest()}]
    if edit:
        edit(e)
    files = [("entry.json", json.dumps(e).encode()), ("remote_k.so", artifact), *extra_files]
    rid = result_id(e)
    return e["portable_key"], make_blob(f"{e['portable_key'][:16]}.{rid[:16]}", e["portable_key"], files), rid


# ---- fixtures -------------------------------------------------------------------

@pytest.fixture
def world(tmp_path):
    env, log = counting_cxx_env(tmp_path)
    a_dir, b_dir = make_two_checkouts(tmp_path)
    keys = tmp_path / "keys"
    keys.mkdir()
    attacker_keys = tmp_path / "attacker"
    attacker_keys.mkdir()
    # Not checked here: the tests of the blob rules need no key (and run against older binaries).
    run("cache", "keygen", "ci", "--out", keys)
    run("cache", "keygen", "ci", "--out", attacker_keys)  # same name, another key

    class W:
        pass

    w = W()
    w.tmp, w.log, w.env, w.keys, w.attacker_keys = tmp_path, log, env, keys, attacker_keys
    w.a = Project(tmp_path, a_dir, tmp_path / "root-a", env)
    w.b = Project(tmp_path, b_dir, tmp_path / "root-b", env)
    w.trust = ["--remote-trusted-key", keys / "ci.pub"]
    w.sign = ["--remote-sign-key", keys / "ci.sec"]
    return w


def victim_entry(world):
    """A legitimate local build in root A (no server): what the attacker imitates."""
    a = world.a.build()
    return {"entry_dir": a["entry_dir"], "base": world.a.dir, "path": a["path"]}


# ---- trust ---------------------------------------------------------------------

@pytest.mark.parametrize("kind", BACKENDS)
def test_a_forged_entry_is_a_remote_hit_without_trusted_keys_and_an_untrusted_miss_with_them(world, kind):
    victim = victim_entry(world)
    with remote_servers.server(kind, world.tmp / kind) as srv:
        portable, blob, rid = forge(victim, b"\x7fELF attacker's module")
        plant(srv, kind, portable, blob, rid)
        # What docs/remote.md warns about: without trusted keys the forgery is served.
        plain = world.b.build("--remote-read-only", remote=srv.url)
        assert plain["cache"] == "remote-hit"
        assert Path(plain["path"]).read_bytes() == b"\x7fELF attacker's module"
        shutil.rmtree(world.b.cache)
        before = compiles(world.log)
        b = world.b.build("--remote-read-only", *world.trust, remote=srv.url)
        assert b["cache"] == "miss" and compiles(world.log) > before, b["stderr"]
        assert k_value(b["path"], 5) == 16  # the module built here, not the attacker's
        assert b["stderr"].count("not signed") == 1 and "remote untrusted" in b["stderr"]
        s = world.b.stats()
        assert (s["remote_untrusted"], s["remote_hits"], s["remote_corrupt"]) == (1, 0, 0)
        text = run("cache", "stats", "--cache-dir", world.b.cache, check=0).stdout
        assert "remote untrusted 1" in text


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_entry_signed_by_a_trusted_key_is_a_remote_hit_with_no_compile(world, kind):
    with remote_servers.server(kind, world.tmp / kind) as srv:
        a = world.a.build(*world.sign, remote=srv.url)
        assert a["cache"] == "miss" and world.a.stats()["remote_stores"] == 1
        before = compiles(world.log)
        b = world.b.build(*world.trust, remote=srv.url)
        assert b["cache"] == "remote-hit", b["stderr"]
        assert compiles(world.log) == before and b["commands"] == []
        assert sha256(a["path"]) == sha256(b["path"])
        assert world.b.stats()["remote_untrusted"] == 0


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_entry_signed_by_an_impostor_key_of_the_same_name_is_untrusted(world, kind):
    with remote_servers.server(kind, world.tmp / kind) as srv:
        world.a.build("--remote-sign-key", world.attacker_keys / "ci.sec", remote=srv.url)
        before = compiles(world.log)
        b = world.b.build("--remote-read-only", *world.trust, remote=srv.url)
        assert b["cache"] == "miss" and compiles(world.log) > before
        assert "no trusted key verifies its signature" in b["stderr"]
        assert world.b.stats()["remote_untrusted"] == 1


def test_keys_from_the_environment_sign_and_verify_and_the_trusted_list_is_colon_separated(world):
    with remote_servers.server("redis", world.tmp / "redis") as srv:
        run("cache", "keygen", "other", "--out", world.keys, check=0)
        env_a = dict(world.env, TVMFFI_JIT_REMOTE_SIGN_KEY=str(world.keys / "ci.sec"))
        assert world.a.build(remote=srv.url, env=env_a)["cache"] == "miss"
        env_b = dict(world.env, TVMFFI_JIT_REMOTE_TRUSTED_KEYS=f"{world.keys / 'other.pub'}:{world.keys / 'ci.pub'}")
        assert world.b.build(remote=srv.url, env=env_b)["cache"] == "remote-hit"
        # The command line's trusted keys replace the variable's.
        shutil.rmtree(world.b.cache)
        b = world.b.build("--remote-trusted-key", world.keys / "other.pub", remote=srv.url, env=env_b)
        assert b["cache"] == "miss" and world.b.stats()["remote_untrusted"] == 1


def test_bad_key_files_are_exit_2_naming_the_file(world):
    junk = world.tmp / "junk.pub"
    junk.write_text("hello\n")
    for args in (["--remote-trusted-key", junk], ["--remote-trusted-key", world.keys / "ci.sec"],
                 ["--remote-sign-key", world.keys / "ci.pub"], ["--remote-trusted-key", world.tmp / "missing.pub"]):
        p = world.a.build(*args, check=2)
        assert str(args[1]) in p.stderr and "keygen" in p.stderr, p.stderr
        assert json.loads(p.stdout)["exit_code"] == 2  # --json: the failure object, nothing built
    env = dict(world.env, TVMFFI_JIT_REMOTE_TRUSTED_KEYS=str(junk))
    p = world.a.build(env=env, check=2)
    assert str(junk) in p.stderr
    assert not (world.a.cache).exists() or not list(world.a.cache.glob("remote_k_*"))  # nothing built


def test_export_import_signed_and_unsigned_under_trusted_keys(world):
    # A signing export signs only what a build with that key made (docs/remote.md, "Trust").
    world.a.build(*world.sign)
    signed, unsigned = world.tmp / "signed.tar.zst", world.tmp / "unsigned.tar.zst"
    run("cache", "export", signed, "--sign-key", world.keys / "ci.sec", "--cache-dir", world.a.cache, check=0)
    run("cache", "export", unsigned, "--cache-dir", world.a.cache, check=0)
    # Unsigned: imported, but not used under trusted keys.
    run("cache", "import", unsigned, "--cache-dir", world.b.cache, check=0)
    before = compiles(world.log)
    b = world.b.build(*world.trust)
    assert b["cache"] == "miss" and compiles(world.log) > before
    s = world.b.stats()
    assert (s["remote_untrusted"], s["imported_hits"]) == (1, 0)
    assert "imported entry" in b["stderr"] and "not signed" in b["stderr"]
    # Signed: an imported hit with no compile (the import replaces the unsigned one).
    shutil.rmtree(world.b.cache)
    run("cache", "import", signed, "--cache-dir", world.b.cache, check=0)
    before = compiles(world.log)
    b = world.b.build(*world.trust)
    assert b["cache"] == "remote-hit" and b["remote"] == "imported" and compiles(world.log) == before, b["stderr"]
    # The export signing key may come from the environment too.
    env = dict(world.env, TVMFFI_JIT_REMOTE_SIGN_KEY=str(world.keys / "ci.sec"))
    again = world.tmp / "env-signed.tar.zst"
    run("cache", "export", again, "--cache-dir", world.a.cache, env=env, check=0)
    shutil.rmtree(world.b.cache)
    run("cache", "import", again, "--cache-dir", world.b.cache, check=0)
    assert world.b.build(*world.trust)["remote"] == "imported"


def test_keygen_modes_and_refusal_to_overwrite(world):
    out = world.tmp / "k"
    out.mkdir()
    p = run("cache", "keygen", "team.ci-2", "--out", out, check=0)
    sec, pub = out / "team.ci-2.sec", out / "team.ci-2.pub"
    assert p.stdout.split() == [str(sec), str(pub)]
    assert stat.S_IMODE(sec.stat().st_mode) == 0o600 and stat.S_IMODE(pub.stat().st_mode) == 0o644
    name, b64 = pub.read_text().strip().split(":")
    assert name == "team.ci-2" and len(base64.b64decode(b64, validate=True)) == 32
    assert len(base64.b64decode(sec.read_text().strip().split(":")[1], validate=True)) == 64
    before = (sec.read_bytes(), pub.read_bytes())
    p = run("cache", "keygen", "team.ci-2", "--out", out, check=2)
    assert "already exists" in p.stderr and str(sec) in p.stderr
    assert (sec.read_bytes(), pub.read_bytes()) == before
    assert run("cache", "keygen", "bad/name", "--out", out, check=2).stderr
    assert "not a directory" in run("cache", "keygen", "x", "--out", world.tmp / "nope", check=2).stderr


# ---- whatever the keys ------------------------------------------------------------

@pytest.mark.parametrize("kind", BACKENDS)
def test_a_padded_blob_publishes_no_extra_file(world, kind):
    victim = victim_entry(world)
    artifact = Path(victim["path"]).read_bytes()
    with remote_servers.server(kind, world.tmp / kind) as srv:
        portable, blob, rid = forge(victim, artifact, extra_files=[("pad.bin", b"\0" * (1 << 20))])
        plant(srv, kind, portable, blob, rid)
        b = world.b.build("--remote-read-only", remote=srv.url)
        assert b["cache"] == "miss" and "pad.bin" in b["stderr"]
        assert world.b.stats()["remote_corrupt"] == 1
        assert list(world.b.cache.rglob("pad.bin")) == []


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_entry_that_does_not_list_the_artifact_it_would_serve_is_refused(world, kind):
    victim = victim_entry(world)
    artifact = Path(victim["path"]).read_bytes()

    def rename_artifact(e):
        e["artifacts"][0]["file"] = "other.so"

    with remote_servers.server(kind, world.tmp / kind) as srv:
        e = portable_entry(victim["entry_dir"], victim["base"])
        rename_artifact(e)
        e["artifacts"][0].update(size=len(artifact), sha256=hashlib.sha256(artifact).hexdigest())
        key, rid = e["portable_key"], result_id(e)
        plant(srv, kind, key, make_blob(f"{key[:16]}.{rid[:16]}", key,
                                        [("entry.json", json.dumps(e).encode()), ("other.so", artifact)]), rid)
        before = compiles(world.log)
        b = world.b.build("--remote-read-only", remote=srv.url)
        assert b["cache"] == "miss" and compiles(world.log) > before
        assert "does not list remote_k.so" in b["stderr"]
        assert Path(b["path"]).is_file() and k_value(b["path"], 5) == 16


def test_duplicated_header_records_are_merged_into_one(world):
    victim = victim_entry(world)
    artifact = Path(victim["path"]).read_bytes()
    big = world.b.dir / "include" / "big.h"
    with open(big, "wb") as f:  # sparse: costs no disk
        f.truncate(8 << 20)
    digest = hashlib.sha256(b"\0" * (8 << 20)).hexdigest()

    def hundred_copies(e):
        e["headers"] += [{"path": "include/big.h", "size": 8 << 20, "sha256": digest}] * 100

    with remote_servers.server("redis", world.tmp / "redis") as srv:
        portable, blob, rid = forge(victim, artifact, edit=hundred_copies)
        plant(srv, "redis", portable, blob, rid)
        b = world.b.build("--remote-read-only", remote=srv.url)
        assert b["cache"] == "remote-hit", b["stderr"]
        recorded = json.loads((Path(b["entry_dir"]) / "entry.json").read_text())["headers"]
        assert [h["path"] for h in recorded].count(str(big)) == 1


def test_recorded_headers_adding_up_past_the_cap_are_refused(world):
    victim = victim_entry(world)
    artifact = Path(victim["path"]).read_bytes()
    size = 100 << 20
    digest = hashlib.sha256(b"\0" * size).hexdigest()
    for i in range(3):
        with open(world.b.dir / "include" / f"big{i}.h", "wb") as f:
            f.truncate(size)

    def three_big(e):
        e["headers"] += [{"path": f"include/big{i}.h", "size": size, "sha256": digest} for i in range(3)]

    with remote_servers.server("redis", world.tmp / "redis") as srv:
        portable, blob, rid = forge(victim, artifact, edit=three_big)
        plant(srv, "redis", portable, blob, rid)
        b = world.b.build("--remote-read-only", remote=srv.url)
        assert b["cache"] == "miss" and "add up to more than 256 MiB" in b["stderr"], b["stderr"]
        assert world.b.stats()["remote_corrupt"] == 1


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_relative_header_path_leaving_the_base_dir_is_rejected(world, kind):
    victim = victim_entry(world)
    artifact = Path(victim["path"]).read_bytes()
    outside = world.b.dir.parent / "outside.h"  # what ../outside.h reaches from checkout B
    outside.write_text("secret\n")

    def oracle(e):
        e["headers"].append({"path": "../outside.h", "size": 7, "sha256": hashlib.sha256(b"secret\n").hexdigest()})

    with remote_servers.server(kind, world.tmp / kind) as srv:
        portable, blob, rid = forge(victim, artifact, edit=oracle)
        plant(srv, kind, portable, blob, rid)
        b = world.b.build("--remote-read-only", remote=srv.url)
        assert b["cache"] == "miss" and "not a normal absolute path" in b["stderr"], b["stderr"]
        assert world.b.stats()["remote_corrupt"] == 1


def test_a_local_entry_recording_a_dotdot_header_path_is_a_miss(world):
    a = world.a.build()
    ej = Path(a["entry_dir"]) / "entry.json"
    e = json.loads(ej.read_text())
    (world.a.dir / "x.h").write_text("x\n")
    e["headers"].append({"path": f"{world.a.dir}/include/../x.h", "size": 2,
                         "sha256": hashlib.sha256(b"x\n").hexdigest()})
    ej.write_text(json.dumps(e))
    again = world.a.build()
    assert again["cache"] == "miss" and "not a normal absolute path" in again["miss_reason"], again
    assert world.a.stats()["corrupt_entries"] == 1
