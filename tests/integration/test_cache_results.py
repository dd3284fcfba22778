"""Several results per key (docs/cache.md, "Layout"; cache/results.h), end to
end through the binary: switching a header or a source back hits, locally and
from a real Redis and nginx WebDAV server; each result has a path of its own;
a key keeps at most 8; a corrupt result list on a server is a local build;
and the base dir defaults to the top of the git work tree, so the team recipe
of docs/remote.md shares between two checkouts at different paths.

A logging wrapper as CXX counts compiler runs: "hit" is observed, not only
read from the tool's JSON.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import remote_servers  # noqa: E402
from counting_compiler import compiles, counting_cxx_env  # noqa: E402

TOOL = os.environ.get("TVMFFI_JIT_BIN", "tvmffi-jit")
HAVE_SERVERS = bool((shutil.which("redis-server") or os.path.exists("/usr/bin/redis-server"))
                    and (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")))
needs_servers = pytest.mark.skipif(not HAVE_SERVERS, reason="redis-server and nginx come from scripts/setup.sh")


def run(*args, cwd=None, env=None, check=0, timeout=300):
    p = subprocess.run([TOOL, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def value_of(path):
    out = subprocess.run([sys.executable, "-c",
                          "import sys, tvm_ffi; print(tvm_ffi.load_module(sys.argv[1]).value())", str(path)],
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


def make_project(d, git=True):
    """kernels/manifest.json reaching ../include (docs/remote.md's team layout)."""
    (d / "include").mkdir(parents=True)
    (d / "kernels").mkdir()
    (d / "include" / "value.h").write_text("#define VALUE 1\n")
    (d / "kernels" / "k.cc").write_text(
        '#include <tvm/ffi/function.h>\n#include "value.h"\n'
        "int64_t value() { return VALUE + OFFSET; }\n"
        "TVM_FFI_DLL_EXPORT_TYPED_FUNC(value, value);\n")
    (d / "kernels" / "manifest.json").write_text(json.dumps(
        {"name": "results_k", "sources": ["k.cc"], "extra_include_paths": ["../include"],
         "extra_cflags": ["-DOFFSET=0"]}))
    if git:
        subprocess.run(["git", "init", "-q", str(d)], check=True)


class Checkout:
    def __init__(self, d, root, env):
        self.dir, self.root, self.env = d, root, env

    def build(self, *extra, env=None):
        p = run("build", "-m", self.dir / "kernels" / "manifest.json", "--cache-dir", self.root, "--json", *extra,
                cwd=self.dir / "kernels", env=env or self.env)
        j = json.loads(p.stdout)
        j["stderr"] = p.stderr
        return j

    def set_value(self, v):
        (self.dir / "include" / "value.h").write_text(f"#define VALUE {v}\n")

    def set_offset_source(self, text):
        (self.dir / "kernels" / "k.cc").write_text(text)


@pytest.fixture
def two(tmp_path):
    env, log = counting_cxx_env(tmp_path)
    a_dir = tmp_path / "home" / "alice" / "proj"
    b_dir = tmp_path / "ci" / "runner-3" / "checkout"
    make_project(a_dir)
    shutil.copytree(a_dir, b_dir)

    class W:
        pass

    w = W()
    w.tmp, w.log, w.env = tmp_path, log, env
    w.a = Checkout(a_dir, tmp_path / "root-a", env)
    w.b = Checkout(b_dir, tmp_path / "root-b", env)
    return w


def test_switching_a_header_or_a_source_back_hits_locally_at_its_own_path(two):
    a = two.a
    paths = {}
    for v in (1, 2):
        a.set_value(v)
        r = a.build()
        assert r["cache"] == "miss"
        paths[v] = r["path"]
    assert paths[1] != paths[2]
    before = compiles(two.log)
    for v in (1, 2, 1, 2):
        a.set_value(v)
        r = a.build()
        assert r["cache"] == "hit", (v, r["miss_reason"] if "miss_reason" in r else r)
        assert r["path"] == paths[v]
        assert value_of(r["path"]) == v
    assert compiles(two.log) == before  # not one compiler process
    # A source revision switched back: its own key, still there.
    original = (a.dir / "kernels" / "k.cc").read_text()
    a.set_offset_source(original.replace("VALUE + OFFSET", "VALUE + OFFSET + 10"))
    assert a.build()["cache"] == "miss"
    a.set_offset_source(original)
    assert a.build()["cache"] == "hit"
    a.set_offset_source(original.replace("VALUE + OFFSET", "VALUE + OFFSET + 10"))
    r = a.build()
    assert r["cache"] == "hit" and value_of(r["path"]) == 12
    stats = json.loads(run("cache", "stats", "--json", "--cache-dir", a.root).stdout)
    assert stats["module_entries"] == 3 and stats["module_keys"] == 2


def test_a_key_keeps_at_most_8_results(two):
    a = two.a
    for v in range(10):
        a.set_value(v)
        assert a.build()["cache"] == "miss"
    listing = json.loads(run("cache", "list", "--json", "--cache-dir", a.root).stdout)["entries"]
    assert len(listing) == 8 and len({e["dir"] for e in listing}) == 8
    a.set_value(9)
    assert a.build()["cache"] == "hit"  # the newest are kept
    a.set_value(0)
    assert a.build()["cache"] == "miss"  # the least recently used went first
    assert run("cache", "verify", "--cache-dir", a.root).returncode == 0


@needs_servers
@pytest.mark.parametrize("kind", ["redis", "http"])
def test_two_header_revisions_hit_both_ways_from_a_remote(two, kind):
    with remote_servers.server(kind, two.tmp / kind) as srv:
        for v in (1, 2):
            two.a.set_value(v)
            assert two.a.build("--remote", srv.url)["cache"] == "miss"
        before = compiles(two.log)
        for v in (1, 2, 1, 2):
            shutil.rmtree(two.b.root, ignore_errors=True)  # a new machine each time
            two.b.set_value(v)
            r = two.b.build("--remote", srv.url, "--remote-read-only")
            assert r["cache"] == "remote-hit", r["stderr"]
            assert value_of(r["path"]) == v
        assert compiles(two.log) == before


@needs_servers
@pytest.mark.parametrize("kind", ["redis", "http"])
def test_a_corrupt_result_list_on_the_server_is_a_local_build(two, kind):
    with remote_servers.server(kind, two.tmp / kind) as srv:
        first = two.a.build("--remote", srv.url)
        portable = json.loads((Path(first["entry_dir"]) / "entry.json").read_text())["portable_key"]
        if kind == "redis":
            srv.set(f"tvmffi-jit:{portable}", b"{\"format\": \"tvmffi-jit results 1\", \"results\": [1, 2")
        else:
            (path,) = [p for p in srv.blobs() if p.name == portable]
            path.write_bytes(b"\0" * 5000)
        r = two.b.build("--remote", srv.url, "--remote-read-only")
        assert r["cache"] == "miss" and value_of(r["path"]) == 1
        stats = json.loads(run("cache", "stats", "--json", "--cache-dir", two.b.root).stdout)
        assert stats["remote_corrupt"] == 1 and stats["remote_hits"] == 0


@needs_servers
def test_the_team_recipe_shares_between_two_git_checkouts_without_base_dir(two):
    # docs/remote.md: TVMFFI_JIT_REMOTE set, `tvmffi-jit build -m kernels/manifest.json` in each checkout.
    with remote_servers.server("redis", two.tmp / "redis") as srv:
        env = dict(two.env, TVMFFI_JIT_REMOTE=srv.url)
        a = two.a.build(env=env)
        assert a["cache"] == "miss" and "--base-dir" not in a["stderr"]
        before = compiles(two.log)
        b = two.b.build(env=env)
        assert b["cache"] == "remote-hit", b["stderr"]
        assert compiles(two.log) == before
        assert value_of(b["path"]) == 1


@needs_servers
def test_a_path_outside_the_base_dir_with_a_remote_is_named_in_one_warning(tmp_path):
    env, _ = counting_cxx_env(tmp_path)
    d = tmp_path / "proj"
    make_project(d, git=False)  # no work tree: the base is the manifest's folder
    with remote_servers.server("redis", tmp_path / "redis") as srv:
        c = Checkout(d, tmp_path / "root", env)
        r = c.build("--remote", srv.url)
        assert r["stderr"].count("--base-dir") == 1, r["stderr"]
        assert str(d / "include") in r["stderr"]
        # Without a remote nothing is shared, so nothing is said.
        shutil.rmtree(c.root)
        assert "--base-dir" not in c.build()["stderr"]
