#!/usr/bin/env python3
"""Draw a `tvmffi-jit build --job-trace FILE.json` (Chrome's trace-event JSON)
as an SVG picture: one row per job lane, each job a bar named by module and
file, nvcc units, C/C++ units and links in three colours, a split compile's
threads as stripes inside its bar, and a time axis in seconds.

    python3 bench/batch/trace_svg.py trace.json trace.svg [--width 1400] [--title TEXT]

It reads the lanes the tool assigned (the events' "tid"), so the picture is
what Perfetto (ui.perfetto.dev, "Open trace file") and chrome://tracing show,
in a file that a document can embed (docs/build.md#job-trace). Standard
library only.
"""

import argparse
import json
import sys
from html import escape

ROW, GAP, LEFT, TOP, BOTTOM = 22, 4, 110, 40, 40
COLOURS = {"nvcc": "#4e79a7", "c++": "#59a14f", "link": "#f28e2b", "other": "#9c9c9c"}


def kind(event):
    if event.get("cat") == "link":
        return "link"
    name = event["name"].lower()
    if name.endswith((".cu", ".hip")):
        return "nvcc"
    if name.endswith((".c", ".cc", ".cpp", ".cxx")):
        return "c++"
    return "other"


def render(doc, width, title):
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    jobs = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("compile", "link")]
    planning = [e for e in events if e.get("ph") == "X" and e.get("cat") == "planning"]
    if not jobs:
        raise SystemExit("no compile or link job in the trace (is it a --job-trace FILE.json?)")
    lanes = sorted({e["tid"] for e in jobs})
    row_of = {lane: i for i, lane in enumerate(lanes)}
    end = max(e["ts"] + e["dur"] for e in jobs + planning)
    scale = (width - LEFT - 20) / max(end, 1)
    height = TOP + len(lanes) * (ROW + GAP) + BOTTOM
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="14">{escape(title)}</text>']
    for lane in lanes:
        y = TOP + row_of[lane] * (ROW + GAP)
        out.append(f'<text x="{LEFT - 6}" y="{y + ROW - 7}" text-anchor="end">lane {lane}</text>')
    for e in jobs:
        x, y = LEFT + e["ts"] * scale, TOP + row_of[e["tid"]] * (ROW + GAP)
        w = max(e["dur"] * scale, 1)
        args = e.get("args", {})
        tip = f'{e["name"]}: {e["dur"] / 1e6:.1f} s, cpu {args.get("cpu", 0):.1f} s'
        split = args.get("split", 0)
        if split:
            tip += f", --split-compile={split}"
        out.append(f'<g><title>{escape(tip)}</title>'
                   f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{ROW}" fill="{COLOURS[kind(e)]}" '
                   f'stroke="white" stroke-width="0.5"/>')
        for t in range(1, split):  # the split threads: stripes across the bar
            sy = y + t * ROW / split
            out.append(f'<line x1="{x:.1f}" x2="{x + w:.1f}" y1="{sy:.1f}" y2="{sy:.1f}" stroke="white" '
                       f'stroke-width="0.7" stroke-dasharray="3,2"/>')
        label = e["name"] + (f" ×{split}" if split else "")
        if w > 7 * len(label) * 0.8:
            out.append(f'<text x="{x + 3:.1f}" y="{y + ROW - 7}" fill="white">{escape(label)}</text>')
        out.append("</g>")
    axis_y = TOP + len(lanes) * (ROW + GAP) + 4
    seconds = end / 1e6
    step = next(s for s in (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1e9) if seconds / s <= 12)
    t = 0
    while t <= seconds:
        x = LEFT + t * 1e6 * scale
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP - 4}" y2="{axis_y}" stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{axis_y + 14}" text-anchor="middle">{t:g} s</text>')
        t += step
    legend_x = LEFT
    for name, colour in (("nvcc unit", COLOURS["nvcc"]), ("C/C++ unit", COLOURS["c++"]), ("link", COLOURS["link"]),
                         ("dashed: split-compile threads", "white")):
        out.append(f'<rect x="{legend_x}" y="{axis_y + 22}" width="10" height="10" fill="{colour}" stroke="#999"/>')
        out.append(f'<text x="{legend_x + 14}" y="{axis_y + 31}">{escape(name)}</text>')
        legend_x += 30 + 7 * len(name)
    out.append("</svg>\n")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="a --job-trace FILE.json")
    ap.add_argument("svg", help="the picture to write")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    with open(a.trace) as f:
        text = f.read()
    try:
        doc = json.loads(text)
    except ValueError:
        sys.exit(f"{a.trace} is not JSON: write the trace with --job-trace FILE.json (JSON lines are for scripts)")
    svg = render(doc, a.width, a.title or a.trace)
    with open(a.svg, "w") as f:
        f.write(svg)


if __name__ == "__main__":
    main()
