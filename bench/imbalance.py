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

from benchlib import ROOT, build_dir


def seconds(text):
    value, unit = text.split()
    return float(value) / (1000 if unit == "ms" else 1)


UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
SIZE = r"([\d.]+ (?:B|KiB|MiB|GiB|TiB))"


def size_bytes(text):
    value, unit = text.split()
    return float(value) * UNITS[unit]


def main():
    build = build_dir(__doc__)
    if build is None:
        return
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
                # (Every actor's row: one under 1 GiB prints in MiB, and
                # such rows were dropped.)
                m = re.match(r"^(\d+)\s+([\d.]+ m?s)\s+([\d.]+ m?s)\s+"
                             r"[\d.]+%\s+" + SIZE + r"\s+" + SIZE + r"\s+" +
                             SIZE, line)
                if m:
                    busy.append(seconds(m.group(2)))
                    total.append(size_bytes(m.group(6)))
            if len(busy) != pp:
                sys.exit(f"imbalance.py: read {len(busy)} actors' rows of "
                         f"{pp} in the report of {vocab} at pp {pp}")
            print(f"| {vocab.upper()} | {pp} | {max(busy) / min(busy):.2f}x | "
                  f"{max(total) / min(total):.2f}x |")


if __name__ == "__main__":
    main()
