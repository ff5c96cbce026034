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
import tempfile

compile_tool, schedules, model, cluster, pps, ms = sys.argv[1:7]
profile = ["--profile", sys.argv[7]] if len(sys.argv) > 7 else []

# The same cluster with devices for the largest pp (a node keeps its size, so
# prices are those of the given file's nodes).
largest = max(map(int, pps.split(",")))
with open(cluster) as f:
    text = f.read()
found = re.search(r"^devices: *([0-9]+)", text, re.M)
if found and int(found.group(1)) < largest:
    text = text[:found.start(1)] + str(largest) + text[found.end(1):]
grown = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
grown.write(text)
grown.close()
cluster = grown.name


def seconds(spec, pp, m, time_model):
    out = subprocess.run(
        [compile_tool, spec, "--actors", str(pp), "--microbatches", str(m),
         "--model", model, "--cluster", cluster, "--time-model", time_model,
         "--emit=report"] + profile, capture_output=True, text=True)
    found = re.search(r"^iteration time ([0-9.]+) (ms|s)[ ,]", out.stdout, re.M)
    if out.returncode != 0 or not found:
        return None  # a size the spec cannot serve (it says why)
    return float(found.group(1)) * (1e-3 if found.group(2) == "ms" else 1)


pairs, worst, over, skipped = 0, 0.0, 0, 0
for name in sorted(os.listdir(schedules)):
    if not name.endswith(".mlir"):
        continue
    for pp in map(int, pps.split(",")):
        for m in map(int, ms.split(",")):
            spec = os.path.join(schedules, name)
            step, cost = (seconds(spec, pp, m, t) for t in ("step", "cost"))
            if step is None or cost is None:
                skipped += 1
                continue
            pairs += 1
            worst = max(worst, cost / step)
            if cost > 1.01 * step:
                over += 1
                print(f"{name} pp {pp} m {m}: cost {cost} s, step {step} s")
os.unlink(cluster)
print(f"cost-vs-step: {pairs} pairs, worst {worst:.4f}, {over} over 1%, "
      f"{skipped} sizes the spec cannot serve")
