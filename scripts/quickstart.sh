#!/usr/bin/env bash
# FlexPipe quick start on a fresh Debian 12 machine: installs what is missing,
# builds, and runs the main job on the embedded default.
#
# The main job: schedule the default spec (1F1B on 4 actors,
# schedules/1f1b.mlir) for the tiny GPT (configs/models/tiny.yaml), print its
# timeline, compile one executable per rank, train it for a few iterations on
# 4 CPU ranks with mpirun, and compare the measured iteration time with the
# simulator's prediction from the profile this run measured. Another spec can
# be given as the first argument.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages
build_all

SPEC="${1:-$FLEXPIPE_ROOT/schedules/1f1b.mlir}"
MODEL="$FLEXPIPE_ROOT/configs/models/tiny.yaml"
CLUSTER="$FLEXPIPE_ROOT/configs/clusters/cpu.yaml"
RUN="$BUILD_DIR/quickstart"
COMPILE="$BUILD_DIR/bin/flexpipe-compile"

log "Scheduling $SPEC"
"$COMPILE" "$SPEC" --model "$MODEL" --cluster "$CLUSTER" --emit=text

log "Compiling one executable per rank into $RUN"
rm -rf "$RUN"
"$COMPILE" "$SPEC" --model "$MODEL" --cluster "$CLUSTER" --emit=exe -o "$RUN"

log "Training on $(grep -c . "$RUN/slurm.conf" | awk '{print $1 - 1}') CPU ranks"
"$RUN/run-mpi.sh" --iterations 10 --profile "$RUN/profile.yaml" | tee "$RUN/train.log"

log "Measured against predicted (simulated from this run's profile)"
"$COMPILE" "$SPEC" --model "$MODEL" --cluster "$CLUSTER" --profile "$RUN/profile.yaml" \
  --emit=report > "$RUN/report.txt"
measured=$(sed -n 's/^mean iteration time \([0-9.]*\) ms.*/\1/p' "$RUN/train.log")
predicted=$(sed -n 's/^iteration time \([0-9.]*\) \(m\{0,1\}s\),.*/\1 \2/p' "$RUN/report.txt")
bubble=$(sed -n 's/.*bubble ratio \([0-9.]*%\).*/\1/p' "$RUN/report.txt")
echo "measured iteration time:  $measured ms"
echo "predicted iteration time: $predicted (bubble ratio $bubble)"
log "Done. Next: scripts/test.sh runs every test suite; docs/GettingStarted.md is the tutorial."
