#!/usr/bin/env bash
# End-to-end check of FlexPipe's PyTorch exports with real PyTorch: for every
# spec in schedules/, both CSV formats (--emit=torch-csv, torch-csv-comms)
# and (pp, m) in (4, 8), (4, 6), (2, 5), it exports the schedule, runs it in
# torch.distributed.pipelining's _PipelineScheduleRuntime on pp gloo
# processes (scripts/torch-pipeline-check.py) and compares loss and
# gradients with the same model run without pipelining (1e-5). Specs that
# PyTorch's format cannot express (EXPECT_REFUSED) must be refused with a
# message instead. Then it runs the complete example of docs/PyTorch.md on a
# one_to_one, a circular and a V-shaped file.
#
#   scripts/test-torch.sh              make the environment if missing, run
#   scripts/test-torch.sh --if-present run only if the environment exists
#                                      (scripts/test.sh uses this)
#
# The environment is a private virtual environment with PyTorch (CPU use;
# `pip install torch` from PyPI, about 5 GB, a few minutes) at
# $FLEXPIPE_TORCH_VENV (default ~/.cache/flexpipe/torch-venv).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

VENV="${FLEXPIPE_TORCH_VENV:-$HOME/.cache/flexpipe/torch-venv}"
PYTHON="$VENV/bin/python"
EXPECT_REFUSED=(bidirectional)
SIZES=("4 8" "4 6" "2 5")

if [ "${1:-}" = "--if-present" ]; then
  if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
    echo "torch: skipped (no PyTorch environment at $VENV; run scripts/test-torch.sh to make one)"
    exit 0
  fi
elif [ $# -gt 0 ]; then
  die "usage: scripts/test-torch.sh [--if-present]"
elif ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  log "Making a PyTorch environment at $VENV (pip install torch, a few minutes)"
  python3 -m venv "$VENV" || die "python3 -m venv failed (apt-get install python3-venv)"
  "$VENV/bin/pip" install --quiet torch numpy || die "pip install torch failed"
fi

[ -x "$BUILD_DIR/bin/flexpipe-compile" ] || build_all
log "PyTorch $("$PYTHON" -c 'import torch; print(torch.__version__)'): schedules/ in both formats"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0; fail=0
printf '%-18s %-15s %3s %3s  %-7s %-9s %-9s %s\n' spec format pp m result "|dloss|" "|dgrad|" note
for spec in "$FLEXPIPE_ROOT"/schedules/*.mlir; do
  name=$(basename "$spec" .mlir)
  refused_expected=0
  for r in "${EXPECT_REFUSED[@]}"; do [ "$r" = "$name" ] && refused_expected=1; done
  for size in "${SIZES[@]}"; do
    read -r pp m <<<"$size"
    for format in compute_only compute_comms; do
      emit=torch-csv; [ $format = compute_comms ] && emit=torch-csv-comms
      csv="$work/$name-$pp-$m-$format.csv"
      row() { printf '%-18s %-15s %3s %3s  %-7s %-9s %-9s %s\n' "$name" "$format" "$pp" "$m" "$@"; }
      if ! "$BUILD_DIR/bin/flexpipe-compile" "$spec" --actors "$pp" --microbatches "$m" \
          --emit=$emit -o "$csv" 2>"$work/err"; then
        msg=$(grep -m1 'error:' "$work/err" | sed 's/.*error: //')
        if [ $refused_expected -eq 1 ] && grep -q "cannot write" "$work/err"; then
          row refused - - "${msg:0:90}"; pass=$((pass + 1))
        else
          row FAIL - - "export failed: ${msg:0:90}"; fail=$((fail + 1))
        fi
        continue
      fi
      if [ $refused_expected -eq 1 ]; then
        row FAIL - - "exported a schedule PyTorch cannot express"; fail=$((fail + 1))
        continue
      fi
      out=$("$PYTHON" "$FLEXPIPE_ROOT/scripts/torch-pipeline-check.py" "$csv" --format $format 2>&1 | tail -n 1)
      read -r ok dloss dgrad note < <(python3 -c '
import json, sys
try:
    r = json.loads(sys.argv[1])
except ValueError:
    print("False - -", sys.argv[1][:90]); sys.exit()
f = lambda v: "-" if v is None else "%.1e" % v
print(r["ok"], f(r["loss_error"]), f(r["grad_error"]), (r["error"] or "")[:90])' "$out")
      if [ "$ok" = True ]; then
        row pass "$dloss" "$dgrad" "$note"; pass=$((pass + 1))
      else
        row FAIL "$dloss" "$dgrad" "$note"; fail=$((fail + 1))
      fi
    done
  done
done

# The complete example of docs/PyTorch.md, as a user would run it, on a file
# of each placement (one_to_one, circular, V).
log "docs/PyTorch.md's example"
python3 - "$FLEXPIPE_ROOT/docs/PyTorch.md" "$work/run_schedule.py" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
blocks = re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)
open(sys.argv[2], "w").write(blocks[0])
PY
for case in "1f1b compute_only" "interleaved-1f1b compute_comms" "zb-v compute_comms"; do
  read -r name format <<<"$case"
  emit=torch-csv; [ $format = compute_comms ] && emit=torch-csv-comms
  csv="$work/example-$name.csv"
  "$BUILD_DIR/bin/flexpipe-compile" "$FLEXPIPE_ROOT/schedules/$name.mlir" --actors 4 \
    --microbatches 8 --emit=$emit -o "$csv"
  if out=$(cd "$work" && timeout 300 "$PYTHON" run_schedule.py "$csv" $format 2>&1) &&
     grep -q '^loss [0-9.]*$' <<<"$out"; then
    printf '%-18s %-15s %3s %3s  %-7s %s\n' "$name" "$format" 4 8 pass "example: $(grep '^loss' <<<"$out")"
    pass=$((pass + 1))
  else
    printf '%-18s %-15s %3s %3s  %-7s %s\n' "$name" "$format" 4 8 FAIL "example: $(tail -n 1 <<<"$out")"
    fail=$((fail + 1))
  fi
done
echo "torch: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
