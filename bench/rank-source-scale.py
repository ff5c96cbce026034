#!/usr/bin/env python3
"""How the rank programs grow with the number of micro-batches.

For each schedule and micro-batch count, writes the rank sources
(flexpipe-compile --emit=cpp) and prints the time that took, the longest
rank source in lines, and the host C++ compiler's time and peak memory on
it (c++ -std=c++17 -O2 -c, as the rank executables are built). With loops
rolled from the repeating calls (docs/reference/FlexPipeConversionPasses.md)
the sources and their compile times stay about flat as m grows; written out,
1F1B's rank 1 at m = 20,000 was 170,000 lines that took 8 minutes and
2.3 GB to compile.

Usage: bench/rank-source-scale.py [BUILD_DIR]
"""

import os
import subprocess
import sys
import tempfile

from benchlib import ROOT, build_dir, timed
SCHEDULES = ["1f1b", "interleaved-1f1b", "zb-v"]
SIZES = [1000, 4000, 16000, 64000]


def main():
    build = build_dir(__doc__)
    if build is None:
        return
    compile_ = os.path.join(build, "bin", "flexpipe-compile")
    include = os.path.join(ROOT, "runtime", "include")
    print(f"{'schedule':<17} {'m':>6} {'--emit=cpp':>10} {'lines':>7} "
          f"{'c++ -O2':>8} {'MiB':>6}")
    with tempfile.TemporaryDirectory() as work:
        for name in SCHEDULES:
            for m in SIZES:
                out = os.path.join(work, f"{name}-{m}")
                emit = timed([compile_, os.path.join(ROOT, "schedules",
                                                       f"{name}.mlir"),
                               "--actors", "5", "--microbatches", str(m),
                               "--emit=cpp", "-o", out])
                sources = [os.path.join(out, f) for f in os.listdir(out)
                           if f.endswith(".cpp")]
                lines = {s: sum(1 for _ in open(s)) for s in sources}
                longest = max(lines, key=lines.get)
                # (ru_maxrss is the largest child so far: each compile runs
                # under a fresh python that reads its own peak.)
                probe = subprocess.run(
                    [sys.executable, "-c",
                     "import resource, subprocess, sys, time; "
                     "t = time.perf_counter(); "
                     "subprocess.run(sys.argv[1:], check=True); "
                     "print(time.perf_counter() - t, resource.getrusage("
                     "resource.RUSAGE_CHILDREN).ru_maxrss / 1024)",
                     "c++", "-std=c++17", "-O2", "-I", include, "-c",
                     longest, "-o", os.path.join(work, "rank.o")],
                    check=True, capture_output=True, text=True)
                seconds, mib = (float(x) for x in probe.stdout.split())
                print(f"{name:<17} {m:>6} {emit:>9.2f}s {lines[longest]:>7} "
                      f"{seconds:>7.2f}s {mib:>6.0f}", flush=True)


if __name__ == "__main__":
    main()
