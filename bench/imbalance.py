#!/usr/bin/env python3
"""The paper's Figure 3: how a large vocabulary unbalances 1F1B's stages.

For GPT 5B (configs/models/gpt-5b-*.yaml) on A800s, simulates 1F1B with an
even layer split and prints, per vocabulary and pipeline depth, the slowest
stage's busy time over the fastest's and the largest actor memory over the
smallest. The paper reports 5.63x time and 4.87x memory at 1M (pp not stated).

Usage: bench/imbalance.py [BUILD_DIR]
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def seconds(text):
    value, unit = text.split()
    return float(value) / (1000 if unit == "ms" else 1)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    tool = os.path.join(build, "bin", "flexpipe-compile")
    print("| vocabulary | pp | slowest / fastest stage time | "
          "largest / smallest actor memory |")
    print("| --- | --- | --- | --- |")
    for vocab in ["64k", "128k", "256k", "512k", "1m"]:
        for pp in [4, 8, 16]:
            report = subprocess.run(
                [tool, os.path.join(ROOT, "schedules", "1f1b.mlir"),
                 "--actors", str(pp), "--microbatches", str(2 * pp),
                 "--model", os.path.join(ROOT, "configs", "models",
                                         f"gpt-5b-{vocab}.yaml"),
                 "--cluster", os.path.join(ROOT, "configs", "clusters",
                                           "a800.yaml"),
                 "--emit=report"], check=True, capture_output=True,
                text=True).stdout
            busy, total = [], []
            for line in report.splitlines():
                m = re.match(r"^(\d+)\s+([\d.]+ m?s)\s+([\d.]+ m?s)\s+[\d.]+%"
                             r"\s+[\d.]+ GiB\s+[\d.]+ GiB\s+([\d.]+) GiB", line)
                if m:
                    busy.append(seconds(m.group(2)))
                    total.append(float(m.group(4)))
            print(f"| {vocab.upper()} | {pp} | {max(busy) / min(busy):.2f}x | "
                  f"{max(total) / min(total):.2f}x |")


if __name__ == "__main__":
    main()
