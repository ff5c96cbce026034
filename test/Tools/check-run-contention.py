"""Checks flexpipe-profile's contention in runs: where the progress has the
line 'computing in runs over k ranks against 1 (the slowdown fitted): 2: Rx
(Sx)', the cluster file's point at 2 ranks (no shape) is S, at least 1, and
R is positive. Without the line (one core), the file still has its point at
2 ranks."""
import re
import sys

progress = open(sys.argv[1]).read()
cluster = open(sys.argv[2]).read()
point = re.search(r"- \{ranks: 2, slowdown: ([0-9.e+-]+),", cluster)
if not point:
    sys.exit("no contention point at 2 ranks in the cluster file")
slowdown = float(point.group(1))
line = re.search(r"computing in runs over k ranks against 1 \(the slowdown "
                 r"fitted\): 2: ([0-9.]+)x \(([0-9.]+)x\)", progress)
if line:
    ratio, fitted = float(line.group(1)), float(line.group(2))
    if not ratio > 0:
        sys.exit(f"measured ratio {ratio}")
    if fitted < 1 or abs(fitted - slowdown) > 0.006:
        sys.exit(f"fitted {fitted}x printed, {slowdown} in the file")
print("ok")
