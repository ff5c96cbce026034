#!/usr/bin/env python3
"""Starts a compiled schedule's ranks, kills (or stops) one, and checks that
the others stop within seconds with a non-zero exit and a message naming the
dead rank.

Usage: kill_rank.py RUN_DIR ACTOR [KILL|STOP|SUSPEND] [--direct]

STOP sends SIGSTOP instead of SIGKILL: the rank stays alive but silent, which
only the liveness rule (FLEXPIPE_TIMEOUT, set to 3 s here) detects.
SUSPEND stops every rank of the run for 6 s and continues them (a job
suspended, as Ctrl-Z or Slurm's suspend do): the run must go on, the time it
was stopped being no peer's lack of progress.

By default the ranks start under run-mpi.sh. With --direct each rank starts
on its own, with the variables run-env.sh sets (CUDA backend), and no
launcher stops the others: they must find the dead rank themselves (the
CUDA backend's watchdog). Prints each rank's exit code and last words.
"""

import os
import re
import select
import signal
import subprocess
import sys
import time


def until_training(stream):
    """Reads `stream` until rank 0 has printed iteration 0 (start-up is
    over: a rank stopped earlier may hold the others in MPI_Init or NCCL's
    initialisation, which no timeout covers); returns what it read."""
    seen, deadline = "", time.time() + 120
    while "iteration 0:" not in seen and time.time() < deadline:
        ready, _, _ = select.select([stream], [], [], 1)
        if ready:
            chunk = os.read(stream.fileno(), 4096).decode()
            if not chunk:
                break
            seen += chunk
    return seen


def direct(run_dir, actor, how, env):
    """Starts every rank on its own, kills rank ACTOR, waits for the rest."""
    with open(os.path.join(run_dir, "run-env.sh")) as f:
        sizes = re.search(r"^actors=(\d+) dp=(\d+) world=(\d+)$", f.read(),
                          re.M)
    dp, world = int(sizes.group(2)), int(sizes.group(3))
    env = dict(env, WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
               FLEXPIPE_NCCL_ID_FILE=os.path.join(run_dir, "kill-rank-id"),
               FLEXPIPE_RUN_ID="kill-rank-%d" % os.getpid())
    ranks = []
    for r in range(world):
        ranks.append(subprocess.Popen(
            [os.path.join(run_dir, "rank%d" % (r // dp)), "--iterations",
             "1000000"], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    victim = ranks[int(actor)]
    # Rank 0 prints the iterations, also when it is the victim (watching
    # rank 1 then waited for a line it never prints, 120 s).
    watched = ranks[0]
    seen = until_training(watched.stdout)
    os.kill(victim.pid, signal.SIGSTOP if how == "STOP" else signal.SIGKILL)
    killed, failed = time.time(), 0
    for r, rank in enumerate(ranks):
        if rank is victim:
            continue
        try:
            output, _ = rank.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            rank.kill()
            output, _ = rank.communicate()
            print(f"FAIL: rank {r} still ran 30 s after the {how}")
            failed = 1
        if rank is watched:
            output = seen + output
        last = [line for line in output.splitlines() if "flexpipe:" in line]
        print(f"rank {r}: exit code {rank.returncode} after "
              f"{time.time() - killed:.1f} s: {last[-1] if last else ''}")
        failed |= rank.returncode == 0
    victim.kill()
    victim.communicate()
    return failed


def suspend(job, run_dir):
    """Stops every rank of the job for twice FLEXPIPE_TIMEOUT, continues
    them, and checks that the job still trains 3 s later."""
    pattern = "^" + re.escape(os.path.realpath(run_dir)) + "/rank[0-9]+ "
    ranks = [int(p) for p in subprocess.run(
        ["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()]
    for pid in ranks:
        os.kill(pid, signal.SIGSTOP)
    time.sleep(6)
    for pid in ranks:
        os.kill(pid, signal.SIGCONT)
    time.sleep(3)
    alive = job.poll() is None
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    output, _ = job.communicate()
    if not alive:
        print(output[-2000:])
    print(f"{len(ranks)} ranks suspended for 6 s: "
          f"{'still training' if alive else 'the job ended'}")
    return 0 if alive else 1


def main():
    run_dir, actor = sys.argv[1], sys.argv[2]
    how = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "--direct" \
        else "KILL"
    env = dict(os.environ, FLEXPIPE_TIMEOUT="3")
    if "--direct" in sys.argv[3:]:
        return direct(run_dir, actor, how, env)
    job = subprocess.Popen([os.path.join(run_dir, "run-mpi.sh"),
                            "--iterations", "1000000"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, start_new_session=True, env=env)
    victim = None
    deadline = time.time() + 20
    while victim is None and time.time() < deadline:
        time.sleep(0.5)
        # This run's rank only: other runs (parallel test suites) may have
        # a rank of the same number.
        pattern = "^" + re.escape(os.path.realpath(run_dir)) + \
            f"/rank{actor} --iterations"
        found = subprocess.run(["pgrep", "-f", pattern],
                               capture_output=True, text=True).stdout.split()
        victim = int(found[0]) if found else None
    if victim is None:
        os.killpg(job.pid, signal.SIGKILL)
        print("FAIL: rank process never appeared")
        return 1
    seen = until_training(job.stdout)
    if how == "SUSPEND":
        return suspend(job, run_dir)
    os.kill(victim, signal.SIGSTOP if how == "STOP" else signal.SIGKILL)
    killed = time.time()
    try:
        output, _ = job.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        print(f"FAIL: the other ranks were still running 30 s after the {how}")
        return 1
    finally:
        if how == "STOP":  # the stopped rank may outlive its launcher
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                pass
    seconds = time.time() - killed
    output = seen + output
    print(output[-2000:])
    print(f"exit code {job.returncode} after {seconds:.1f} s")
    return 0 if job.returncode != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
