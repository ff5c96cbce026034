#!/usr/bin/env python3
"""Compares what runtime operations wrote in a pipelined run and in the
reference trainer: for every PREFIX.rankR file in RUN_DIR, the file of the
same name in REF_DIR must hold the same lines (in any order: the reference
runs the instances in micro-batch order per stage, the ranks in program
order). With --iteration I only the lines of iteration I count (a run with
data parallelism sums gradients in another order, so later iterations
differ in the last bits). With --positive the last field of every line must
be a positive number. Prints one line per rank file, then a summary; exits 1
on any difference.

Usage: compare-op-logs.py RUN_DIR REF_DIR PREFIX [--iteration I] [--positive]
"""

import glob
import os
import re
import sys


def lines(path, iteration):
    with open(path) as f:
        result = [line.rstrip("\n") for line in f if line.strip()]
    if iteration is not None:
        pattern = re.compile(r"^(it|iteration) %d " % iteration)
        result = [line for line in result if pattern.match(line)]
    return sorted(result)


def main():
    args, iteration, positive = [], None, False
    argv = iter(sys.argv[1:])
    for arg in argv:
        if arg == "--iteration":
            iteration = int(next(argv))
        elif arg == "--positive":
            positive = True
        else:
            args.append(arg)
    if len(args) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    run_dir, ref_dir, prefix = args
    paths = sorted(glob.glob(os.path.join(run_dir, prefix + ".rank*")),
                   key=lambda p: int(p.rsplit("rank", 1)[1]))
    if not paths:
        print("FAIL: no %s.rank* files in %s" % (prefix, run_dir))
        return 1
    failed = False
    total = 0
    for path in paths:
        name = os.path.basename(path)
        run = lines(path, iteration)
        ref_path = os.path.join(ref_dir, name)
        ref = lines(ref_path, iteration) if os.path.exists(ref_path) else None
        status = "same as the reference"
        if ref is None:
            status, failed = "FAIL: the reference wrote no " + name, True
        elif run != ref:
            only = sorted(set(run) ^ set(ref))
            status, failed = "FAIL: differs from the reference, e.g. " + only[0], True
        if positive:
            bad = [line for line in run if not float(line.split()[-1]) > 0]
            if bad:
                status, failed = "FAIL: not positive: " + bad[0], True
        print("%s: %d lines, %s" % (name, len(run), status))
        total += len(run)
    print("%s: %d files, %d lines, %s" % (prefix, len(paths), total,
                                          "FAIL" if failed else "all match"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
