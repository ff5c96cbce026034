#!/usr/bin/env bash
# FlexPipe quick start on a fresh Debian 12 machine: installs what is missing,
# builds, and runs the main job on the embedded default.
#
# The main job: measure this machine with flexpipe-profile (cached in
# build/machine-profile.yaml; remade when the runtime changes or when
# flexpipe-profile --check finds the machine 10% faster or slower than the
# cached figures), tune the tiny
# GPT (configs/models/tiny.yaml) for 4 CPU ranks on that measured cluster
# with flexpipe-tune, print its ranked table, compile the winning spec into
# one executable per rank, train it with mpirun, and print the tuner's
# predicted iteration time next to the measured one. A spec given as the
# first argument is compiled and trained instead of the tuner's winner.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ensure_packages
build_all

MODEL="$FLEXPIPE_ROOT/configs/models/tiny.yaml"
CLUSTER="$BUILD_DIR/machine-profile.yaml"
RANKS=4
RUN="$BUILD_DIR/quickstart"
COMPILE="$BUILD_DIR/bin/flexpipe-compile"
TUNED=""

# A cached profile is checked against the machine first (a few seconds):
# a machine shared with others runs faster or slower from one hour to the
# next, and a profile of another hour prices every candidate off by that.
measure=1
if [ -s "$CLUSTER" ] && [ ! "$BUILD_DIR/bin/flexpipe-profile" -nt "$CLUSTER" ]; then
  log "Checking this machine's measured cluster $CLUSTER against the machine now"
  if "$BUILD_DIR/bin/flexpipe-profile" --check "$CLUSTER" --model "$MODEL"; then
    measure=0
    log "Using $CLUSTER (delete it to measure again)"
  else
    log "The machine has moved since $CLUSTER was measured: measuring again"
  fi
fi
if [ "$measure" = 1 ]; then
  log "Measuring this machine for the cost model (flexpipe-profile)"
  "$BUILD_DIR/bin/flexpipe-profile" --model "$MODEL" --ranks "$RANKS" \
    -o "$CLUSTER.tmp"
  mv "$CLUSTER.tmp" "$CLUSTER"
fi

if [ $# -ge 1 ]; then
  SPEC="$1"
else
  log "Tuning the tiny GPT for $RANKS CPU ranks"
  rm -rf "$BUILD_DIR/quickstart-tune"
  "$BUILD_DIR/bin/flexpipe-tune" --model "$MODEL" --cluster "$CLUSTER" --gpus "$RANKS" \
    --top 3 -o "$BUILD_DIR/quickstart-tune"
  SPEC="$BUILD_DIR/quickstart-tune/rank-1.mlir"
  MODEL="$BUILD_DIR/quickstart-tune/rank-1.model.yaml"
  TUNED=$(sed -n 's/^\/\/ predicted: iteration \([0-9.]* m\{0,1\}s\).*/\1/p' "$SPEC")
fi

# The replicas a spec asks for in its header's command line (the tuner's
# rank-K.mlir, or a spec of the user's written alike); 1 without one.
DP=$(sed -n '1,20{s/^\/\/ flexpipe-compile .*--dp \([0-9]*\).*/\1/p}' "$SPEC" | head -n 1)
DP=${DP:-1}

log "Scheduling $SPEC"
"$COMPILE" "$SPEC" --model "$MODEL" --cluster "$CLUSTER" --time-model=cost --dp "$DP" --emit=text

log "Compiling one executable per rank into $RUN"
rm -rf "$RUN"
"$COMPILE" "$SPEC" --model "$MODEL" --cluster "$CLUSTER" --time-model=cost --dp "$DP" \
  --emit=exe -o "$RUN"

log "Training on $(sed -n 's/.*--ntasks=\([0-9]*\).*/\1/p' "$RUN/run-slurm.sh") CPU ranks"
"$RUN/run-mpi.sh" --iterations 30 --profile "$RUN/profile.yaml" | tail -n 6 | tee "$RUN/train.log"

log "Measured against predicted (simulated from this run's profile)"
"$COMPILE" "$SPEC" --model "$MODEL" --cluster "$CLUSTER" --time-model=cost --dp "$DP" \
  --profile "$RUN/profile.yaml" --emit=report > "$RUN/report.txt"
measured=$(sed -n 's/^mean iteration time \([0-9.]*\) ms.*/\1/p' "$RUN/train.log")
# "iteration time I = pipeline P + gradient sync G + optimizer step S", or
# "iteration time P, ..." when nothing follows the pipeline.
predicted=$(sed -n 's/^iteration time \([0-9.]*\) \(m\{0,1\}s\)[ ,].*/\1 \2/p' "$RUN/report.txt")
pipeline=$(sed -n 's/^iteration time .* = pipeline \([0-9.]*\) \(m\{0,1\}s\) .*/\1 \2/p' "$RUN/report.txt")
bubble=$(sed -n 's/.*bubble ratio \([0-9.]*%\).*/\1/p' "$RUN/report.txt")
echo "measured iteration time:              $measured ms"
[ -n "$TUNED" ] && echo "predicted by flexpipe-tune:           $TUNED (from this machine's measured cluster)"
echo "simulated from this run's profile:    $predicted (pipeline ${pipeline:-$predicted} and optimizer step from the run's profile, bubble ratio $bubble; the all-reduce after it from the cluster file)"
log "Done. Next: scripts/test.sh runs every test suite; docs/GettingStarted.md is the tutorial."
