#!/usr/bin/env bash
# The CPU runtime's compute speed against this machine's sgemm rate and,
# when a PyTorch environment exists, against PyTorch on the same model,
# weights, data and schedule (1F1B, 8 micro-batches of one sequence, one
# thread per rank). Models: configs/models/tiny.yaml and gpt-h256.yaml.
# Prints figures; never fails on timing.
#
# Usage: bench/cpu-compute.sh [BUILD_DIR] [ITERATIONS] [RUNS]
#   RUNS alternating FlexPipe / PyTorch runs per row (default 3); the table
#   shows each side's median of its per-run mean iteration times.
# PyTorch: $FLEXPIPE_TORCH_VENV (default ~/.cache/flexpipe/torch-venv, as
# scripts/test-torch.sh makes it); skipped when absent.
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
ITERATIONS="${2:-6}"
RUNS="${3:-3}"
PYTHON="${FLEXPIPE_TORCH_VENV:-$HOME/.cache/flexpipe/torch-venv}/bin/python"
WORK="$BUILD/bench-cpu-compute"
M=8
have_torch=0
"$PYTHON" -c "import torch" >/dev/null 2>&1 && have_torch=1

median() { tr ' ' '\n' | sed '/^$/d' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { sed -n "s/^  *$1: *\([0-9]*\).*/\1/p" "$2" | head -n 1; }

rm -rf -- "$WORK"
mkdir -p "$WORK"
printf '%-9s %5s %12s %10s %14s %9s %12s %8s\n' model ranks "FlexPipe ms" "tokens/s" "GFLOP/s/rank" "of sgemm" "PyTorch ms" "FP/PT"
for name in tiny gpt-h256; do
  cfg="$ROOT/configs/models/$name.yaml"
  H=$(field hidden "$cfg"); A=$(field heads "$cfg"); S=$(field seq "$cfg")
  V=$(field vocab "$cfg"); L=$(field layers "$cfg")
  # Model FLOPs per iteration: forward per token 24 H^2 per layer (QKV,
  # output, MLP), 4 S H per layer (scores and weighted sum, full square),
  # 2 H V for the head; backward twice the forward.
  flops=$(awk -v h=$H -v s=$S -v v=$V -v l=$L -v m=$M \
    'BEGIN { print 3 * m * s * (l * (24 * h * h + 4 * s * h) + 2 * h * v) }')
  sgemm=$("$BUILD/bin/flexpipe-bench-sgemm" "$S" "$H" "$V" 0.3 |
          sed -n 's/^model-shape sgemm rate: \([0-9.]*\).*/\1/p')
  for ranks in 1 2; do
    dir="$WORK/$name-$ranks"
    "$BUILD/bin/flexpipe-compile" "$ROOT/schedules/1f1b.mlir" --actors $ranks \
      --microbatches $M --model "$cfg" --cluster "$ROOT/configs/clusters/cpu.yaml" \
      --emit=exe -o "$dir" >/dev/null
    # The initial weights and batches for PyTorch, and the losses to match.
    "$BUILD/bin/flexpipe-reference" "$dir/schedule.txt" --iterations "$ITERATIONS" \
      --initial-weights "$dir/init.txt" --batches "$dir/batches.txt" \
      --losses "$dir/losses.txt" >/dev/null
    fp=(); pt=(); note=""
    for run in $(seq "$RUNS"); do
      fp+=("$("$dir/run-mpi.sh" --iterations "$ITERATIONS" |
              sed -n 's/^mean iteration time \([0-9.]*\) ms.*/\1/p')")
      if [ $have_torch -eq 1 ]; then
        out=$("$PYTHON" "$ROOT/bench/torch-gpt.py" --weights "$dir/init.txt" \
          --batches "$dir/batches.txt" --hidden $H --heads $A --seq $S --vocab $V \
          --layers $L --microbatches $M --ranks $ranks --iterations "$ITERATIONS" \
          --losses "$dir/losses.txt")
        pt+=("$(sed -n 's/.*mean iteration time \([0-9.]*\) ms.*/\1/p' <<<"$out")")
        note=$(sed -n 's/.*worst difference \([^ ]*\) over.*/\1/p' <<<"$out")
      fi
    done
    f=$(echo "${fp[*]}" | median)
    tokens=$(awk -v f=$f -v m=$M -v s=$S 'BEGIN { printf "%.0f", m * s / (f / 1e3) }')
    gflops=$(awk -v f=$f -v fl=$flops -v r=$ranks 'BEGIN { printf "%.1f", fl / (f / 1e3) / r / 1e9 }')
    share=$(awk -v g=$gflops -v s=$sgemm 'BEGIN { printf "%.0f%%", 100 * g / s }')
    if [ $have_torch -eq 1 ]; then
      p=$(echo "${pt[*]}" | median)
      ratio=$(awk -v f=$f -v p=$p 'BEGIN { printf "%.2f", f / p }')
    else
      p="-"; ratio="-"
    fi
    printf '%-9s %5s %12.1f %10s %14s %9s %12s %8s\n' "$name" "$ranks" "$f" "$tokens" "$gflops" "$share" "$p" "$ratio"
    [ -n "$note" ] && echo "          PyTorch vs FlexPipe losses over $ITERATIONS iterations: worst difference $note"
  done
  echo "          $name: model-shape sgemm rate $sgemm GFLOP/s (one thread, OpenBLAS)"
done
[ $have_torch -eq 1 ] || echo "PyTorch: skipped (no environment at ${PYTHON%/bin/python}; scripts/test-torch.sh makes one)"
