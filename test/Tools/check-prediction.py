#!/usr/bin/env python3
"""Checks that flexpipe-compile's report of a spec written by flexpipe-tune
predicts the pipeline time the spec's header comment states.

usage: check-prediction.py SPEC.mlir REPORT.txt
"""
import re
import sys


def seconds(value, unit):
    return float(value) * (1e-3 if unit == "ms" else 1.0)


spec = open(sys.argv[1]).read()
report = open(sys.argv[2]).read()
predicted = re.search(r"\(pipeline ([0-9.]+) (ms|s),", spec)
measured = re.search(r"iteration time ([0-9.]+) (ms|s),", report)
if not predicted or not measured:
    sys.exit("check-prediction: no pipeline time in the spec or the report")
p, m = seconds(*predicted.groups()), seconds(*measured.groups())
# The spec rounds to 0.1 ms or 1 ms; the report to 1 us or 1 ms.
if abs(p - m) > max(1e-3 * p, 1e-4):
    sys.exit(f"check-prediction: the spec predicts {p} s, the report says {m} s")
print(f"prediction matches: {p:.6g} s vs {m:.6g} s")
