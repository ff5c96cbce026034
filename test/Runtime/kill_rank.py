#!/usr/bin/env python3
"""Starts a compiled schedule's ranks, kills (or stops) one, and checks that
the others stop within seconds with a non-zero exit and a message naming the
dead rank.

Usage: kill_rank.py RUN_DIR ACTOR [KILL|STOP]

STOP sends SIGSTOP instead of SIGKILL: the rank stays alive but silent, which
only the liveness rule (FLEXPIPE_TIMEOUT, set to 3 s here) detects.
"""

import os
import re
import signal
import subprocess
import sys
import time


def main():
    run_dir, actor = sys.argv[1], sys.argv[2]
    how = sys.argv[3] if len(sys.argv) > 3 else "KILL"
    env = dict(os.environ, FLEXPIPE_TIMEOUT="3")
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
    time.sleep(1)
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
    print(output[-2000:])
    print(f"exit code {job.returncode} after {seconds:.1f} s")
    return 0 if job.returncode != 0 else 1


if __name__ == "__main__":
    sys.exit(main())
