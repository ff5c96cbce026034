#!/usr/bin/env python3
"""Compares what runtime operations wrote in a pipelined run and in the
reference trainer: for every PREFIX.rankR file in RUN_DIR, the file of the
same name in REF_DIR must hold the same lines (in any order: the reference
runs the instances in micro-batch order per stage, the ranks in program
order). With --iteration I only the lines of iteration I count (a run with
data parallelism sums gradients in another order, so later iterations
differ in the last bits). With --rel-tol X numbers may differ by X relative
(a GPU or the CUDA emulation sums in other orders; the other fields must
match; a real number inside a token, as in "0:1x32x64:7.993055", counts
as a number). With --positive the last field of every line must be a positive
number. Prints one line per rank file, then a summary; exits 1 on any
difference.

Usage: compare-op-logs.py RUN_DIR REF_DIR PREFIX [--iteration I] [--positive]
                          [--rel-tol X]
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


def number(token):
    """A token's value when it is a real number; integers (iterations,
    stages, micro-batches) are names and must match exactly."""
    if re.fullmatch(r"[-+]?\d+", token):
        return None
    try:
        return float(token)
    except ValueError:
        return None


# A real number inside a token ("0:1x32x64:7.993055"): digits with a point
# or an exponent. Integers stay names.
REAL = re.compile(r"([-+]?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][-+]?\d+)?)")


def fields(line):
    """A line's fields: its tokens, split around the real numbers in them."""
    return [piece for token in line.split() for piece in REAL.split(token)
            if piece]


def close(a, b, tol):
    """Whether lines a and b match: the same fields, numbers within tol."""
    x, y = fields(a), fields(b)
    if len(x) != len(y):
        return False
    for s, t in zip(x, y):
        u, v = number(s), number(t)
        if u is None or v is None:
            if s != t:
                return False
        elif abs(u - v) > tol * max(abs(u), abs(v), 1e-30):
            return False
    return True


def shape(line):
    """The line with its numbers left out: how lines pair up under --rel-tol."""
    return tuple(t if number(t) is None else "#" for t in fields(line))


def differs(run, ref, tol):
    """The first line of run or ref without its match in the other, or None."""
    if tol is None:
        only = sorted(set(run) ^ set(ref))
        return only[0] if only else None
    if len(run) != len(ref):
        return (run if len(run) > len(ref) else ref)[min(len(run), len(ref))]
    for a, b in zip(sorted(run, key=shape), sorted(ref, key=shape)):
        if not close(a, b, tol):
            return a
    return None


def main():
    args, iteration, positive, tol = [], None, False, None
    argv = iter(sys.argv[1:])
    for arg in argv:
        if arg == "--iteration":
            iteration = int(next(argv))
        elif arg == "--positive":
            positive = True
        elif arg == "--rel-tol":
            tol = float(next(argv))
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
        elif differs(run, ref, tol) is not None:
            status, failed = ("FAIL: differs from the reference, e.g. " +
                              differs(run, ref, tol)), True
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
