"""One build request for one module and for a batch: every option a single
build honours is honoured for each module of a batch (the same results both
ways), or refused with exit 2. Also: --remote in a batch against a real
redis-server, --keep-going past a bad manifest, module names in progress
lines, and -j / the memory budget from a (fake) cgroup tree.
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


def run(*args, env=None, cwd=None, check=None, timeout=600):
    p = subprocess.run([TOOL, *map(str, args)], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
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
    return sorted((d / "manifests").glob("*.json"))


@pytest.fixture
def world(tmp_path):
    env, log = counting_cxx_env(tmp_path)

    class W:
        pass

    w = W()
    w.tmp, w.log, w.env = tmp_path, log, env
    w.dir = tmp_path / "proj"
    w.manifests = make_project(w.dir)
    return w


def comparable(j, root):
    """What must agree between a module built alone and in a batch."""
    argv = [c["argv"] for c in j.get("commands", [])]
    return {
        "name": j["name"], "emit": j["emit"], "cache": j["cache"], "key": j.get("key"),
        "miss_reason": j.get("miss_reason"), "objects_compiled": j.get("objects_compiled"),
        "launcher": sorted({Path(a[0]).name for a in argv if a and "wrap" in a[0]}),
        "artifact": Path(j["path"]).name, "in_root": str(j["path"]).startswith(str(root)),
    }


MATRIX = {
    "defaults": ([], {}),
    "force": (["--force"], {}),
    "verify": (["--verify"], {}),
    "emit object": (["--emit", "object"], {}),
    "cxx launcher": (["--cxx-launcher", "{wrap}"], {}),
    "launcher from the environment": ([], {"TVMFFI_JIT_CXX_LAUNCHER": "{wrap}"}),
    "base dir": (["--base-dir", "{tmp}"], {}),
    "base dir from the environment": ([], {"TVMFFI_JIT_BASE_DIR": "{tmp}"}),
    "no cache": (["--no-cache"], {}),
    "cflag": (["--cflag=-DX=1"], {}),
}


@pytest.mark.parametrize("case", list(MATRIX))
def test_every_option_gives_the_same_result_for_a_module_alone_and_in_a_batch(world, case):
    wrap = world.tmp / "tools" / "wrap"
    wrap.write_text('#!/bin/sh\nexec "$@"\n')
    wrap.chmod(0o755)
    flags, env_vars = MATRIX[case]
    flags = [f.format(wrap=wrap, tmp=world.tmp) for f in flags]
    env = dict(world.env, **{k: v.format(wrap=wrap, tmp=world.tmp) for k, v in env_vars.items()})
    results = {}
    for mode in ("alone", "batch"):
        root = world.tmp / f"root-{mode}"
        seen = []
        for _ in range(2):  # cold, then again (a hit, or --force's rebuild)
            if mode == "alone":
                lines = [json.loads(run("build", "-m", m, "--cache-dir", root, "--json", *flags, env=env,
                                        check=0).stdout) for m in world.manifests]
            else:
                out = run("build", "-m", world.dir / "manifests", "--cache-dir", root, "--json", *flags, env=env,
                          check=0).stdout
                lines = [json.loads(x) for x in out.splitlines()]
                assert [j["origin"] for j in lines] == [str(m) for m in world.manifests]
            seen.append([comparable(j, root) for j in lines])
        results[mode] = seen
    for x, y in zip(results["alone"], results["batch"]):
        for p, q in zip(x, y):
            assert p == q, (p, q)
    assert results["alone"] == results["batch"]


def test_one_module_options_are_refused_for_a_batch_with_exit_2(world):
    for flags in (["-o", world.tmp / "x.so"], ["--depfile", world.tmp / "x.d"], ["--link-to", world.tmp / "l"],
                  ["--compile-commands", world.tmp / "cc.json"]):
        p = run("build", "-m", world.dir / "manifests", *flags, env=world.env, check=2)
        assert "about one module's artifact" in p.stderr and str(flags[0]) in p.stderr
    assert compiles(world.log) == 0


@pytest.mark.skipif(not (shutil.which("redis-server") or os.path.exists("/usr/bin/redis-server")),
                    reason="redis-server comes from scripts/setup.sh")
def test_remote_in_a_batch_uploads_every_module_and_another_checkout_gets_only_remote_hits(world):
    redis = remote_servers.Redis(world.tmp / "redis")
    try:
        # The project root as the base dir: the sources are outside the manifests' directory.
        a = run("build", "-m", world.dir / "manifests", "--cache-dir", world.tmp / "root-a", "--remote", redis.url,
                "--base-dir", world.dir, "--json", env=world.env, check=0)
        assert [json.loads(x)["cache"] for x in a.stdout.splitlines()] == ["miss"] * 3
        assert compiles(world.log) == 3
        # Every module uploaded (its result and its key's result list), and the team's costs (docs/remote.md).
        assert redis.dbsize() == 6 + 1 and redis.get("tvmffi-jit:costs")
        # Another checkout of the same project at another path, another cache root.
        other = world.tmp / "ci" / "runner" / "checkout"
        shutil.copytree(world.dir, other)
        b = run("build", "-m", other / "manifests", "--cache-dir", world.tmp / "root-b", "--remote", redis.url,
                "--base-dir", other, "--json", env=world.env, check=0)
        lines = [json.loads(x) for x in b.stdout.splitlines()]
        assert [(j["cache"], j["status"], j["objects_compiled"]) for j in lines] == [("remote-hit", "hit", 0)] * 3
        assert compiles(world.log) == 3  # nothing compiled for the second checkout
        assert all(j["path"].startswith(str(world.tmp / "root-b")) for j in lines)
    finally:
        redis.stop()


def test_keep_going_past_a_bad_manifest_reports_it_failed_with_exit_2_and_builds_the_rest(world):
    bad = world.dir / "manifests" / "mod_b.json"
    bad.write_text(json.dumps({"name": "mod_b", "sourcez": ["../src/mod_b.cc"]}))
    p = run("build", "-m", world.dir / "manifests", "-k", "--json", env=world.env, check=2)
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [(j["name"], j["status"]) for j in lines] == [("mod_a", "built"), ("mod_b", "failed"), ("mod_c", "built")]
    assert lines[1]["exit_code"] == 2 and "sourcez" in lines[1]["error"] and lines[1]["origin"] == str(bad)
    table = p.stderr[p.stderr.index("module  "):]
    assert "mod_b   failed" in table and "3 modules: 2 built, 0 hit, 1 failed" in table
    # Plain output: one line per module, the failed one empty.
    p = run("build", "-m", world.dir / "manifests", "-k", env=world.env, check=2)
    lines = p.stdout.split("\n")[:-1]
    assert len(lines) == 3 and lines[1] == "" and lines[0].endswith("mod_a.so") and lines[2].endswith("mod_c.so")
    # Without -k a bad manifest stops the batch before anything is built.
    before = compiles(world.log)
    run("build", "-m", world.dir / "manifests", "--force", env=world.env, check=2)
    assert compiles(world.log) == before


def test_progress_lines_of_a_batch_name_the_module(world):
    for m in ("mod_a", "mod_b"):  # two modules with a main.cc each: the file name alone is ambiguous
        (world.dir / "src" / m).mkdir()
        (world.dir / "src" / m / "main.cc").write_text(f"int {m}_main() {{ return 0; }}\n")
        (world.dir / "manifests" / f"{m}.json").write_text(json.dumps({"name": m, "sources": [f"../src/{m}/main.cc"]}))
    p = run("build", "-m", world.dir / "manifests", "-j", "1", env=world.env, check=0)
    progress = [x for x in p.stderr.splitlines() if x.startswith("[")]
    for module, source in (("mod_a", "main.cc"), ("mod_b", "main.cc"), ("mod_c", "mod_c.cc")):
        assert any(f" {module}: " in x and x.endswith(source) for x in progress), p.stderr


def test_an_empty_root_holding_only_a_saved_cost_log_schedules_every_unit_by_its_own_cost(world):
    """docs/build.md, "The cost log": a CI job keeps <root>/costs.log alone and puts it in the
    next job's empty root; nothing is a hit there, but every unit starts with its logged cost,
    even when the next job's checkout sits at another path (a runner's own workspace)."""

    def build(project, root):
        trace = root.parent / (root.name + ".trace")
        run("build", "-m", project / "manifests", "-j", "2", "--base-dir", project, "--job-trace", trace,
            env=dict(world.env, TVMFFI_JIT_CACHE_DIR=str(root)), check=0)
        lines = [json.loads(x) for x in trace.read_text().splitlines()]
        return [x["estimate_source"] for x in lines if x["step"].startswith("compiling")]

    first = build(world.dir, world.tmp / "job1")
    assert len(first) == 3 and "log" not in first, first
    moved = world.tmp / "runner2" / "workspace" / "proj"
    shutil.copytree(world.dir, moved)
    second_root = world.tmp / "job2"
    second_root.mkdir()
    shutil.copy(world.tmp / "job1" / "costs.log", second_root / "costs.log")
    compiled_before = compiles(world.log)
    assert build(moved, second_root) == ["log", "log", "log"]
    assert compiles(world.log) == compiled_before + 3  # built again: only the log came along


def test_job_trace_named_json_is_chromes_trace_event_format_one_lane_per_job_at_once(world):
    """docs/build.md, "Job trace": FILE.json is the trace-event JSON Perfetto opens; other names JSON lines."""
    trace = world.tmp / "trace.json"
    run("build", "-m", world.dir / "manifests", "-j", "2", "--job-trace", trace, env=world.env, check=0)
    doc = json.loads(trace.read_text())  # one JSON document, not lines
    jobs = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] in ("compile", "link")]
    assert sorted(e["name"] for e in jobs) == sorted(
        f"{m}: {f}" for m in ("mod_a", "mod_b", "mod_c") for f in (f"{m}.cc", f"{m}.so"))
    # Lanes: no two jobs of one lane overlap, and -j 2 never needed a third.
    for lane in {e["tid"] for e in jobs}:
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in jobs if e["tid"] == lane)
        assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:])), spans
    assert {e["tid"] for e in jobs} <= {1, 2} and doc["otherData"]["lanes"] == len({e["tid"] for e in jobs})
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[0] == "planning" and names[1] == "job lane 1"
    # The same build with another name writes JSON lines.
    lines_file = world.tmp / "trace.jsonl"
    run("build", "-m", world.dir / "manifests", "--force", "--job-trace", lines_file, env=world.env, check=0)
    steps = [json.loads(x)["step"] for x in lines_file.read_text().splitlines()]
    assert steps[0] == "planning 3 modules" and len(steps) == 7


def test_jobs_and_memory_budget_follow_the_cgroup_limits(world):
    fake = world.tmp / "cgroup-root"
    (fake / "proc" / "self").mkdir(parents=True)
    (fake / "proc" / "self" / "cgroup").write_text("0::/ci/job\n")
    (fake / "proc" / "self" / "mountinfo").write_text(
        "30 22 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n")
    job = fake / "sys" / "fs" / "cgroup" / "ci" / "job"
    job.mkdir(parents=True)
    (job / "cpu.max").write_text("100000 100000\n")
    (job / "memory.max").write_text(f"{1 << 30}\n")
    env = dict(world.env, TVMFFI_JIT_CGROUP_ROOT=str(fake))
    p = run("build", "-m", world.dir / "manifests", "-vv", env=env, check=0)
    gate = [x for x in p.stderr.splitlines() if "job gate: " in x and "slots" in x][0]
    assert "job gate: 1 slots" in gate and "cpu.max" in gate, gate
    assert "memory 1.0 GiB (cgroup " in gate and "memory.max" in gate, gate
    assert "peak 1 slots" in p.stderr
