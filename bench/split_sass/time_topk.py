#!/usr/bin/env python3
"""Kernel time of FlashInfer's top-k built unsplit against split (on the GPU):
the units whose machine code differs between the two builds
(bench/split_sass/compare.py) are timed here (docs/build.md, "Split
compilation"; docs/benchmarks.md).

    python3 bench/split_sass/time_topk.py --unsplit A.so --split B.so [--rounds 5] [--calls 200]

A.so and B.so are the `topk` module (FlashInfer's csrc/topk.cu and its
binding) from the two builds, e.g. FlashInfer's ninja (unsplit) and
tvmffi-jit's default build (--split-compile auto). For each shape (batch,
vocabulary, k, dtype) both modules run `radix_topk` on the same input, in
alternated rounds of CALLS calls timed with CUDA events; prints the median
microseconds per call of each, their ratio, and whether the outputs match.
"""

import argparse
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


def run(fn, x, idx, vals, k):
    fn(x, idx, vals, None, k, True, False, 0, False)


def time_calls(fn, x, idx, vals, k, calls):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        run(fn, x, idx, vals, k)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / calls  # µs per call


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unsplit", required=True)
    ap.add_argument("--split", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    fns = {name: tvm_ffi.load_module(path)["radix_topk"] for name, path in (("unsplit", args.unsplit), ("split", args.split))}
    torch.manual_seed(0)
    print("| dtype | batch x vocab, k | unsplit µs | split µs | split / unsplit | outputs equal |")
    print("|---|---|---:|---:|---:|---|")
    ratios = []
    for dtype in DTYPES:
        for batch, vocab, k in SHAPES:
            x = torch.randn(batch, vocab, device="cuda").to(dtype)
            outs = {}
            for name, fn in fns.items():
                idx = torch.empty(batch, k, dtype=torch.int32, device="cuda")
                vals = torch.empty(batch, k, dtype=dtype, device="cuda")
                run(fn, x, idx, vals, k)
                torch.cuda.synchronize()
                outs[name] = (idx, vals)
            equal = torch.equal(outs["unsplit"][1], outs["split"][1]) and torch.equal(outs["unsplit"][0], outs["split"][0])
            times = {name: [] for name in fns}
            for r in range(args.rounds):
                order = list(fns) if r % 2 == 0 else list(reversed(fns))  # alternated rounds
                for name in order:
                    idx, vals = outs[name]
                    time_calls(fns[name], x, idx, vals, k, 10)  # warm
                    times[name].append(time_calls(fns[name], x, idx, vals, k, args.calls))
            u, s = statistics.median(times["unsplit"]), statistics.median(times["split"])
            ratios.append(s / u)
            print(f"| {str(dtype).split('.')[-1]} | {batch} x {vocab}, {k} | {u:.2f} | {s:.2f} | {s / u:.3f} | {equal} |")
    print(f"\nsplit / unsplit over {len(ratios)} cases: median {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}")


if __name__ == "__main__":
    main()
