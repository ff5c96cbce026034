#!/usr/bin/env python3
"""Checks that flexpipe-compile's report of a spec written by flexpipe-tune
predicts the iteration and pipeline times the spec's header comment states.

usage: check-prediction.py SPEC.mlir REPORT.txt
"""
import re
import sys


def seconds(value, unit):
    return float(value) * (1e-3 if unit == "ms" else 1.0)


spec = open(sys.argv[1]).read()
report = open(sys.argv[2]).read()
predicted = re.search(r"predicted: iteration ([0-9.]+) (ms|s) \(pipeline ([0-9.]+) (ms|s),",
                      spec)
# "iteration time I = pipeline P + ...", or "iteration time I," when
# nothing follows the pipeline.
split = re.search(r"iteration time ([0-9.]+) (ms|s) = pipeline ([0-9.]+) (ms|s) ", report)
whole = re.search(r"iteration time ([0-9.]+) (ms|s),", report)
if not predicted or not (split or whole):
    sys.exit("check-prediction: no iteration time in the spec or the report")
pi, pp = seconds(*predicted.group(1, 2)), seconds(*predicted.group(3, 4))
if split:
    mi, mp = seconds(*split.group(1, 2)), seconds(*split.group(3, 4))
else:
    mi = mp = seconds(*whole.groups())
# The spec rounds to 1 us or 1 ms; the report too.
for what, p, m in (("iteration", pi, mi), ("pipeline", pp, mp)):
    if abs(p - m) > max(1e-3 * p, 1e-4):
        sys.exit(f"check-prediction: the spec predicts a {what} of {p} s, "
                 f"the report says {m} s")
print(f"prediction matches: {pi:.6g} s vs {mi:.6g} s")
