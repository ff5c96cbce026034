#!/usr/bin/env bash
# Compiles a schedule to rank executables, trains 4 iterations with mpirun,
# trains the same model in one process, and compares the two (losses within
# 1e-5, weights within 1e-4; CUDA ranks, --backend=cuda-emulation, within
# the GPU test's 1e-3 for weights: attention's products are cuBLAS's, which
# sum in another order than Model.cpp, and Adam's step turns a rounding
# difference in a gradient near zero into up to 2 lr for that weight).
# Usage: train.sh WORK_DIR NAME SPEC [flexpipe-compile options...]
set -euo pipefail
work=$1 name=$2 spec=$3
shift 3
dir="$work/$name"
flexpipe-compile "$spec" "$@" --emit=exe -o "$dir"
"$dir/run-mpi.sh" --iterations 4 --losses "$dir/losses" --weights "$dir/weights" > "$dir/run.log"
flexpipe-reference "$dir/schedule.txt" --iterations 4 --losses "$dir/ref-losses" \
  --weights "$dir/ref-weights" > "$dir/ref.log"
tolerance=()
case " $* " in *" --backend=cuda-emulation "*) tolerance=(--weight-tol 1e-3) ;; esac
python3 "$(dirname "$0")/../../scripts/compare-training.py" "$dir/losses" \
  "$dir/ref-losses" "$dir/weights" "$dir/ref-weights" "${tolerance[@]}"
