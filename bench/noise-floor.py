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
   validation run).
2. Profiles (--reprice CLUSTER ...): every candidate of every group priced
   by flexpipe-compile with each cluster file (say, profiles of this
   machine taken at different times, by the same code), and how far the
   predictions of one candidate spread: (max - min) / median.

Example (after a validation run with --work /tmp/cv):

  python3 bench/noise-floor.py build --work /tmp/cv --runs 20
  python3 bench/noise-floor.py build --work /tmp/cv --runs 0 \\
      --reprice profile-a.yaml profile-b.yaml profile-c.yaml
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
PREDICTED = re.compile(r"iteration time ([0-9.]+) ms")
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
    picked = []
    for group in groups_of(work):
        ranks = candidates_of(os.path.join(work, group))
        rank = args.candidate if args.candidate in ranks else (
            ranks[0] if ranks else None)
        if rank is None:
            cv.log(f"[{group}] no compiled candidate")
            continue
        exe_dir = os.path.join(work, group, f"cand-{rank}")
        iterations = iterations_of(exe_dir)
        if iterations is None:
            cv.log(f"[{group}] rank {rank}: no run log to take the "
                   f"iterations from")
            continue
        picked.append((group, rank, exe_dir, iterations, []))
    for i in range(1, args.runs + 1):
        for group, rank, exe_dir, iterations, times in picked:
            candidate = types.SimpleNamespace(exe_dir=exe_dir)
            ms, error = cv.run_once(args, candidate, iterations,
                                    "noise-run.log")
            if error:
                cv.log(f"[{group}] run {i}: {error}")
                continue
            times.append(ms)
            cv.log(f"[{group}] rank {rank} run {i}/{args.runs}: {ms:.3f} ms")
    print(f"runs: {args.runs} per candidate, in turn; a median of 3 against "
          f"the median of all")
    for group, rank, _, iterations, times in picked:
        if len(times) < 3:
            print(f"  {group} rank {rank}: too few runs")
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


def reprice(args, work):
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
                    cv.log(f"[{group}] rank {rank} with {cluster}: "
                           f"{cv.tail(result.stderr or result.stdout, 1)}")
                    break
                predicted.append(float(p.group(1)))
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
    parser.add_argument("--candidate", type=int, default=1, metavar="RANK",
                        help="the tuner's rank of the candidate to run "
                             "(default: the best that compiled)")
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
    if args.runs:
        run_noise(args, work)
    if args.reprice:
        reprice(args, work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
