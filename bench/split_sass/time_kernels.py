#!/usr/bin/env python3
"""Kernel time of FlashInfer modules built unsplit against split (on the GPU):
the units whose machine code differs between the two builds
(bench/split_sass/compare.py: top-k and batch prefill) are timed here
(docs/build.md, "Split compilation"; docs/benchmarks.md).

    python3 bench/split_sass/time_kernels.py --topk A.so B.so --prefill C.so D.so [--rounds 5] [--calls 200]

Each pair is one module from the two builds, unsplit first: e.g. FlashInfer's
ninja output and tvmffi-jit's default build (--split-compile auto). --topk:
the `topk` module (`radix_topk`, every dtype, single- and multi-CTA shapes).
--prefill: the fp16, head dim 128 `batch_prefill_with_kv_cache_...` module
(`plan` then `ragged_run`, causal and not). For each case both modules run on
the same input, in alternated rounds of CALLS calls timed with CUDA events;
prints the median microseconds per call of each, their ratio, and whether
the outputs match.
"""

import argparse
import math
import statistics

import torch
import tvm_ffi

SHAPES = [  # (batch, vocabulary, k): single- and multi-CTA, filtered and radix paths
    (1, 128256, 50),
    (1, 128256, 2048),
    (16, 32000, 50),
    (64, 128256, 256),
    (256, 32000, 1024),
    (1024, 4096, 64),
]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def time_calls(call, calls):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        call()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / calls  # µs per call


def compare_case(label, calls_by_build, outputs_by_build, rounds, calls, ratios):
    """calls_by_build: {"unsplit": f, "split": f}, each running the kernel once."""
    for f in calls_by_build.values():
        f()
    torch.cuda.synchronize()
    outs = [o() for o in outputs_by_build.values()]
    equal = all(torch.equal(a, b) for a, b in zip(outs[0], outs[1]))
    times = {name: [] for name in calls_by_build}
    for r in range(rounds):
        for name in list(calls_by_build) if r % 2 == 0 else list(reversed(calls_by_build)):  # alternated
            time_calls(calls_by_build[name], 10)  # warm
            times[name].append(time_calls(calls_by_build[name], calls))
    u, s = statistics.median(times["unsplit"]), statistics.median(times["split"])
    ratios.append(s / u)
    print(f"| {label} | {u:.2f} | {s:.2f} | {s / u:.3f} | {equal} |", flush=True)


def topk_cases(paths, rounds, calls, ratios):
    fns = {name: tvm_ffi.load_module(p)["radix_topk"] for name, p in zip(("unsplit", "split"), paths)}
    for dtype in DTYPES:
        for batch, vocab, k in SHAPES:
            x = torch.randn(batch, vocab, device="cuda").to(dtype)
            bufs = {n: (torch.empty(batch, k, dtype=torch.int32, device="cuda"),
                        torch.empty(batch, k, dtype=dtype, device="cuda")) for n in fns}
            runs = {n: (lambda f=fns[n], b=bufs[n]: f(x, b[0], b[1], None, k, True, False, 0, False)) for n in fns}
            outs = {n: (lambda b=bufs[n]: b) for n in fns}
            compare_case(f"topk {str(dtype).split('.')[-1]} {batch} x {vocab}, k {k}", runs, outs, rounds, calls, ratios)


def prefill_cases(paths, rounds, calls, ratios):
    heads, kv_heads, dim = 32, 8, 128
    mods = {name: tvm_ffi.load_module(p) for name, p in zip(("unsplit", "split"), paths)}
    for batch, q_len, kv_len in ((1, 4096, 4096), (8, 512, 2048), (32, 128, 1024)):
        for causal in (True, False):
            qo_indptr = torch.arange(batch + 1, dtype=torch.int32) * q_len
            kv_indptr = torch.arange(batch + 1, dtype=torch.int32) * kv_len
            kv_lens = torch.full((batch,), kv_len, dtype=torch.int32)
            q = torch.randn(batch * q_len, heads, dim, device="cuda", dtype=torch.float16)
            k = torch.randn(batch * kv_len, kv_heads, dim, device="cuda", dtype=torch.float16)
            v = torch.randn(batch * kv_len, kv_heads, dim, device="cuda", dtype=torch.float16)
            runs, outs = {}, {}
            for name, m in mods.items():
                fws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
                iws = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
                pinned = torch.empty(8 << 20, dtype=torch.uint8, pin_memory=True)
                plan = m["plan"](fws, iws, pinned, qo_indptr, kv_indptr, kv_lens, batch * q_len, batch, heads,
                                 kv_heads, 1, False, dim, dim, causal, -1, -1, False, 0, 0)
                o = torch.empty_like(q)
                qi, ki = qo_indptr.cuda(), kv_indptr.cuda()
                runs[name] = (lambda m=m, fws=fws, iws=iws, plan=plan, o=o, qi=qi, ki=ki:
                              m["ragged_run"](fws, iws, plan, q, k, v, qi, ki, o, None, 1 if causal else 0, 0, -1,
                                              False, None, None, None, None, None, None, None, None,
                                              0.0, 1.0 / math.sqrt(dim), 1.0, 1e-4, 0))
                outs[name] = (lambda o=o: (o,))
            compare_case(f"prefill fp16 {batch} x q {q_len} kv {kv_len}{' causal' if causal else ''}",
                         runs, outs, rounds, calls, ratios)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topk", nargs=2, metavar=("UNSPLIT", "SPLIT"))
    ap.add_argument("--prefill", nargs=2, metavar=("UNSPLIT", "SPLIT"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    torch.manual_seed(0)
    print("| case | unsplit µs | split µs | split / unsplit | outputs equal |")
    print("|---|---:|---:|---:|---|")
    ratios = []
    for paths, cases in ((args.topk, topk_cases), (args.prefill, prefill_cases)):
        if not paths:
            continue
        try:
            cases(paths, args.rounds, args.calls, ratios)
        except Exception as e:  # one kernel's harness failing still reports the other's figures
            print(f"| {cases.__name__}: failed: {type(e).__name__}: {str(e)[:300]} | | | | |", flush=True)
    if ratios:
        print(f"\nsplit / unsplit over {len(ratios)} cases: median {statistics.median(ratios):.3f}, "
              f"min {min(ratios):.3f}, max {max(ratios):.3f}")


if __name__ == "__main__":
    main()
