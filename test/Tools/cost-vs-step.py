#!/usr/bin/env python3
"""The cost time model's schedule is never more than 1% slower than the step
model's order of the same spec under the same costs (both simulated by
flexpipe-compile --emit=report), for every spec in schedules/ at the given
sizes. Prints every pair over the limit and a summary line.

usage: cost-vs-step.py FLEXPIPE_COMPILE SCHEDULES_DIR MODEL CLUSTER PP,.. M,..
                       [PROFILE]
"""
import os
import re
import subprocess
import sys

compile_tool, schedules, model, cluster, pps, ms = sys.argv[1:7]
profile = ["--profile", sys.argv[7]] if len(sys.argv) > 7 else []


def seconds(spec, pp, m, time_model):
    out = subprocess.run(
        [compile_tool, spec, "--actors", str(pp), "--microbatches", str(m),
         "--model", model, "--cluster", cluster, "--time-model", time_model,
         "--emit=report"] + profile, capture_output=True, text=True)
    found = re.search(r"^iteration time ([0-9.]+) (ms|s)[ ,]", out.stdout, re.M)
    if out.returncode != 0 or not found:
        return None  # a size the spec cannot serve (it says why)
    return float(found.group(1)) * (1e-3 if found.group(2) == "ms" else 1)


pairs, worst, over = 0, 0.0, 0
for name in sorted(os.listdir(schedules)):
    if not name.endswith(".mlir"):
        continue
    for pp in map(int, pps.split(",")):
        for m in map(int, ms.split(",")):
            spec = os.path.join(schedules, name)
            step, cost = (seconds(spec, pp, m, t) for t in ("step", "cost"))
            if step is None or cost is None:
                continue
            pairs += 1
            worst = max(worst, cost / step)
            if cost > 1.01 * step:
                over += 1
                print(f"{name} pp {pp} m {m}: cost {cost} s, step {step} s")
print(f"cost-vs-step: {pairs} pairs, worst {worst:.4f}, {over} over 1%")
