"""The remote cache tier end to end: real redis-server and nginx (WebDAV PUT)
on 127.0.0.1, two cache roots and two checkouts of one project at different
paths. A logging wrapper as CXX counts compiler runs, so "spawns no compiler"
is observed, not inferred from the tool's own JSON.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import remote_servers  # noqa: E402
from counting_compiler import compiles, counting_cxx_env  # noqa: E402

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
BACKENDS = ["redis", "http"]

pytestmark = pytest.mark.skipif(not (shutil.which("redis-server") or os.path.exists("/usr/bin/redis-server"))
                                or not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")),
                                reason="redis-server and nginx come from scripts/setup.sh")


def run(*args, cwd=None, env=None, check=None, timeout=180):
    p = subprocess.run([TOOL, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Project:
    """A module (two C++ files, a header included relatively, one under
    include/ through -I) in a checkout, plus a cache root of its own."""

    def __init__(self, tmp, checkout, root, env):
        self.dir, self.cache, self.env = checkout, root, env

    def build(self, *extra, remote=None, check=0, env=None):
        args = ["build", "-m", self.dir / "manifest.json", "--cache-dir", self.cache, "--json"]
        for r in ([remote] if isinstance(remote, str) else remote or []):
            args += ["--remote", r]
        p = run(*args, *extra, cwd=self.dir, env=env or self.env, check=check)
        if check == 0:
            j = json.loads(p.stdout)
            j["stderr"] = p.stderr
            return j
        return p

    def stats(self):
        return json.loads(run("cache", "stats", "--json", "--cache-dir", self.cache, check=0).stdout)


def result_id(entry):
    """The result id of a module entry (cache/results.h): SHA-256 over
    util::KeyHasher fields (tag NUL length NUL value NUL) of its artifacts and
    its recorded inputs, sorted, paths as the portable form has them."""
    h = hashlib.sha256()

    def field(tag, value):
        v = value if isinstance(value, bytes) else str(value).encode()
        h.update(tag.encode() + b"\0" + str(len(v)).encode() + b"\0" + v + b"\0")

    field("format", "tvmffi-jit result 1")
    field("artifacts", len(entry["artifacts"]))
    for a in entry["artifacts"]:
        field("artifact.file", a["file"])
        field("artifact.sha256", a["sha256"])
    inputs = sorted({(bytes.fromhex(r["path_hex"]) if "path_hex" in r else r["path"].encode(), r["sha256"])
                     for r in entry["headers"]})
    field("inputs", len(inputs))
    for path, digest in inputs:
        field("input.path", path)
        field("input.sha256", digest)
    return h.hexdigest()


def not_costs(requests):
    """nginx's access log lines of requests for entries, not for the team's costs object."""
    return [r for r in requests if "/tvmffi-jit/costs " not in r]


def remote_names(portable_key, rid, sep):
    """A key's result list and one of its results as a server names them (docs/remote.md)."""
    return f"tvmffi-jit{sep}{portable_key}", f"tvmffi-jit{sep}{portable_key}.{rid}"


def make_checkout(d):
    (d / "include").mkdir(parents=True)
    (d / "src").mkdir()
    (d / "include" / "scale.h").write_text("#define SCALE 3\n")
    (d / "src" / "local.h").write_text("#define OFFSET 1\n")
    (d / "src" / "k.cc").write_text(
        '#include <tvm/ffi/function.h>\n#include "scale.h"\n#include "local.h"\n'
        "int64_t k_value(int64_t x) { return x * SCALE + OFFSET; }\n"
        "TVM_FFI_DLL_EXPORT_TYPED_FUNC(k_value, k_value);\n")
    (d / "src" / "other.cc").write_text("int other_value() { return 2; }\n")
    (d / "manifest.json").write_text(json.dumps(
        {"name": "remote_k", "sources": ["src/k.cc", "src/other.cc"], "extra_include_paths": ["include"]}))


def make_two_checkouts(tmp_path):
    """The project checked out at one path and copied to another: (A, B)."""
    a_dir = tmp_path / "home" / "alice" / "proj"
    b_dir = tmp_path / "ci" / "runner-7" / "work" / "checkout"
    make_checkout(a_dir)
    shutil.copytree(a_dir, b_dir)
    return a_dir, b_dir


@pytest.fixture
def world(tmp_path):
    """Checkout A at one path with root A, checkout B (a copy) at another with root B."""
    env, log = counting_cxx_env(tmp_path)
    a_dir, b_dir = make_two_checkouts(tmp_path)

    class W:
        pass

    w = W()
    w.tmp, w.log, w.env = tmp_path, log, env
    w.a = Project(tmp_path, a_dir, tmp_path / "root-a", env)
    w.b = Project(tmp_path, b_dir, tmp_path / "root-b", env)
    return w


def k_value(path, x):
    out = subprocess.run([sys.executable, "-c",
                          "import sys, tvm_ffi; print(tvm_ffi.load_module(sys.argv[1]).k_value(int(sys.argv[2])))",
                          str(path), str(x)], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.parametrize("kind", BACKENDS)
def test_second_checkout_at_another_path_hits_remotely_and_spawns_no_compiler(world, kind):
    with remote_servers.server(kind, world.tmp / kind) as srv:
        a = world.a.build(remote=srv.url)
        assert a["cache"] == "miss" and compiles(world.log) == 2
        assert world.a.stats()["remote_stores"] == 1
        before = compiles(world.log)
        b = world.b.build(remote=srv.url)
        assert b["cache"] == "remote-hit", b["stderr"]
        assert b["remote"] == srv.url
        assert b["commands"] == [] and compiles(world.log) == before  # not one compiler process
        assert b["path"].startswith(str(world.b.cache))
        assert sha256(a["path"]) == sha256(b["path"])
        assert k_value(b["path"], 5) == 16
        s = world.b.stats()
        assert (s["remote_hits"], s["remote_misses"], s["misses"], s["remote_errors"]) == (1, 0, 0, 0)
        assert s["remote_bytes_received"] > 0
        # The adopted entry is an ordinary local entry now: a local hit, no server asked.
        again = world.b.build(remote=srv.url)
        assert again["cache"] == "hit" and world.b.stats()["remote_hits"] == 1
        assert run("cache", "verify", "--cache-dir", world.b.cache).returncode == 0
        portable = json.loads((Path(a["entry_dir"]) / "entry.json").read_text())["portable_key"]
        # The result under its own name, then the key's list naming it; beside them the
        # team's costs (docs/remote.md, "The team's costs").
        if kind == "redis":
            keys = [k for k in srv.keys() if k != "tvmffi-jit:costs"]
            assert len(keys) == 2 and f"tvmffi-jit:{portable}" in keys and len(srv.keys()) == 3
            assert json.loads(srv.get(f"tvmffi-jit:{portable}"))["results"][0] in keys[1]
        else:
            assert len(not_costs(srv.requests("PUT"))) == 2 and len(srv.requests("PUT")) == 3
            assert len(srv.blobs()) == 3


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_header_edit_in_the_second_checkout_misses_and_builds(world, kind):
    with remote_servers.server(kind, world.tmp / kind) as srv:
        world.a.build(remote=srv.url)
        (world.b.dir / "src" / "local.h").write_text("#define OFFSET 100\n")
        before = compiles(world.log)
        b = world.b.build(remote=srv.url)
        assert b["cache"] == "miss" and compiles(world.log) > before
        assert k_value(b["path"], 5) == 115
        s = world.b.stats()
        assert s["remote_hits"] == 0 and s["remote_misses"] == 1 and s["remote_corrupt"] == 0


@pytest.mark.parametrize("kind", BACKENDS)
def test_read_only_fetches_but_never_uploads(world, kind):
    with remote_servers.server(kind, world.tmp / kind) as srv:
        a = world.a.build("--remote-read-only", remote=srv.url)
        assert a["cache"] == "miss"
        env = dict(world.env, TVMFFI_JIT_REMOTE=srv.url, TVMFFI_JIT_REMOTE_READ_ONLY="1")
        world.b.build(env=env)
        if kind == "redis":
            assert srv.dbsize() == 0
        else:
            assert srv.requests("PUT") == [] and srv.blobs() == []
            assert len(not_costs(srv.requests("GET"))) == 2  # both asked (and both read the team's costs)
        assert world.a.stats()["remote_stores"] == 0
        # Filled by a read-write build, a read-only one hits.
        shutil.rmtree(world.a.cache)
        world.a.build(remote=srv.url)
        shutil.rmtree(world.b.cache)
        assert world.b.build(env=env)["cache"] == "remote-hit"


@pytest.mark.parametrize("kind", BACKENDS)
def test_an_unreachable_server_costs_one_connect_timeout_then_builds_locally(world, kind):
    with remote_servers.unresponsive_port() as port:
        url = f"redis://127.0.0.1:{port}" if kind == "redis" else f"http://127.0.0.1:{port}/cache"
        t0 = time.monotonic()
        a = world.a.build(remote=[url, url])  # each server: one attempt, then given up (no upload try)
        elapsed = time.monotonic() - t0
        assert a["cache"] == "miss" and compiles(world.log) == 2
        warnings = [l for l in a["stderr"].splitlines() if "remote cache" in l]
        assert len(warnings) == 2, a["stderr"]
        ms = [float(m) for m in re.findall(r"after (\d+) ms", a["stderr"])]
        # The connect timeout is 100 ms; the warning measures the whole failed attempt (for http
        # also loading libcurl). Loose bound: CI machines are shared and loaded.
        assert ms and max(ms) <= 300, ms
        s = world.a.stats()
        assert s["remote_errors"] == 2 and s["remote_stores"] == 0
        assert elapsed < 60


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_stopped_server_is_a_warning_and_a_local_build(world, kind):
    srv_dir = world.tmp / kind
    with remote_servers.server(kind, srv_dir) as srv:
        url = srv.url
    a = world.a.build(remote=url)
    assert a["cache"] == "miss" and "remote cache" in a["stderr"]
    assert world.a.stats()["remote_errors"] == 1


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_corrupted_blob_is_rebuilt_and_never_published(world, kind):
    with remote_servers.server(kind, world.tmp / kind) as srv:
        a = world.a.build(remote=srv.url)
        portable = json.loads((Path(a["entry_dir"]) / "entry.json").read_text())["portable_key"]
        if kind == "redis":
            (key,) = [k for k in srv.keys() if "." in k]  # the result, not the list
            blob = srv.get(key)
            srv.set(key, blob[: len(blob) // 2])  # truncated upload
        else:
            (path,) = [p for p in srv.blobs() if "." in p.name]
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0xFF
            path.write_bytes(bytes(data))
        before = compiles(world.log)
        b = world.b.build("--remote-read-only", remote=srv.url)
        assert b["cache"] == "miss" and compiles(world.log) > before
        assert "unusable" in b["stderr"]
        s = world.b.stats()
        assert s["remote_corrupt"] == 1 and s["remote_hits"] == 0
        assert sha256(b["path"]) != "" and k_value(b["path"], 1) == 4
        # Nothing of the bad blob is left in root B: one entry (B's own build), staging empty.
        assert run("cache", "verify", "--cache-dir", world.b.cache).returncode == 0
        assert [p.name for p in (world.b.cache / "tmp").iterdir()] == []
        # A read-write build replaces the bad blob; the next root hits.
        shutil.rmtree(world.b.cache)
        assert world.b.build(remote=srv.url)["cache"] == "miss"
        shutil.rmtree(world.a.cache)
        assert world.a.build(remote=srv.url)["cache"] == "remote-hit"


@pytest.mark.parametrize("kind", BACKENDS)
def test_concurrent_uploads_of_one_key_leave_one_valid_blob(world, kind):
    with remote_servers.server(kind, world.tmp / kind) as srv:
        roots = [world.tmp / f"root-{i}" for i in range(4)]

        def one(root):
            return run("build", "-m", world.a.dir / "manifest.json", "--cache-dir", root, "--json",
                       "--remote", srv.url, cwd=world.a.dir, env=world.env)

        with ThreadPoolExecutor(len(roots)) as pool:
            results = list(pool.map(one, roots))
        assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
        digests = {sha256(json.loads(r.stdout)["path"]) for r in results}
        # One result (the same content: the same id) and the key's list; the team's costs beside them.
        if kind == "redis":
            assert srv.dbsize() == 2 + 1
        else:
            assert len(srv.blobs()) == 2 + 1
        b = world.b.build(remote=srv.url)
        assert b["cache"] == "remote-hit" and sha256(b["path"]) in digests


def test_export_import_moves_entries_to_another_checkout_without_a_server(world):
    a = world.a.build()
    blob = world.tmp / "entries.tar.zst"
    out = json.loads(run("cache", "export", blob, "--json", "--cache-dir", world.a.cache, check=0).stdout)
    assert out["exported"] == 1
    listing = subprocess.run(f"zstd -dc {blob} | tar t", shell=True, capture_output=True, text=True)
    if listing.returncode == 0:  # tar and zstd are optional tools here
        assert "tvmffi-jit-blob.json" in listing.stdout and "remote_k.so" in listing.stdout
    imp = json.loads(run("cache", "import", blob, "--json", "--cache-dir", world.b.cache, check=0).stdout)
    assert imp["imported"] == 1
    before = compiles(world.log)
    b = world.b.build()
    assert b["cache"] == "remote-hit" and b["remote"] == "imported" and compiles(world.log) == before
    assert sha256(a["path"]) == sha256(b["path"])
    assert world.b.stats()["imported_hits"] == 1


def test_import_refuses_a_damaged_file_and_keeps_nothing(world):
    world.a.build()
    blob = world.tmp / "entries.tar.zst"
    run("cache", "export", blob, "--cache-dir", world.a.cache, check=0)
    data = blob.read_bytes()
    for bad in (data[: len(data) - 7], data[:100] + bytes([data[100] ^ 1]) + data[101:]):
        blob.write_bytes(bad)
        p = run("cache", "import", blob, "--cache-dir", world.b.cache)
        assert p.returncode == 5 and "corrupt blob" in p.stderr, p.stderr
        assert not (world.b.cache / "imported").exists() or list((world.b.cache / "imported").iterdir()) == []


def test_missing_libcurl_is_exit_4_only_for_an_http_remote(world):
    env = dict(world.env, TVMFFI_JIT_LIBCURL="/nonexistent/libcurl.so.4")
    p = world.a.build(remote="http://127.0.0.1:9/cache", env=env, check=4)
    assert "libcurl" in p.stderr and "TVMFFI_JIT_LIBCURL" in p.stderr
    with remote_servers.server("redis", world.tmp / "redis") as srv:
        assert world.a.build(remote=srv.url, env=env)["cache"] == "miss"


def test_bad_remote_urls_are_usage_errors(world):
    for url in ("ftp://x/y", "redis://host/notanumber", "http://"):
        p = world.a.build(remote=url, check=2)
        assert "remote" in p.stderr
    p = world.a.build("--remote-namespace", "team/a", remote="redis://127.0.0.1:1", check=2)
    assert "namespace" in p.stderr
    p = world.a.build(remote="redis://:hunter2@127.0.0.1:1/0", check=0)  # nothing listens there
    assert "hunter2" not in p["stderr"] and "***@127.0.0.1" in p["stderr"]
