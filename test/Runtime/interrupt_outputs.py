#!/usr/bin/env python3
"""Interrupts a program while it writes result files through temporaries
(FILE.tmpPID) and lists what it left in WORK_DIR.

Starts COMMAND... (its output files in WORK_DIR), waits until a temporary
of one of them exists and the program has printed an iteration line, sends
SIGNAL (INT or TERM; lit runs tests with SIGINT ignored, which a child
inherits, so tests send TERM) to it, and prints the exit status as 'signal N' or
'exit N', then every file name left in WORK_DIR, sorted, one per line.

Usage: interrupt_outputs.py WORK_DIR SIGNAL COMMAND...
"""

import os
import signal
import subprocess
import sys
import time


def main():
    work, sig, command = sys.argv[1], sys.argv[2], sys.argv[3:]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    first = process.stdout.readline()
    while time.time() < deadline:
        if any(".tmp" in name for name in os.listdir(work)) and first:
            break
        time.sleep(0.05)
    else:
        process.kill()
        sys.exit("no temporary appeared within 60 s")
    process.send_signal(getattr(signal, "SIG" + sig))
    try:
        process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        sys.exit(f"SIG{sig} did not stop the program within 60 s")
    status = process.returncode
    print(f"signal {-status}" if status < 0 else f"exit {status}")
    for name in sorted(os.listdir(work)):
        print(name)


if __name__ == "__main__":
    main()
