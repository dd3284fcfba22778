"""The team's costs on a remote (docs/remote.md, "The team's costs"; docs/build.md, "The cost
log"): nginx (WebDAV PUT) on 127.0.0.1 with a free port, a batch of three small C++ modules.
A run with the remote leaves the costs object on the server; a fresh runner with an empty cache
root at another path starts learned from it (its job trace says `estimate_source` "log"); a
command whose modules all hit never asks for it; a read-only runner reads it and puts nothing;
a damaged or huge object on the server is ignored, the build succeeds, and the object is
replaced by one that parses.
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
COSTS = "/cache/tvmffi-jit/costs"  # the object's path on the server: <url>/<namespace>/costs

pytestmark = pytest.mark.skipif(not (shutil.which("nginx") or os.path.exists("/usr/sbin/nginx")),
                                reason="nginx comes from scripts/setup.sh")


def run(*args, env=None, check=None, timeout=300):
    p = subprocess.run([TOOL, *map(str, args)], env=env, capture_output=True, text=True, timeout=timeout)
    if check is not None:
        assert p.returncode == check, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def make_project(d):
    """Three small C++ modules, one manifest each, under d/manifests."""
    (d / "src").mkdir(parents=True)
    (d / "manifests").mkdir()
    for name, value in (("mod_a", 1), ("mod_b", 2), ("mod_c", 3)):
        (d / "src" / f"{name}.cc").write_text(f"int {name}_value() {{ return {value}; }}\n")
        (d / "manifests" / f"{name}.json").write_text(json.dumps({"name": name, "sources": [f"../src/{name}.cc"]}))


@pytest.fixture
def world(tmp_path):
    env, log = counting_cxx_env(tmp_path)
    nginx = remote_servers.Nginx(tmp_path / "nginx")

    class W:
        pass

    w = W()
    w.tmp, w.log, w.env, w.nginx = tmp_path, log, env, nginx
    w.dir = tmp_path / "alice" / "proj"
    make_project(w.dir)
    w.costs = nginx.dir / "store" / COSTS.lstrip("/")
    try:
        yield w
    finally:
        nginx.stop()


def build(w, project, root, *extra, check=0):
    """A batch build of `project` into cache root `root` with the remote; returns (process, trace lines)."""
    trace = root.parent / (root.name + ".trace.jsonl")
    p = run("build", "-m", project / "manifests", "-j", "2", "--base-dir", project, "--cache-dir", root,
            "--remote", w.nginx.url, "--job-trace", trace, *extra, env=w.env, check=check)
    lines = [json.loads(x) for x in trace.read_text().splitlines()] if trace.exists() else []
    return p, lines


def sources(lines, kind):
    return sorted(x["estimate_source"] for x in lines if x["step"].startswith(kind))


def costs_requests(w, method):
    return [x for x in w.nginx.requests(method) if f" {COSTS} " in x]


def edited_copy(w, where):
    """The project at another path, every source edited: each module misses and builds."""
    shutil.copytree(w.dir, where)
    for src in (where / "src").glob("*.cc"):
        src.write_text(src.read_text() + "// edited\n")
    return where


def test_a_fresh_runner_at_another_path_starts_learned_from_the_remote_and_all_hits_never_ask(world):
    w = world
    _, first = build(w, w.dir, w.tmp / "root-a")
    assert len(sources(first, "compiling")) == 3 and "log" not in sources(first, "compiling"), first
    # The object is on the server, in the cost log's format: 3 units (by module and by source) and 3 links.
    text = w.costs.read_text()
    assert text.startswith("# tvmffi-jit cost log v"), text
    assert len(text.splitlines()) == 1 + 9, text
    assert len(costs_requests(w, "PUT")) == 1

    # Every module a remote hit in a new root: no job, so the costs object is never asked for.
    gets = len(costs_requests(w, "GET"))
    p, hits = build(w, w.dir, w.tmp / "root-hits", "--json")
    assert all(json.loads(x)["cache"] == "remote-hit" for x in p.stdout.splitlines()), p.stdout
    assert sources(hits, "compiling") == []
    assert len(costs_requests(w, "GET")) == gets and len(costs_requests(w, "PUT")) == 1

    # A fresh runner: its own empty root and checkout path, edited sources (everything builds),
    # read-only: every unit and link starts with its logged cost, and nothing is put back.
    moved = edited_copy(w, w.tmp / "ci" / "runner-7" / "work")
    compiled = compiles(w.log)
    _, learned = build(w, moved, w.tmp / "runner-root", "--remote-read-only")
    assert compiles(w.log) == compiled + 3
    assert sources(learned, "compiling") == ["log"] * 3, learned
    assert sources(learned, "linking") == ["log"] * 3, learned
    assert len(costs_requests(w, "GET")) == gets + 1  # once for the command, not per job
    assert len(costs_requests(w, "PUT")) == 1 and w.costs.read_text() == text


@pytest.mark.parametrize("damage", ["huge", "garbage"])
def test_a_damaged_or_huge_costs_object_is_ignored_and_replaced(world, damage):
    w = world
    build(w, w.dir, w.tmp / "root-a")  # the object now holds every job's cost
    lines = w.costs.read_text().splitlines()
    if damage == "huge":  # well-formed, but past the 4 MiB a costs object may hold: not read at all
        filler = "".join(f"u{i:020x}\tc++\t1000\t1000\t10\t1000\t0\n" for i in range(100000))
        w.costs.write_text("\n".join(lines) + "\n" + filler)
        assert w.costs.stat().st_size > 4 << 20
    else:  # bytes that are no log, and every job's line claiming 30,000 years of CPU: dropped
        absurd = [x.split("\t")[0] + "\tc++\t999999999999999\t1\t1\t-\t-" for x in lines[1:]]
        w.costs.write_bytes(b"\x00\xff\x13not a log\n" + "\n".join(absurd).encode() + b"\n")
    moved = edited_copy(w, w.tmp / "runner" / "work")
    p, learned = build(w, moved, w.tmp / "runner-root")
    assert "warning" not in p.stderr, p.stderr
    assert len(sources(learned, "compiling")) == 3 and "log" not in sources(learned, "compiling"), learned
    text = w.costs.read_text()  # replaced by what this command learned
    assert text.startswith("# tvmffi-jit cost log v") and len(text.splitlines()) == 1 + 9, text[:300]
