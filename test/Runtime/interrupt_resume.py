#!/usr/bin/env python3
"""Starts a compiled schedule's ranks with a checkpoint after every
iteration, kills every rank (SIGKILL, wherever they are: training, writing a
checkpoint, removing the previous one) once generation 3 is whole, resumes from
the checkpoint directory, and requires the resumed run's losses and final
weights to be byte for byte those of an uninterrupted run.

Usage: interrupt_resume.py RUN_DIR WORK_DIR ITERATIONS
"""

import filecmp
import glob
import os
import re
import signal
import subprocess
import sys
import time


def generations(ckpt, ranks):
    """The generations K with a file iter-K.rankR for every rank R."""
    found = {}
    for path in glob.glob(os.path.join(ckpt, "iter-*.rank*")):
        m = re.fullmatch(r"iter-(\d+)\.rank(\d+)", os.path.basename(path))
        if m:
            found.setdefault(int(m.group(1)), set()).add(int(m.group(2)))
    return sorted(k for k, r in found.items() if r == set(range(ranks)))


def kill_ranks(run_dir):
    """SIGKILL to this run's rank processes still alive (by their ids)."""
    pattern = "^" + re.escape(os.path.realpath(run_dir)) + "/rank[0-9]+ "
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True,
                           text=True).stdout.split()
    for pid in found:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def main():
    run_dir, work, iterations = sys.argv[1], sys.argv[2], sys.argv[3]
    run = os.path.join(run_dir, "run-mpi.sh")
    # Every rank of the job, replicas too: run-mpi.sh starts each with
    # "-np 1" (counting the executables gave the actors alone with dp > 1).
    with open(run) as f:
        ranks = f.read().count('-np 1 "$dir/rank') or 1
    os.makedirs(work, exist_ok=True)
    ckpt = os.path.join(work, "ckpt")
    job = subprocess.Popen([run, "--iterations", iterations, "--checkpoint",
                            ckpt, "--checkpoint-every", "1"],
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    # Once generation 3 is whole: the run has replaced generations already.
    while not [k for k in generations(ckpt, ranks) if k >= 3] and \
            job.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    if job.poll() is not None:
        print(f"FAIL: the run ended (exit code {job.returncode}) before it "
              "was killed")
        return 1
    os.killpg(job.pid, signal.SIGKILL)
    kill_ranks(run_dir)
    job.wait()
    time.sleep(0.5)
    kill_ranks(run_dir)
    whole = generations(ckpt, ranks)
    if not whole:
        print("FAIL: no whole generation after the kill")
        return 1
    resumed = subprocess.run([run, "--iterations", iterations, "--resume",
                              ckpt, "--losses",
                              os.path.join(work, "resumed.losses"),
                              "--weights", os.path.join(work, "resumed.w")],
                             capture_output=True, text=True)
    straight = subprocess.run([run, "--iterations", iterations, "--losses",
                               os.path.join(work, "straight.losses"),
                               "--weights", os.path.join(work, "straight.w")],
                              capture_output=True, text=True)
    for name, result in (("resumed", resumed), ("straight", straight)):
        if result.returncode != 0:
            print(f"FAIL: the {name} run exited with {result.returncode}:\n" +
                  result.stdout[-2000:] + result.stderr[-2000:])
            return 1
    files = ["losses"] + [os.path.basename(p)[len("straight."):] for p in
                          glob.glob(os.path.join(work, "straight.w.actor*"))]
    for f in files:
        a = os.path.join(work, "straight." + f)
        b = os.path.join(work, "resumed." + f)
        if not filecmp.cmp(a, b, shallow=False):
            print(f"FAIL: {a} and {b} differ")
            return 1
    print(f"killed at generation {whole[-1]}; resumed losses and weights are "
          f"bitwise equal ({len(files)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
