#!/usr/bin/env python3
"""Compares a pipelined training run with the single-process reference.

Losses (one per line) must agree within 1e-5 relative per iteration; final
weights (files of 'NAME COUNT VALUES...' lines; the run's are split over
WEIGHTS.actorN files) within 1e-4 (absolute, or relative for large values);
and the loss must fall where the reference's falls (over a few iterations on
changing batches both may end higher; the summary says so). A slice of a parameter (vocabulary parallelism) is
written as 'NAME[r0:r1,c0:c1]/ROWSxCOLS COUNT VALUES' (the block's values row
by row); the slices of NAME are joined into the whole ROWS x COLS parameter,
which must be covered. --loss-tol and --weight-tol change the two bounds
(GPU runs: scripts/gpu-test.sh). Without the two weight arguments only the
losses are compared (runs whose weights are too large to carry). Prints a
summary line; exits 1 on any difference.

Adam steps a weight by about lr whatever its gradient's size, so a gradient
that cancels to rounding noise (a token's row summed over a batch to 1e-8
where the row's median is 1e-2) can step the run and the reference opposite
ways. A few weights, one in 100,000 compared and at least one, may be apart
by up to 2 lr per iteration (--lr, the runtime's default 1e-3); the summary
names them, and more of them, or farther apart, fail.

Usage: compare-training.py RUN_LOSSES REF_LOSSES [RUN_WEIGHTS_PREFIX REF_WEIGHTS]
                           [--loss-tol X] [--weight-tol Y] [--lr Z]
"""

import glob
import math
import re
import sys

SLICE = re.compile(r"^(.+)\[(\d+):(\d+),(\d+):(\d+)\]/(\d+)x(\d+)$")


def number(text, path, line):
    try:
        return float(text)
    except ValueError:
        sys.exit(f"{path}:{line}: '{text}' is not a number")


def losses(path):
    with open(path) as f:
        values = [number(line.strip(), path, i + 1)
                  for i, line in enumerate(f) if line.strip()]
    if not values:
        sys.exit(f"{path}: holds no losses")
    return values


def join_slices(table, slices, path):
    """Assembles each sliced parameter of `slices` into `table`."""
    for name, (rows, cols, blocks) in slices.items():
        if name in table:
            sys.exit(f"{path}: {name} is written both whole and in slices")
        whole = [None] * (rows * cols)
        for (r0, r1, c0, c1), values in blocks.items():
            width = c1 - c0
            for r in range(r0, r1):
                whole[r * cols + c0:r * cols + c1] = \
                    values[(r - r0) * width:(r - r0 + 1) * width]
        if any(v is None for v in whole):
            sys.exit(f"{path}: the slices of {name} do not cover it")
        table[name] = whole


def same(a, b):
    """Whether two copies of a parameter hold the same values (NaN as NaN:
    two diverged copies agree, and the comparison with the reference says
    so)."""
    return len(a) == len(b) and all(
        x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


def weights(paths):
    table, slices, source = {}, {}, {}
    for path in paths:
        with open(path) as f:
            for number_of_line, line in enumerate(f, 1):
                parts = line.split()
                if not parts:
                    continue
                if len(parts) < 2 or not parts[1].isdigit():
                    sys.exit(f"{path}:{number_of_line}: expected 'NAME COUNT "
                             "VALUES...'")
                name, count = parts[0], int(parts[1])
                values = [number(x, path, number_of_line) for x in parts[2:]]
                if len(values) != count:
                    sys.exit(f"{path}: {name} has {len(values)} values, "
                             f"expected {count}")
                part = SLICE.match(name)
                if not part:
                    # A stage held by two actors (the two directions of a
                    # bidirectional pipeline): both copies must agree.
                    if name in table and not same(table[name], values):
                        sys.exit(f"{path}: {name} differs from its copy in "
                                 f"{source[name]}: the actors that hold one "
                                 "stage must keep the same weights")
                    table[name], source[name] = values, path
                    continue
                base = part.group(1)
                r0, r1, c0, c1, rows, cols = map(int, part.groups()[1:])
                if (r1 - r0) * (c1 - c0) != count or r1 > rows or c1 > cols:
                    sys.exit(f"{path}: {name} does not fit its shape")
                shape = slices.setdefault(base, (rows, cols, {}))
                if shape[:2] != (rows, cols):
                    sys.exit(f"{path}: {base} has slices of different shapes")
                shape[2][(r0, r1, c0, c1)] = values
    join_slices(table, slices, " ".join(paths))
    return table


def main():
    args, tol = [], {"--loss-tol": 1e-5, "--weight-tol": 1e-4, "--lr": 1e-3}
    argv = iter(sys.argv[1:])
    for arg in argv:
        if arg in tol:
            try:
                value = float(next(argv, "nan"))
            except ValueError:
                value = float("nan")
            # 0 is exact for a tolerance, and a rate the ranks train with.
            if not 0 <= value < float("inf"):
                print(f"{arg} needs a finite number, 0 or more",
                      file=sys.stderr)
                return 2
            tol[arg] = value
        else:
            args.append(arg)
    if len(args) not in (2, 4):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    run_losses, ref_losses = losses(args[0]), losses(args[1])
    failures = []
    if len(run_losses) != len(ref_losses):
        failures.append(f"{len(run_losses)} iterations, the reference has "
                        f"{len(ref_losses)}")
    worst_loss = 0.0
    for i, (a, b) in enumerate(zip(run_losses, ref_losses)):
        rel = abs(a - b) / max(abs(b), 1e-12)
        if not math.isfinite(a) or not math.isfinite(b):
            rel = math.inf  # NaN compares false with every bound
        worst_loss = max(worst_loss, rel)
        if rel > tol["--loss-tol"]:
            failures.append(f"iteration {i}: loss {a:.9g}, reference {b:.9g}")
    notes = []
    if len(run_losses) > 1 and not run_losses[-1] < run_losses[0]:
        # A few iterations on changing batches may end higher than they
        # began; then the reference does too, and the run did what it did.
        if len(ref_losses) > 1 and not ref_losses[-1] < ref_losses[0]:
            notes.append("the loss did not fall in either (too few "
                         "iterations to show training)")
        else:
            failures.append(f"the loss did not fall ({run_losses[0]:.6f} -> "
                            f"{run_losses[-1]:.6f})")
    if len(args) == 2:
        for failure in failures:
            print("FAIL:", failure)
        print(f"training: {len(run_losses)} iterations, loss {run_losses[0]:.6f} "
              f"-> {run_losses[-1]:.6f}, worst loss difference {worst_loss:.2e} "
              f"(losses only){''.join('; ' + n for n in notes)}")
        return 1 if failures else 0
    run_weights = weights(sorted(glob.glob(args[2] + ".actor*")))
    ref_weights = weights([args[3]])
    if set(run_weights) != set(ref_weights):
        missing = sorted(set(ref_weights) - set(run_weights))
        extra = sorted(set(run_weights) - set(ref_weights))
        failures.append(f"parameters differ; missing in the run: "
                        f"{missing[:5]}, not in the reference: {extra[:5]}")
    worst_weight, compared, apart = 0.0, 0, []
    adam_step = 2 * tol["--lr"] * len(ref_losses)
    for name in sorted(set(run_weights) & set(ref_weights)):
        if len(run_weights[name]) != len(ref_weights[name]):
            failures.append(f"{name} has {len(run_weights[name])} values, the "
                            f"reference's {len(ref_weights[name])}")
        for i, (a, b) in enumerate(zip(run_weights[name], ref_weights[name])):
            diff = abs(a - b) / max(1.0, abs(b))
            if not math.isfinite(a) or not math.isfinite(b):
                diff = math.inf  # beyond any tolerance and any Adam step
            compared += 1
            if tol["--weight-tol"] < diff <= adam_step:
                apart.append((diff, f"{name}[{i}]"))
            else:
                worst_weight = max(worst_weight, diff)
    if len(apart) > max(1, compared // 100000):
        worst_weight = max(worst_weight, max(apart)[0])
        failures.append(f"{len(apart)} of {compared} weights are apart by "
                        "more than the tolerance")
    if worst_weight > tol["--weight-tol"]:
        failures.append(f"weights differ by up to {worst_weight:.3g}")
    for failure in failures:
        print("FAIL:", failure)
    flips = "".join(f"; {where} an Adam step apart ({diff:.2e})"
                    for diff, where in apart)
    print(f"training: {len(run_losses)} iterations, loss {run_losses[0]:.6f} "
          f"-> {run_losses[-1]:.6f}, worst loss difference {worst_loss:.2e}, "
          f"worst weight difference {worst_weight:.2e}, "
          f"{len(run_weights)} parameters{flips}"
          f"{''.join('; ' + n for n in notes)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
