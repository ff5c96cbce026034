#!/usr/bin/env bash
# Compiles a schedule to rank executables, trains 4 iterations with mpirun,
# trains the same model in one process, and compares the two.
# Usage: train.sh WORK_DIR NAME SPEC [flexpipe-compile options...]
set -euo pipefail
work=$1 name=$2 spec=$3
shift 3
dir="$work/$name"
flexpipe-compile "$spec" "$@" --emit=exe -o "$dir"
"$dir/run-mpi.sh" --iterations 4 --losses "$dir/losses" --weights "$dir/weights" > "$dir/run.log"
flexpipe-reference "$dir/schedule.txt" --iterations 4 --losses "$dir/ref-losses" \
  --weights "$dir/ref-weights" > "$dir/ref.log"
python3 "$(dirname "$0")/../../scripts/compare-training.py" "$dir/losses" \
  "$dir/ref-losses" "$dir/weights" "$dir/ref-weights"
