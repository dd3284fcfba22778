#!/usr/bin/env python3
"""The dependency graph of src/ and its circles.

A node is one source of src/ together with its header (`cache/store` is
src/cache/store/store.cpp and include/tvmffi_jit/cache/store.h). An edge A -> B
says A's code calls (or reads) code defined in B: A's object file refers to a
symbol that B's object file defines. That is the include graph with the calls
that close a loop: an include only for a type or a constant ties nothing, a
call through an include does (`store.cpp` calls `Store::record_stamps`,
defined in restamp.cpp, which calls back into store.cpp).

A circle (a strongly connected component of more than one node) means that
neither side can be read, tested or moved without the other. Prints each
circle with the symbol behind each of its edges and exits 1; prints nothing
and exits 0 when there is none.

  scripts/include_graph.py [--build DIR] [--source CHECKOUT] [--edges]

DIR is a configured and built tree (default: build/ beside this script);
only sources listed in its compile_commands.json that still exist count, so a
stale object of a removed source is never read. The cli sources that CMake
compiles in unity batches (CMakeLists.txt) share an object, whose symbols
cannot say which of them calls what: they are left out (cli is the top layer:
nothing below it calls into it, so they close no circle below it).
"""

import argparse
import json
import shlex
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def objects(build, root):
    """node -> object file, for every source of src/ the build compiles on its own
    (a unity batch is not a source: see the note above)."""
    src_root = (root / "src").resolve()
    out = {}
    for entry in json.loads((build / "compile_commands.json").read_text()):
        src = Path(entry["file"])
        if not src.is_absolute():
            src = Path(entry["directory"]) / src
        try:
            rel = src.resolve().relative_to(src_root)
        except ValueError:
            continue  # a unity batch (under the build tree), a test
        if src.suffix != ".cpp" or len(rel.parts) < 2 or not src.is_file():
            continue  # src/main.cpp (the three-line CLI), a source since removed
        argv = entry.get("arguments") or shlex.split(entry["command"])
        obj = entry.get("output") or argv[argv.index("-o") + 1]
        obj = Path(obj) if Path(obj).is_absolute() else Path(entry["directory"]) / obj
        out[f"{rel.parts[0]}/{src.stem}"] = obj
    return out


def symbols(obj, undefined):
    args = ["nm", "-C", "-u" if undefined else "--defined-only"] + ([] if undefined else ["-g"])
    text = subprocess.run(args + [str(obj)], capture_output=True, text=True, check=True).stdout
    for line in text.splitlines():
        parts = line.split(None, 2) if not undefined else line.split(None, 1)
        if undefined and len(parts) == 2 and parts[0] == "U":
            yield parts[1]
        elif not undefined and len(parts) == 3 and parts[1] in "TDBR":  # strong definitions only
            yield parts[2]


def build_graph(build, root=ROOT):
    nodes = objects(build, root)
    defined = {}
    for node, obj in sorted(nodes.items()):
        for s in symbols(obj, False):
            defined.setdefault(s, node)
    edges = defaultdict(dict)  # a -> b -> a symbol of b that a uses
    for node, obj in sorted(nodes.items()):
        for s in sorted(symbols(obj, True)):
            owner = defined.get(s)
            if owner and owner != node:
                edges[node].setdefault(owner, s)
    return nodes, edges


def circles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    nodes = sorted(set(edges) | {b for bs in edges.values() for b in bs})

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(1000, 4 * len(nodes)))
    for v in nodes:
        if v not in index:
            visit(v)
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--source", type=Path, default=ROOT, help="the checkout the build was configured from")
    ap.add_argument("--edges", action="store_true", help="print every edge, not only the circles")
    args = ap.parse_args()
    if not (args.build / "compile_commands.json").is_file():
        sys.exit(f"include_graph.py: {args.build}/compile_commands.json is missing: configure and build there first")
    missing = sorted(str(o) for o in objects(args.build, args.source).values() if not o.is_file())
    if missing:
        sys.exit("include_graph.py: not built yet (build every target first): " + ", ".join(missing[:5]))
    nodes, edges = build_graph(args.build, args.source)
    if args.edges:
        for a in sorted(edges):
            for b, sym in sorted(edges[a].items()):
                print(f"{a} -> {b}: {sym}")
    found = circles(edges)
    for comp in found:
        print("circle: " + " <-> ".join(comp))
        members = set(comp)
        for a in comp:
            for b, sym in sorted(edges[a].items()):
                if b in members:
                    print(f"  {a} -> {b}: uses {sym}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
