#!/usr/bin/env bash
# Runtime overhead = measured iteration time / iteration time simulated from
# the same run's measured profile (issue 5's target: <= 1.10 with 2 ranks).
# Trains the tiny GPT with 1F1B on 2 CPU ranks. Prints figures; never fails
# on timing. Usage: bench/runtime-overhead.sh [BUILD_DIR] [ITERATIONS]
set -euo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
unset CDPATH # (else `cd` prints where it went, doubling ROOT)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
[ -x "$BUILD/bin/flexpipe-compile" ] || {
  echo "$0: $BUILD has no bin/flexpipe-compile: give a built build directory" >&2
  exit 1
}
ITERATIONS="${2:-30}"
RUN="$BUILD/bench-overhead"
COMPILE="$BUILD/bin/flexpipe-compile"
ARGS=("$ROOT/schedules/1f1b.mlir" --actors 2 --microbatches 8
      --model "$ROOT/configs/models/tiny.yaml"
      --cluster "$ROOT/configs/clusters/cpu.yaml")
rm -rf -- "$RUN"
"$COMPILE" "${ARGS[@]}" --emit=exe -o "$RUN"
"$RUN/run-mpi.sh" --iterations "$ITERATIONS" --profile "$RUN/profile.yaml" > "$RUN/train.log"
"$COMPILE" "${ARGS[@]}" --profile "$RUN/profile.yaml" --emit=report > "$RUN/report.txt"
measured=$(sed -n 's/^mean iteration time \([0-9.]*\) ms.*/\1/p' "$RUN/train.log")
predicted=$(sed -n 's/^iteration time \([0-9.]*\) ms[ ,].*/\1/p' "$RUN/report.txt")
echo "1F1B, tiny GPT, 2 CPU ranks, 8 micro-batches, $ITERATIONS iterations"
echo "measured iteration time:   $measured ms (mean over iterations after the first)"
echo "simulated from the profile: $predicted ms"
awk -v m="$measured" -v p="$predicted" 'BEGIN { printf "runtime overhead: %.3f (target <= 1.10)\n", m / p }'
