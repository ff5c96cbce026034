#!/usr/bin/env python3
"""How close a perfect cost model could come on this machine.

bench/cost-validation.py compares each candidate's predicted time with the
median of a few runs. Both sides carry the machine's noise: the runs, and
the profile the predictions come from. This script measures both, from a
cost-validation work directory (--work):

1. Runs: the best-ranked compiled candidate of each group (or --candidate
   N), run --runs times in turn with the iterations cost-validation gave
   it, then every median of 3 of those runs against the median of all of
   them: how often a median of 3 lands more than 10% and 15% away. A model
   that predicted each candidate's long-run median exactly would miss the
   15% target that often (times 40 candidates: its expected misses per
   validation run). Without --candidate, the best-ranked candidate one of
   whose validation runs printed its mean iteration time.
2. Profiles (--reprice CLUSTER ...): every candidate of every group priced
   by flexpipe-compile with each cluster file (say, profiles of this
   machine taken at different times, by the same code), and how far the
   predictions of one candidate spread: (max - min) / median.

Example (after a validation run with --work /tmp/cv):

  python3 bench/noise-floor.py build --work /tmp/cv --runs 20
  python3 bench/noise-floor.py build --work /tmp/cv --runs 0 \\
      --reprice profile-a.yaml profile-b.yaml profile-c.yaml

Exits 1 when a group's candidate ran fewer than 3 times or a candidate
could not be priced (each said on stderr).
"""

import argparse
import importlib.util
import itertools
import os
import re
import statistics
import subprocess
import sys
import types


def load_validation():
    """bench/cost-validation.py as a module (its run_once and helpers)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "cost-validation.py")
    spec = importlib.util.spec_from_file_location("cost_validation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cv = load_validation()
ITERATIONS = re.compile(r"--iterations (\d+)")
# The report's first line: "iteration time 12.345 ms" (s or us by size).
PREDICTED = re.compile(r"iteration time ([0-9.]+) (s|ms|us)\b")
DP = re.compile(r"--dp (\d+)")


def groups_of(work):
    """The group directories of a cost-validation work directory."""
    return sorted(d for d in os.listdir(work)
                  if os.path.isdir(os.path.join(work, d, "tune")))


def candidates_of(group_dir):
    """The compiled candidates of a group, by rank."""
    ranks = []
    for name in os.listdir(group_dir):
        m = re.fullmatch(r"cand-(\d+)", name)
        if m and os.path.exists(os.path.join(group_dir, name, "run-mpi.sh")):
            ranks.append(int(m.group(1)))
    return sorted(ranks)


def ran(exe_dir):
    """Whether one of the candidate's validation runs succeeded."""
    for name in os.listdir(exe_dir):
        if re.fullmatch(r"run-\d+\.log", name):
            with open(os.path.join(exe_dir, name)) as f:
                if cv.MEAN.search(f.read()):
                    return True
    return False


def iterations_of(exe_dir):
    """The iterations cost-validation ran the candidate with."""
    for name in ("run-1.log", "probe.log"):
        path = os.path.join(exe_dir, name)
        if os.path.exists(path):
            with open(path) as f:
                m = ITERATIONS.search(f.readline())
            if m:
                return int(m.group(1))
    return None


def run_noise(args, work):
    """Runs each group's candidate; returns whether every group got its
    runs."""
    picked = []
    complete = True
    for group in groups_of(work):
        ranks = candidates_of(os.path.join(work, group))
        if args.candidate is not None and args.candidate not in ranks:
            cv.log(f"[{group}] rank {args.candidate} was not compiled "
                   f"(compiled: {', '.join(map(str, ranks)) or 'none'})")
            complete = False
            continue
        rank = args.candidate if args.candidate is not None else next(
            (r for r in ranks
             if ran(os.path.join(work, group, f"cand-{r}"))), None)
        if rank is None:
            cv.log(f"[{group}] no compiled candidate that ran")
            complete = False
            continue
        exe_dir = os.path.join(work, group, f"cand-{rank}")
        iterations = iterations_of(exe_dir)
        if iterations is None:
            cv.log(f"[{group}] rank {rank}: no run log to take the "
                   f"iterations from")
            complete = False
            continue
        picked.append((group, rank, exe_dir, iterations, []))
    for i in range(1, args.runs + 1):
        for group, rank, exe_dir, iterations, times in picked:
            candidate = types.SimpleNamespace(exe_dir=exe_dir)
            ms, error = cv.run_once(args, candidate, iterations,
                                    f"noise-run-{i}.log")
            if error:
                cv.log(f"[{group}] run {i}: {error}")
                continue
            times.append(ms)
            cv.log(f"[{group}] rank {rank} run {i}/{args.runs}: {ms:.3f} ms")
    print(f"runs: {args.runs} per candidate, in turn; a median of 3 against "
          f"the median of all")
    for group, rank, _, iterations, times in picked:
        if len(times) < 3:
            print(f"  {group} rank {rank}: too few runs ({len(times)} of "
                  f"{args.runs} succeeded)")
            complete = False
            continue
        mid = statistics.median(times)
        triples = [statistics.median(c)
                   for c in itertools.combinations(times, 3)]
        beyond = {t: sum(abs(m / mid - 1) > t for m in triples) / len(triples)
                  for t in (0.10, 0.15)}
        print(f"  {group} rank {rank} ({iterations} iterations): median "
              f"{mid:.3f} ms, runs {min(times):.3f} to {max(times):.3f} "
              f"(spread {100 * (max(times) - min(times)) / mid:.0f}%); a "
              f"median of 3 beyond 10%: {100 * beyond[0.10]:.1f}%, beyond "
              f"15%: {100 * beyond[0.15]:.1f}% (of 40 candidates: "
              f"{40 * beyond[0.15]:.1f})")
    return complete


def reprice(args, work):
    """Prices every candidate with each cluster file; returns whether
    every candidate was priced."""
    complete = True
    compiler = os.path.join(args.build_dir, "bin", "flexpipe-compile")
    print(f"predictions by {len(args.reprice)} cluster files: "
          + ", ".join(args.reprice))
    spreads = []
    for group in groups_of(work):
        tune = os.path.join(work, group, "tune")
        group_spreads = []
        for rank in candidates_of(os.path.join(work, group)):
            spec = os.path.join(tune, f"rank-{rank}.mlir")
            with open(spec) as f:
                m = DP.search(f.read())
            predicted = []
            for cluster in args.reprice:
                result = subprocess.run(
                    [compiler, spec, "--model",
                     os.path.join(tune, f"rank-{rank}.model.yaml"),
                     "--cluster", cluster, "--time-model=cost", "--dp",
                     m.group(1) if m else "1", "--emit=report"],
                    capture_output=True, text=True)
                p = PREDICTED.search(result.stdout)
                if result.returncode != 0 or not p:
                    cv.log(f"[{group}] rank {rank} with {cluster}: no "
                           f"prediction: "
                           f"{cv.tail(result.stderr or result.stdout, 1)}")
                    complete = False
                    break
                predicted.append(1e3 * cv.to_seconds(p.group(1), p.group(2)))
            else:
                mid = statistics.median(predicted)
                group_spreads.append((max(predicted) - min(predicted)) / mid)
                print(f"  {group} rank {rank}: "
                      + " ".join(f"{p:.3f}" for p in predicted) + " ms")
        if group_spreads:
            print(f"  {group}: spread median "
                  f"{100 * statistics.median(group_spreads):.1f}%, max "
                  f"{100 * max(group_spreads):.1f}%")
            spreads += group_spreads
    if spreads:
        print(f"  all: {len(spreads)} candidates, spread median "
              f"{100 * statistics.median(spreads):.1f}%, max "
              f"{100 * max(spreads):.1f}%")
    return complete


def main():
    parser = argparse.ArgumentParser(
        description="Measure the noise floor of bench/cost-validation.py: "
                    "repeated runs of a candidate, and the spread of "
                    "predictions between cluster files (see the module "
                    "docstring).")
    parser.add_argument("build_dir", metavar="BUILD_DIR")
    parser.add_argument("--work", required=True, metavar="DIR",
                        help="a bench/cost-validation.py --work directory")
    parser.add_argument("--runs", type=int, default=20,
                        help="runs of each group's candidate; 0: none "
                             "(default: %(default)s)")
    parser.add_argument("--candidate", type=int, metavar="RANK",
                        help="the tuner's rank of the candidate to run "
                             "(default: the best-ranked one whose "
                             "validation run succeeded)")
    parser.add_argument("--reprice", nargs="+", default=[], metavar="YAML",
                        help="cluster files to price every candidate with")
    parser.add_argument("--run-timeout", type=float, default=300,
                        metavar="S", help="seconds before a run counts as "
                                          "failed (default: %(default)s)")
    args = parser.parse_args()
    if args.runs < 0 or (args.runs and args.runs < 3):
        parser.error("--runs must be 0 or at least 3")
    args.build_dir = cv.resolve(args.build_dir, "build directory")
    work = cv.resolve(args.work, "work directory")
    args.reprice = [cv.resolve(c, "cluster file", "configs/clusters")
                    for c in args.reprice]
    if not groups_of(work):
        parser.error(f"{work} holds no group of a cost-validation run")
    complete = True
    if args.runs:
        complete = run_noise(args, work) and complete
    if args.reprice:
        complete = reprice(args, work) and complete
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
