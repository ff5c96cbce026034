#!/usr/bin/env bash
# Builds if needed and runs the benchmarks. They print figures and never fail
# on timing; a benchmark that fails (a tool's error, no run to measure) makes
# the script exit 1 after the others have run.
# Usage: scripts/bench.sh [seconds per row, default 1]
set -euo pipefail
case "${1:-}" in
  -h|--help) echo "usage: scripts/bench.sh [seconds per row, default 1]"; exit 0 ;;
esac
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
failed=0
# Runs one benchmark: NAME COMMAND...; a failure is reported and remembered,
# and the benchmarks after it still run.
bench() {
  local name=$1
  shift
  "$@" || { echo "$name: failed (exit $?)" >&2; failed=1; }
}
build_all
bench bench-scheduler "$BUILD_DIR/bin/flexpipe-bench-scheduler" "${1:-1}"
echo
bench bench-simulator "$BUILD_DIR/bin/flexpipe-bench-simulator" "${1:-1}"
echo
echo "Reading specs with K registered stages, instructions and dependencies (bench/spec-scale.py):"
bench spec-scale python3 "$FLEXPIPE_ROOT/bench/spec-scale.py" "$BUILD_DIR"
echo
echo "Rank sources and their host compile as m grows (bench/rank-source-scale.py):"
bench rank-source-scale python3 "$FLEXPIPE_ROOT/bench/rank-source-scale.py" "$BUILD_DIR"
echo
echo "Stage imbalance of GPT 5B under 1F1B (the paper's Figure 3):"
bench imbalance python3 "$FLEXPIPE_ROOT/bench/imbalance.py" "$BUILD_DIR"
echo
if command -v mpirun >/dev/null && [ -f "$BUILD_DIR/lib/libflexpipe_rt_cpu.a" ]; then
  bench runtime-overhead "$FLEXPIPE_ROOT/bench/runtime-overhead.sh" "$BUILD_DIR" 30
else
  echo "runtime overhead: skipped (no MPI runtime built)"
fi
echo
echo "CPU runtime compute against the sgemm rate and PyTorch (bench/cpu-compute.sh):"
if command -v mpirun >/dev/null && [ -f "$BUILD_DIR/lib/libflexpipe_rt_cpu.a" ]; then
  bench cpu-compute "$FLEXPIPE_ROOT/bench/cpu-compute.sh" "$BUILD_DIR"
else
  echo "cpu compute: skipped (no MPI runtime built)"
fi
echo
echo "The cost model against measured runs (bench/cost-validation.py; about 10 minutes):"
if command -v mpirun >/dev/null && [ -f "$BUILD_DIR/lib/libflexpipe_rt_cpu.a" ]; then
  bench profile "$BUILD_DIR/bin/flexpipe-profile" \
    --model "$FLEXPIPE_ROOT/configs/models/tiny.yaml" \
    --model "$FLEXPIPE_ROOT/configs/models/gpt-h256.yaml" --ranks 4 -q \
    -o "$BUILD_DIR/bench-machine.yaml"
  status=0
  python3 "$FLEXPIPE_ROOT/bench/cost-validation.py" "$BUILD_DIR" \
    --cluster "$BUILD_DIR/bench-machine.yaml" --work "$BUILD_DIR/cost-validation" \
    --markdown "$BUILD_DIR/cost-validation.md" | grep -v '^disagreeing pair' ||
    status=${PIPESTATUS[0]}
  if [ "$status" != 0 ]; then
    echo "cost validation: failed (exit $status)" >&2
    failed=1
  fi
  echo
  echo "Its noise floor: each group's best candidate run 10 more times (bench/noise-floor.py; about 2 minutes):"
  # Its progress goes to standard error: shown only when it fails.
  if ! python3 "$FLEXPIPE_ROOT/bench/noise-floor.py" "$BUILD_DIR" \
    --work "$BUILD_DIR/cost-validation" --runs 10 2> "$BUILD_DIR/noise-floor.err"; then
    cat "$BUILD_DIR/noise-floor.err" >&2
    echo "noise floor: failed" >&2
    failed=1
  fi
else
  echo "cost validation: skipped (no MPI runtime built)"
fi
echo
echo "The paper's GPT large-vocabulary study and search cost (regenerates docs/PaperStudy.md):"
bench paper-study python3 "$FLEXPIPE_ROOT/bench/paper-study.py" "$BUILD_DIR"
echo
echo "The paper's CLIP study (regenerates the CLIP section of docs/PaperStudy.md):"
bench clip-study python3 "$FLEXPIPE_ROOT/bench/clip-study.py" "$BUILD_DIR"
exit "$failed"
