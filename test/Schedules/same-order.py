#!/usr/bin/env python3
"""Compares the per-rank order of two PyTorch compute_only CSV files.

Idle (empty) cells, carriage returns and actions other than F/B/I/W (such as
REDUCE_GRAD) are ignored: only the order of computations per rank counts.
With --ranks, only the listed ranks are compared; with --only F (or B, I, W,
or several letters), only computations of those types. Exits 1 and prints
the first differing rank when the orders differ.

Usage: same-order.py OURS.csv REFERENCE.csv [--ranks 1,2,3] [--only F]
"""

import re
import sys

CELL = re.compile(r"^[0-9]+[FBIW][0-9]+$")


def rows(path, only):
    with open(path, encoding="utf-8") as f:
        return [[c for c in line.strip().split(",")
                 if CELL.match(c) and re.sub(r"[0-9]", "", c) in only]
                for line in f if line.strip()]


def main():
    args = sys.argv[1:]
    ranks = None
    if "--ranks" in args:
        i = args.index("--ranks")
        ranks = [int(r) for r in args[i + 1].split(",")]
        del args[i:i + 2]
    only = "FBIW"
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    ours, reference = rows(args[0], only), rows(args[1], only)
    if len(ours) != len(reference):
        print(f"{len(ours)} ranks, the reference has {len(reference)}")
        return 1
    for rank in ranks if ranks is not None else range(len(ours)):
        if ours[rank] != reference[rank]:
            print(f"rank {rank} differs:\n  ours:      {','.join(ours[rank])}\n"
                  f"  reference: {','.join(reference[rank])}")
            return 1
    print("same order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
