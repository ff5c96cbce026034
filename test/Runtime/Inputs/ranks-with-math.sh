#!/bin/bash
# ranks-with-math.sh RUN_DIR MATH... : starts the CUDA backend's ranks of
# RUN_DIR (one per MATH, a rank per actor) on their own, as run-env.sh
# would, each with its own FLEXPIPE_CUDA_MATH, for one iteration. Prints
# what they print; exits non-zero when a rank did.
set -u
dir=$1
shift
scratch=$(mktemp -d "${TMPDIR:-/tmp}/ranks-with-math.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
export WORLD_SIZE=$# LOCAL_WORLD_SIZE=$# FLEXPIPE_TIMEOUT=30
export FLEXPIPE_NCCL_ID_FILE=$scratch/id FLEXPIPE_RUN_ID=math-$$
pids=()
rank=0
for math in "$@"; do
  RANK=$rank LOCAL_RANK=$rank FLEXPIPE_CUDA_MATH=$math \
    "$dir/rank$rank" --iterations 1 &
  pids+=($!)
  rank=$((rank + 1))
done
status=0
for p in "${pids[@]}"; do
  wait "$p" || status=1
done
exit $status
