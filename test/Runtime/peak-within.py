#!/usr/bin/env python3
"""Checks a training run's log: every rank's measured peak activation memory
is at most the cost model's prediction plus SLACK KiB.

Usage: peak-within.py LOG SLACK_KIB

The log holds rank 0's lines 'peak activation memory per rank: A B ... KiB'
and 'predicted by the cost model per rank: A B ... KiB'. Prints one line per
rank and exits 1 when a rank exceeds its bound (or a line is missing).
"""
import re
import sys


def figures(text, label):
    match = re.search(re.escape(label) + r": (.*)", text)
    if not match:
        sys.exit(f"peak-within: no '{label}' line in the log")
    return [float(x) for x in re.findall(r"([0-9.]+) KiB", match.group(1))]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    text = open(sys.argv[1]).read()
    slack = float(sys.argv[2])
    peaks = figures(text, "peak activation memory per rank")
    predicted = figures(text, "predicted by the cost model per rank")
    if len(peaks) != len(predicted) or not peaks:
        sys.exit("peak-within: the two lines name different numbers of ranks")
    bad = 0
    for rank, (peak, bound) in enumerate(zip(peaks, predicted)):
        ok = peak <= bound + slack
        bad += not ok
        print(f"rank {rank}: peak {peak:.1f} KiB, predicted {bound:.1f} KiB: "
              f"{'ok' if ok else f'over by more than {slack:g} KiB'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
