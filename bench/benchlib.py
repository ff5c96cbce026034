"""What the bench scripts share: the build directory they take and timing a
command."""

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_dir(doc):
    """The build directory: the first argument, else ROOT/build; None after
    printing `doc` for -h or --help."""
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(doc.strip())
        return None
    return sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")


def timed(command):
    """Seconds `command` took (its output dropped; a failure raises)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start
