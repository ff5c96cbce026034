#!/usr/bin/env python3
"""Differential test of schedules/ against PyTorch 2.15's schedule generators.

For every spec in schedules/ with a PyTorch counterpart, at every size of the
chosen grid and in both time models, the spec is compiled with

    flexpipe-compile SPEC --actors P --microbatches M --time-model T \
        --emit=torch-csv

and the export is replayed by replay.py (an independent simulator: F=1, B=2,
I=W=1 per rank share, free communication). Its makespan must be no greater
than that of PyTorch's order of the same family at the same size, and its peak
activations (stage-micro-batch units) no greater, both as replayed by the same
replay.py (pytorch-reference.csv, made by scripts/torch-orders.py).

Where PyTorch makes no order of the family at a size (1F1B with m < pp,
Interleaved1F1B and ZB1P when m is not a multiple of m // pp), the spec is held
to its relatives instead: no slower than the best of them, no peak checked.

Without --model, flexpipe-compile keeps the spec's layers per stage when
--actors changes, so the cost time model sees the same uniform stages as the
replay (backward twice the forward).

With --orders GRID (../shared/reference/peer-orders/grid), the exports are
also compared cell by cell with PyTorch's own orders at the sizes GRID holds
(ppP_mM/FAMILY.csv): a table says at how many of them each spec's order is
PyTorch's, and where not. That is information, not a check: a spec may order
differently at no cost (docs/Schedules.md says where and why). PyTorch's
1F1B numbers its last rank's forwards 1..M; they are read as 0..M-1.

Usage: differential.py --compile BUILD/bin/flexpipe-compile
           [--grid ci|full] [--jobs N] [--verbose] [--orders GRID]
Prints one line per failure, a table of the tightest margins per spec, and
'differential: N passed, M failed'; exits 1 on any failure.
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import replay  # noqa: E402

# spec -> (PyTorch family, stages per rank, relatives when PyTorch has none).
SPECS = {
    "gpipe": ("GPipe", 1, []),
    "1f1b": ("1F1B", 1, ["GPipe"]),
    "interleaved-1f1b": ("Interleaved1F1B", 2, ["LoopedBFS", "1F1B", "GPipe"]),
    "looped-bfs": ("LoopedBFS", 2, []),
    "zb-h1": ("ZB1P", 1, ["1F1B", "GPipe"]),
    "zb-v": ("ZBVZeroBubble", 2, []),
}


def grid(kind):
    """The (pp, m) sizes: pp 2..8 with m 1..4pp, plus a few at pp 16 and 32
    (full); the CI grid takes every m up to 2pp+1 and then a stride."""
    sizes = []
    for pp in range(2, 9):
        for m in range(1, 4 * pp + 1):
            if kind == "full" or m <= 2 * pp + 1 or m % pp == 0 or m % 3 == 1:
                sizes.append((pp, m))
    sizes += [(16, m) for m in (16, 24, 32, 48, 64)] + [(32, 32), (32, 64)]
    return sizes


def load_reference(path):
    table = {}
    with open(path, encoding="utf-8") as f:
        next(f)
        for line in f:
            family, pp, m, makespan, peak = line.strip().split(",")
            table[(family, int(pp), int(m))] = (
                replay.parse_number(makespan),
                replay.parse_number(peak),
            )
    return table


def export(tool, spec, pp, m, model):
    """The spec's order at one size: its rows of cells, or an error string."""
    path = os.path.join(ROOT, "schedules", spec + ".mlir")
    with tempfile.NamedTemporaryFile(suffix=".csv", delete=False) as f:
        out = f.name
    try:
        proc = subprocess.run(
            [tool, path, "--actors", str(pp), "--microbatches", str(m),
             "--time-model", model, "--emit=torch-csv", "-o", out],
            capture_output=True, text=True)
        if proc.returncode != 0:
            return f"flexpipe-compile failed: {proc.stderr.strip()[:300]}"
        return replay.load(out)
    except replay.ReplayError as error:
        return f"cannot read the export: {error}"
    finally:
        os.unlink(out)


def run_case(tool, spec, pp, m, model):
    """Compiles and replays one case: (makespan, peak) or an error string."""
    rows = export(tool, spec, pp, m, model)
    if isinstance(rows, str):
        return rows
    try:
        result = replay.replay(rows, SPECS[spec][1])
    except replay.ReplayError as error:
        return f"replay failed: {error}"
    return result.makespan, result.peak


def pytorch_order(grid_dir, family, pp, m):
    """PyTorch's order of `family` at one size from GRID, or None."""
    path = os.path.join(grid_dir, f"pp{pp}_m{m}", family + ".csv")
    if not os.path.exists(path):
        return None
    rows = replay.load(path)
    if family == "1F1B":  # the last rank's forwards are numbered 1..M
        rows[-1] = [tuple(replay.Action(a.stage, a.kind, a.microbatch - 1)
                          if a.kind == "F" else a for a in cell)
                    for cell in rows[-1]]
    return rows


def compare_orders(tool, grid_dir, jobs):
    """Prints, per spec and time model, at which of GRID's sizes the export
    is PyTorch's order cell for cell."""
    names = (re.fullmatch(r"pp(\d+)_m(\d+)", d) for d in os.listdir(grid_dir))
    sizes = sorted((int(n[1]), int(n[2])) for n in names if n)
    cases = [(spec, pp, m, model) for spec in SPECS for (pp, m) in sizes
             for model in ("step", "cost")
             if pytorch_order(grid_dir, SPECS[spec][0], pp, m) is not None]
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        ours = list(pool.map(lambda c: export(tool, *c), cases))
    table = {}  # (spec, model) -> (same, total, sizes that differ)
    for (spec, pp, m, model), rows in zip(cases, ours):
        same, total, differ = table.get((spec, model), (0, 0, []))
        if rows == pytorch_order(grid_dir, SPECS[spec][0], pp, m):
            same += 1
        else:
            differ = differ + [f"{pp}x{m}"]
        table[(spec, model)] = (same, total + 1, differ)
    print(f"{'spec':18} {'model':5} {'same order as PyTorch':>22}  differs at")
    for (spec, model), (same, total, differ) in sorted(table.items()):
        print(f"{spec:18} {model:5} {f'{same} of {total} sizes':>22}  "
              + (" ".join(differ) or "-"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--compile", required=True, help="flexpipe-compile")
    parser.add_argument("--reference",
                        default=os.path.join(HERE, "pytorch-reference.csv"))
    parser.add_argument("--grid", choices=["ci", "full"], default="full")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--orders", metavar="GRID",
                        help="also compare orders cell by cell with GRID's")
    args = parser.parse_args()
    reference = load_reference(args.reference)

    cases = [(spec, pp, m, model) for spec in SPECS for (pp, m) in grid(args.grid)
             for model in ("step", "cost")]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: run_case(args.compile, *c), cases))

    passed = failed = 0
    tightest = {}  # (spec, model) -> (ratio, pp, m)
    for (spec, pp, m, model), result in zip(cases, results):
        family, _, relatives = SPECS[spec]
        where = f"{spec} pp={pp} m={m} {model}"
        if isinstance(result, str):
            print(f"FAIL: {where}: {result}")
            failed += 1
            continue
        makespan, peak = result
        if (family, pp, m) in reference:
            bound, bound_peak = reference[(family, pp, m)]
            against = family
        else:
            options = [(reference[(r, pp, m)][0], r) for r in relatives
                       if (r, pp, m) in reference]
            if not options:
                print(f"FAIL: {where}: no PyTorch order of {family} or its "
                      "relatives at this size")
                failed += 1
                continue
            bound, against = min(options)
            bound_peak = None
        problems = []
        if makespan > bound:
            problems.append(f"makespan {replay.format_number(makespan)} > "
                            f"{against}'s {replay.format_number(bound)}")
        if bound_peak is not None and peak > bound_peak:
            problems.append(f"peak {replay.format_number(peak)} > "
                            f"{against}'s {replay.format_number(bound_peak)}")
        if problems:
            print(f"FAIL: {where}: " + "; ".join(problems))
            failed += 1
        else:
            passed += 1
            if args.verbose:
                print(f"PASS: {where}: {replay.format_number(makespan)} <= "
                      f"{against}'s {replay.format_number(bound)}")
        ratio = Fraction(makespan) / bound
        key = (spec, model)
        if key not in tightest or ratio > tightest[key][0]:
            tightest[key] = (ratio, pp, m)

    print(f"{'spec':18} {'model':5} {'worst makespan / PyTorch':>26}  at")
    for (spec, model), (ratio, pp, m) in sorted(tightest.items()):
        print(f"{spec:18} {model:5} {float(ratio):26.4f}  pp={pp} m={m}")
    if args.orders:
        compare_orders(args.compile, args.orders, args.jobs)
    print(f"differential: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
