#!/usr/bin/env python3
"""tvmffi-jit's batch against a kernel library's own ninja build of the same
modules: cold, at the same -j, on the same machine, one after the other.

    python3 bench/batch_vs_ninja/bench.py --manifests DIR --ninja FILE [-j N]
        [--tool PATH] [--runs ninja,batch,learned,fresh-log] [--batch-arg=--split-compile=auto]...
        [--order given|reversed|shuffled[:SEED]] [--trace FILE] [--keep-cache DIR] [--json FILE]

DIR holds one tvmffi-jit manifest per module (`build -m DIR`); FILE is the
peer's top-level ninja file (for a library that writes one ninja file per
module, a file of `subninja` lines). Both must describe the same compiles with
the same flags; the harness does not check that, it times them.

Each side starts cold: ninja from a fresh working directory (no .ninja_log)
after `ninja -t clean` of FILE's outputs, tvmffi-jit with a fresh cache root
(no entries, no cost log). For each: wall seconds, CPU seconds (user + system
of every process it waited for, getrusage RUSAGE_CHILDREN), peak RSS of the
process tree (sampled every 50 ms) and the machine's busy cores per second;
the floor max(longest job, CPU / cores), the longest job from the job trace
(ours) or .ninja_log (the peer's longest edge). For tvmffi-jit also an
all-hit rerun of the same command on the warm cache ("batch"), and a rerun
with the entries removed but the cost log the cold run learned ("learned":
the schedule a rebuild of changed sources gets), and a run in a fresh root at
another path that holds only that costs.log ("fresh-log": what a CI job that
keeps only the log gets). --order builds the modules in another order (a
modules manifest listing DIR's manifests reversed or shuffled): the schedule
must not depend on it. From each job trace: how well the cost model's
estimates ranked the units (Spearman's rank correlation of `estimate` against
the measured `cpu`, by estimate source) and when the heaviest units started.
Results: a Markdown table on stdout, everything in --json.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "batch"))
import bench as batch_bench  # noqa: E402  (TreeSampler, run_measured: one measuring loop for the batch benchmarks)

ROOT = Path(__file__).resolve().parents[2]
# What a cache root keeps when its entries are removed for the "learned" run.
KEPT_IN_ROOT = ("costs.log", "CACHEDIR.TAG", "TVMFFI_JIT_CACHE", "compilers", "toolchain")


def ninja_longest_edge(workdir):
    """Longest edge (seconds) of the build in workdir's .ninja_log."""
    log = Path(workdir) / ".ninja_log"
    longest = 0.0
    if not log.exists():
        return longest
    for line in log.read_text().splitlines():
        f = line.split("\t")
        if not line.startswith("#") and len(f) >= 2 and f[0].isdigit() and f[1].isdigit():
            longest = max(longest, (int(f[1]) - int(f[0])) / 1000)
    return longest


def trace_summary(trace):
    """Longest job, jobs given several slots, and how the estimates compared
    with the CPU seconds measured, from a --job-trace file."""
    longest, ratios, split = 0.0, [], 0
    if not Path(trace).exists():
        return {"longest_job": 0.0}
    text = Path(trace).read_text()
    lent_peak = None
    if trace.endswith(".json"):  # Chrome's trace-event JSON: each job's JSON-lines object is its "args"
        events = json.loads(text)["traceEvents"]
        jobs = [e["args"] for e in events if e.get("ph") == "X" and e.get("cat") in ("compile", "link")]
        # --split-compile auto's jobserver: the most lent slots its split threads held at once.
        lent = [e["args"]["split threads"] for e in events if e.get("name") == "lent slots in use"]
        lent_peak = max(lent) if lent else None
    else:
        jobs = [json.loads(line) for line in text.splitlines()]
    units = []
    for j in jobs:
        if j.get("step", "").startswith("planning"):
            continue
        longest = max(longest, j["end"] - j["start"])
        split += 1 if j.get("slots", 1) > 1 else 0
        if "estimate" in j and j["cpu"] > 0:
            ratios.append(j["estimate"] / j["cpu"])
        if j.get("step", "").startswith("compiling") and "estimate" in j:
            units.append(j)
    ratios.sort()
    sources = {}
    for u in units:
        sources.setdefault(u.get("estimate_source", ""), []).append(u)
    rho = batch_bench.spearman([u["estimate"] for u in units], [u["cpu"] for u in units])
    heaviest = sorted(units, key=lambda u: -u["cpu"])[:5]
    return {"longest_job": longest, "split_jobs": split, "lent_slots_peak": lent_peak,
            "estimate_over_actual_median": ratios[len(ratios) // 2] if ratios else None,
            "estimate_rank_corr": rho,
            "estimate_rank_corr_by_source": {k: batch_bench.spearman([u["estimate"] for u in v], [u["cpu"] for u in v])
                                             for k, v in sources.items()},
            "estimate_sources": {k: len(v) for k, v in sources.items()},
            # The five units that cost most: when they started, on how many threads.
            "heaviest_units": [{"module": u.get("module", ""), "step": u["step"], "cpu": u["cpu"],
                                "start": u["start"], "end": u["end"], "split": u.get("split", 0),
                                "split_lent": u.get("split_lent", False),
                                "serial": u.get("serial"), "estimate": u["estimate"]} for u in heaviest],
            # The job gate's order of admission: what --order must not change.
            "start_order": [f"{u.get('module', '')}: {Path(u['step'].split(' ', 1)[-1]).name}"
                            for u in sorted(units, key=lambda u: (u.get("admission", 0), u["start"]))]}


def measure(label, argv, env, cwd=None):
    start_dir = os.getcwd()
    if cwd:
        os.chdir(cwd)
    try:
        wall, cpu, rc, out, err, peak = batch_bench.run_measured(argv, env)
    finally:
        os.chdir(start_dir)
    busy = " ".join(f"{b:.0f}" for b in batch_bench.last_busy)
    print(f"[{label}] exit {rc}, {wall:.1f} s wall, {cpu:.1f} CPU-s, peak {batch_bench.gib(peak)}\n"
          f"  busy cores per second: {busy}", file=sys.stderr, flush=True)
    if rc != 0:  # ninja reports a failed edge on stdout, tvmffi-jit on stderr
        print(out[-4000:] + err[-4000:], file=sys.stderr)
    return {"label": label, "wall": wall, "cpu": cpu, "exit": rc, "peak_rss": peak, "busy": batch_bench.last_busy,
            "output_tail": out[-4000:] + err[-4000:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifests", required=True)
    ap.add_argument("--ninja", required=True)
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--tool", default=os.environ.get("TVMFFI_JIT_BIN", str(ROOT / "build" / "tvmffi-jit")))
    ap.add_argument("--runs", default="ninja,batch,learned", help="any of ninja,batch,learned,fresh-log")
    ap.add_argument("--order", default="given", help="given, reversed or shuffled[:SEED]: the order the modules are listed in")
    ap.add_argument("--batch-arg", action="append", default=[], help="extra argument for tvmffi-jit build")
    ap.add_argument("--trace", default="", help="keep tvmffi-jit's --job-trace of the cold run here (FILE.json: Chrome's trace-event format)")
    ap.add_argument("--keep-cache", default="", help="tvmffi-jit's cache root, kept afterwards (default: a temp dir)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    env = dict(os.environ)
    runs = a.runs.split(",")
    results = {}
    work = Path(tempfile.mkdtemp(prefix="batch-vs-ninja-"))
    try:
        if "ninja" in runs:
            ninja_dir = work / "ninja"
            ninja_dir.mkdir()
            subprocess.run(["ninja", "-f", a.ninja, "-t", "clean"], cwd=ninja_dir, capture_output=True)
            r = measure("ninja", ["ninja", "-f", a.ninja, "-j", str(a.jobs)], env, cwd=ninja_dir)
            r["longest_job"] = ninja_longest_edge(ninja_dir)
            results["ninja"] = r
        cache = Path(a.keep_cache) if a.keep_cache else work / "cache"
        trace = a.trace or str(work / "trace.jsonl")
        benv = dict(env, TVMFFI_JIT_CACHE_DIR=str(cache))
        modules = a.manifests
        if a.order != "given":  # a modules manifest listing DIR's manifests in another order
            listed = sorted(str(p.resolve()) for p in Path(a.manifests).glob("*.json"))
            if a.order == "reversed":
                listed.reverse()
            elif a.order.startswith("shuffled"):
                import random
                random.Random(int(a.order.split(":", 1)[1]) if ":" in a.order else 1).shuffle(listed)
            else:
                ap.error(f"--order {a.order}: given, reversed or shuffled[:SEED]")
            modules = str(work / "modules.json")
            Path(modules).write_text(json.dumps({"modules": listed}))
        argv = [a.tool, "build", "-m", modules, "-j", str(a.jobs), "-q", *a.batch_arg]
        if "batch" in runs:
            shutil.rmtree(cache, ignore_errors=True)  # cold: no entries, no cost log
            r = measure("batch", [*argv, "--job-trace", trace], benv)
            r.update(trace_summary(trace))
            results["batch"] = r
            results["batch_all_hit"] = measure("batch, all hit", argv, benv)
        if "learned" in runs and cache.is_dir():
            for entry in cache.iterdir():
                if entry.name not in KEPT_IN_ROOT:
                    shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink()
            learned = str(Path(trace).with_suffix(".learned" + Path(trace).suffix))
            r = measure("batch, cost log learned", [*argv, "--job-trace", learned], benv)
            r.update(trace_summary(learned))
            results["batch_learned"] = r
        if "fresh-log" in runs and (cache / "costs.log").is_file():
            fresh = work / "elsewhere" / "cache"  # another path, holding only the log
            fresh.mkdir(parents=True)
            shutil.copy(cache / "costs.log", fresh / "costs.log")
            moved = str(Path(trace).with_suffix(".fresh-log" + Path(trace).suffix))
            r = measure("batch, fresh root with costs.log only", [*argv, "--job-trace", moved],
                        dict(env, TVMFFI_JIT_CACHE_DIR=str(fresh)))
            r.update(trace_summary(moved))
            results["batch_fresh_log"] = r
    finally:
        shutil.rmtree(work, ignore_errors=True)

    rows = ["| run | exit | wall s | CPU s | longest job s | floor s | wall / floor | peak RSS |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results.values():
        floor = max(r.get("longest_job", 0.0), r["cpu"] / cores)
        r["floor"] = floor
        rows.append(f"| {r['label']} | {r['exit']} | {r['wall']:.1f} | {r['cpu']:.1f} | {r.get('longest_job', 0):.1f} | "
                    f"{floor:.1f} | {r['wall'] / floor if floor else 0:.2f}x | {batch_bench.gib(r['peak_rss'])} |")
    for r in results.values():
        if r.get("estimate_sources"):
            rho = r.get("estimate_rank_corr")
            by = ", ".join(f"{k} {n}" + ("" if r["estimate_rank_corr_by_source"].get(k) is None else
                                         f" (rho {r['estimate_rank_corr_by_source'][k]:.2f})")
                           for k, n in sorted(r["estimate_sources"].items()))
            rows.append(f"\n{r['label']}: estimates ranked the units with Spearman rho "
                        f"{'n/a' if rho is None else f'{rho:.2f}'} ({by}); heaviest units started at "
                        + ", ".join(f"{h['start']:.1f} s (cpu {h['cpu']:.0f}, split {h['split']})"
                                    for h in r["heaviest_units"]))
    if "ninja" in results:
        for key in ("batch", "batch_learned", "batch_fresh_log"):
            if key in results:
                b, n = results[key], results["ninja"]
                rows.append(f"\n{b['label']}: {n['wall'] / b['wall']:.2f}x the peer's speed, "
                            f"{b['cpu'] / n['cpu']:.2f}x its CPU")
    print("\n".join(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0 if all(r["exit"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
