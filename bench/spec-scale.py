#!/usr/bin/env python3
"""How reading a spec grows with the ops that name other ops.

Writes specs with K registered stages, K instructions attached to them and K
dependencies (3K ops that look up symbols), and times flexpipe-opt (parse
and verify) and flexpipe-compile --emit=schedule (verify, read the spec,
schedule, write the schedule) on each. The time per op should stay about
flat as K doubles; a lookup that searches the pipeline's ops makes it grow
with K.

Usage: bench/spec-scale.py [BUILD_DIR]
"""

import os
import resource
import tempfile

from benchlib import build_dir, timed

SIZES = [1000, 2000, 4000, 8000, 16000]


def spec(count):
    lines = ["flexpipe.pipeline @scale actors(2) microbatches(2) {",
             "  flexpipe.module @gpt layers(2) placement(one_to_one)"]
    for k in range(count):
        lines += [f"  flexpipe.stage @s{k} actors [0, 1]",
                  f"  flexpipe.instruction @i{k} kind(all_gather) on(@s{k})",
                  f"  flexpipe.dependency fwd @gpt[-1] -> @i{k} @s{k}"]
    lines += ["  flexpipe.priority cttp<bwd_first> fstp<breadth_first> "
              "bstp<breadth_first>", "}"]
    return "\n".join(lines) + "\n"


def main():
    build = build_dir(__doc__)
    if build is None:
        return
    opt = os.path.join(build, "bin", "flexpipe-opt")
    compile_ = os.path.join(build, "bin", "flexpipe-compile")
    print(f"{'K':>6} {'ops':>6} {'flexpipe-opt':>13} {'us/op':>7} "
          f"{'compile':>9} {'us/op':>7}")
    with tempfile.TemporaryDirectory() as work:
        for count in SIZES:
            path = os.path.join(work, f"scale{count}.mlir")
            with open(path, "w") as out:
                out.write(spec(count))
            out_path = os.path.join(work, "out.mlir")
            t_opt = timed([opt, path, "-o", out_path])
            t_compile = timed([compile_, "--emit=schedule", path,
                               "-o", out_path])
            ops = 3 * count
            print(f"{count:>6} {ops:>6} {t_opt:>11.2f} s {1e6 * t_opt / ops:>7.1f}"
                  f" {t_compile:>7.2f} s {1e6 * t_compile / ops:>7.1f}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"largest child peak memory: {peak:.0f} MB")


if __name__ == "__main__":
    main()
