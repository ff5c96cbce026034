#!/usr/bin/env bash
# End-to-end check of the CUDA backend on a machine with NVIDIA GPUs (not part
# of scripts/test.sh: CI has no GPU). Builds, compiles three schedules for the
# tiny GPT (configs/models/tiny.yaml) with --backend=cuda, trains each with
# the environment launcher (run-env.sh), trains the same model in one process
# on the CPU (flexpipe-reference), and compares them with
# scripts/compare-training.py. Prints one line of figures per schedule and
# exits non-zero if any failed.
#
#   1f1b         4 actors, 8 micro-batches
#   interleaved  interleaved 1F1B, 4 actors, 8 stages, 8 micro-batches
#   dp2xpp2      1F1B on 2 actors, 2 data-parallel replicas, 4 micro-batches
#   zb-h1        zero bubble H1: separate input and weight gradients (I, W)
#   zb-v-async   zero bubble V with asynchronous receives and waits
#
# Tolerances, looser than the CPU runs' 1e-5 / 1e-4 because the GPU sums in
# other orders (warp reductions, cuBLAS's blocking, fused multiply-adds):
# losses within 1e-4 relative per iteration, final weights within 1e-3
# (absolute, relative above 1), and the loss must fall. Weights after Adam are
# the looser check: Adam's step lr * m / sqrt(v) turns a rounding difference
# in a gradient near zero into up to 2 lr (2e-3) for that weight. These are
# estimates: the emulated kernels (test/Runtime/cuda-emulation.test) stay
# within 1e-5 of the CPU; a real GPU run has not been made yet.
#
# With fewer GPUs than ranks, the ranks share the GPUs and each gets its own
# NCCL_HOSTID (FLEXPIPE_HOSTID_PER_RANK=1) so that NCCL accepts several ranks
# per GPU; it then talks over sockets, and iteration times mean little.
#
# Usage: scripts/gpu-test.sh [--skip-build] [--iterations N]
# Environment: BUILD_DIR (default build), JOBS, FLEXPIPE_TIMEOUT (default 120
# s per rank wait), GPU_TEST_DIR (default $BUILD_DIR/gpu-test).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build=1 iterations=10
while [ $# -gt 0 ]; do
  case $1 in
    --skip-build) build=0 ;;
    --iterations) iterations=${2:?--iterations needs a number}; shift ;;
    *) die "unknown option '$1' (usage: scripts/gpu-test.sh [--skip-build] [--iterations N])" ;;
  esac
  shift
done
[ "$iterations" -ge 2 ] 2>/dev/null || die "--iterations must be at least 2"

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -eq 0 ]; then
  echo "gpu-test: no NVIDIA GPU found (nvidia-smi -L lists none); this check needs one" >&2
  exit 2
fi
log "GPUs: $gpus"
nvidia-smi -L

if [ "$build" = 1 ]; then
  JOBS=${JOBS:-$(( $(nproc) < 8 ? $(nproc) : 8 ))}
  ensure_packages
  build_all
fi
COMPILE="$BUILD_DIR/bin/flexpipe-compile"
REFERENCE="$BUILD_DIR/bin/flexpipe-reference"
[ -x "$COMPILE" ] && [ -x "$REFERENCE" ] || die "no flexpipe-compile in $BUILD_DIR/bin (build first)"
grep -q '#define FLEXPIPE_ENABLE_CUDA 1' "$BUILD_DIR/include/flexpipe/Config.h" ||
  die "$BUILD_DIR was configured without the CUDA backend"

MODEL="$FLEXPIPE_ROOT/configs/models/tiny.yaml"
CLUSTER="$FLEXPIPE_ROOT/configs/clusters/a800.yaml"
WORK="${GPU_TEST_DIR:-$BUILD_DIR/gpu-test}"
export FLEXPIPE_TIMEOUT=${FLEXPIPE_TIMEOUT:-120}
rm -rf "$WORK" && mkdir -p "$WORK"

failures=0
summary=()
# run NAME SPEC [flexpipe-compile options...]
run() {
  local name=$1 spec=$2
  shift 2
  local dir="$WORK/$name"
  log "$name: compiling"
  if ! "$COMPILE" "$spec" --backend=cuda --emit=exe -o "$dir" "$@"; then
    summary+=("$(printf '%-12s FAIL: flexpipe-compile failed' "$name")")
    failures=$((failures + 1))
    return
  fi
  local ranks
  ranks=$(( $(grep -c . "$dir/slurm.conf") - 1 ))
  local share=0
  [ "$ranks" -gt "$gpus" ] && share=1
  log "$name: training $iterations iterations on $ranks ranks ($gpus GPU(s)$([ $share = 1 ] && echo ', NCCL_HOSTID per rank'))"
  FLEXPIPE_HOSTID_PER_RANK=$share timeout --kill-after=10 900 \
    "$dir/run-env.sh" --iterations "$iterations" --losses "$dir/losses" \
    --weights "$dir/weights" > "$dir/run.log" 2>&1
  local code=$?
  cat "$dir/run.log"
  if [ $code -ne 0 ]; then
    [ $code -eq 124 ] && echo "gpu-test: $name timed out after 900 s" >&2
    summary+=("$(printf '%-12s FAIL: the run exited with code %d (see %s)' "$name" $code "$dir/run.log")")
    failures=$((failures + 1))
    return
  fi
  "$REFERENCE" "$dir/schedule.txt" --iterations "$iterations" \
    --losses "$dir/ref-losses" --weights "$dir/ref-weights" > "$dir/ref.log"
  local compare
  compare=$(python3 "$FLEXPIPE_ROOT/scripts/compare-training.py" "$dir/losses" \
    "$dir/ref-losses" "$dir/weights" "$dir/ref-weights" \
    --loss-tol 1e-4 --weight-tol 1e-3)
  local ok=$?
  echo "$compare"
  local time
  time=$(sed -n 's/^mean iteration time \([0-9.]*\) ms.*/\1/p' "$dir/run.log")
  local line
  line=$(printf '%-12s %s: %d ranks, mean iteration time %s ms; %s' "$name" \
    "$([ $ok -eq 0 ] && echo PASS || echo FAIL)" "$ranks" "${time:-?}" \
    "$(echo "$compare" | tail -n 1)")
  summary+=("$line")
  [ $ok -eq 0 ] || failures=$((failures + 1))
}

tiny=(--model "$MODEL" --cluster "$CLUSTER")
run 1f1b "$FLEXPIPE_ROOT/schedules/1f1b.mlir" "${tiny[@]}" --microbatches 8
run interleaved "$FLEXPIPE_ROOT/schedules/interleaved-1f1b.mlir" "${tiny[@]}" \
  --microbatches 8
run dp2xpp2 "$FLEXPIPE_ROOT/schedules/1f1b.mlir" "${tiny[@]}" --actors 2 --dp 2 \
  --microbatches 4
# The zero-bubble schedules without --model: the built-in model's default
# sizes are the tiny model's (and gradient separation rejects zb-h1 with the
# A800 costs, a scheduler matter).
run zb-h1 "$FLEXPIPE_ROOT/schedules/zb-h1.mlir" --microbatches 8 --time-model=cost
sed 's/optimize gradient_separation/optimize gradient_separation async_comm/' \
  "$FLEXPIPE_ROOT/schedules/zb-v.mlir" > "$WORK/zb-v-async.mlir"
run zb-v-async "$WORK/zb-v-async.mlir" --microbatches 8 --time-model=cost

echo
log "Summary (tolerances: losses 1e-4 relative, weights 1e-3)"
for line in "${summary[@]}"; do echo "  $line"; done
echo "gpu-test: $((${#summary[@]} - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
