#!/usr/bin/env bash
# Builds if needed, runs every FlexPipe test suite, prints a summary of each,
# and exits non-zero if anything failed.
#
# Suites: lit (FileCheck and -verify-diagnostics tests), ctest (Catch2 unit
# tests), the differential test of schedules/ against PyTorch's generators
# (test/Differential, no torch needed), the generated-reference freshness
# check, the documentation examples check, and the PyTorch interop suite
# (scripts/test-torch.sh) when its PyTorch environment exists.
#
# scripts/test.sh --sanitize does the same in a second build (build-sanitize/)
# with AddressSanitizer and UndefinedBehaviorSanitizer in every tool, library
# and rank executable; any report fails the test that triggered it.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [ "${1:-}" = "--sanitize" ]; then
  export BUILD_DIR="$FLEXPIPE_ROOT/build-sanitize"
  FLEXPIPE_CMAKE_ARGS=(-DCMAKE_BUILD_TYPE=RelWithDebInfo
    "-DLLVM_USE_SANITIZER=Address;Undefined"
    "-DLLVM_UBSAN_FLAGS=-fsanitize=undefined -fno-sanitize=vptr"
    -DFLEXPIPE_ENABLE_CUDA=OFF
    "-DFLEXPIPE_RANK_FLAGS=-fsanitize=address,undefined -fno-sanitize=vptr -fno-omit-frame-pointer")
  # Leaks are not checked: MPI and the MLIR context keep what they allocate
  # until exit by design. Manual poisoning is off: LLVM's allocators poison
  # from our instrumented code but not from Debian's uninstrumented MLIR
  # libraries, which reads as use-after-poison inside MLIR.
  export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allow_user_poisoning=0:${ASAN_OPTIONS:-}"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
elif [ $# -gt 0 ]; then
  die "usage: scripts/test.sh [--sanitize]"
fi

ensure_packages
build_all

declare -A PASSED FAILED
SUITES=()
record() { SUITES+=("$1"); PASSED[$1]=$2; FAILED[$1]=$3; }

log "lit"
lit_out=$(/usr/lib/llvm-22/bin/lit -sv "$BUILD_DIR/test" 2>&1); lit_rc=$?
echo "$lit_out" | grep -vE '^(PASS|UNSUPPORTED|XFAIL):' | sed '/^$/d'
lit_pass=$(echo "$lit_out" | sed -n 's/^ *Passed *: *\([0-9]*\).*/\1/p')
# Failed, Unresolved, Timed Out and Unexpectedly Passed all count as failed.
lit_fail=$(echo "$lit_out" | sed -n 's/^ *\(Failed\|Unresolved\|Timed Out\|Unexpectedly Passed\) *: *\([0-9]*\).*/\2/p' |
  awk '{ n += $1 } END { print n + 0 }')
lit_pass=${lit_pass:-0}
[ $lit_rc -ne 0 ] && [ "$lit_fail" -eq 0 ] && lit_fail=1
record lit "$lit_pass" "$lit_fail"

log "ctest"
ctest_out=$(cd "$BUILD_DIR" && ctest --output-on-failure 2>&1); ctest_rc=$?
echo "$ctest_out" | tail -n 25
ctest_total=$(echo "$ctest_out" | sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p')
ctest_fail=$(echo "$ctest_out" | sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p')
ctest_total=${ctest_total:-0}; ctest_fail=${ctest_fail:-0}
[ $ctest_rc -ne 0 ] && [ "$ctest_fail" -eq 0 ] && ctest_fail=1
[ "$ctest_total" -eq 0 ] && ctest_fail=1   # a ctest that ran nothing is a failure
ctest_pass=$((ctest_total - ctest_fail)); [ "$ctest_pass" -lt 0 ] && ctest_pass=0
record ctest "$ctest_pass" "$ctest_fail"

log "differential (schedules/ against PyTorch 2.15's generators)"
# Where ../shared is beside the checkout, the orders are also compared cell
# by cell with PyTorch's at its grid's sizes (a table, not a check).
peer_grid="$FLEXPIPE_ROOT/../shared/reference/peer-orders/grid"
orders=(); [ -d "$peer_grid" ] && orders=(--orders "$peer_grid")
diff_out=$(python3 "$FLEXPIPE_ROOT/test/Differential/differential.py" \
  --compile "$BUILD_DIR/bin/flexpipe-compile" --grid ci --jobs "$JOBS" \
  "${orders[@]}" 2>&1); diff_rc=$?
echo "$diff_out" | grep -vE '^PASS:'
diff_pass=$(echo "$diff_out" | sed -n 's/^differential: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
diff_fail=$(echo "$diff_out" | sed -n 's/^differential: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
diff_pass=${diff_pass:-0}; diff_fail=${diff_fail:-0}
[ $diff_rc -ne 0 ] && [ "$diff_fail" -eq 0 ] && diff_fail=1
record differential "$diff_pass" "$diff_fail"

log "generated reference up to date"
docs_fail=0; docs_pass=0
shopt -s nullglob
generated_docs=("$BUILD_DIR"/docs/FlexPipe/*.md)
committed_docs=("$FLEXPIPE_ROOT"/docs/reference/*.md)
shopt -u nullglob
if [ ${#generated_docs[@]} -eq 0 ]; then
  echo "FAIL: no generated reference in $BUILD_DIR/docs/FlexPipe (the mlir-doc target did not run)"
  docs_fail=1
fi
for generated in "${generated_docs[@]}"; do
  committed="$FLEXPIPE_ROOT/docs/reference/$(basename "$generated")"
  if ! diff -q "$generated" "$committed" >/dev/null 2>&1; then
    echo "FAIL: $committed differs from the ODS; run: cp $generated $committed"
    docs_fail=$((docs_fail + 1))
  else
    docs_pass=$((docs_pass + 1))
  fi
done
for committed in "${committed_docs[@]}"; do
  if [ ${#generated_docs[@]} -gt 0 ] && [ ! -e "$BUILD_DIR/docs/FlexPipe/$(basename "$committed")" ]; then
    echo "FAIL: $committed is generated from no ODS file; remove it"
    docs_fail=$((docs_fail + 1))
  fi
done
record reference "$docs_pass" "$docs_fail"

log "documentation examples"
examples_out=$(python3 "$FLEXPIPE_ROOT/scripts/check-doc-examples.py" \
  "$BUILD_DIR/bin/flexpipe-opt" "$FLEXPIPE_ROOT"/README.md "$FLEXPIPE_ROOT"/docs/*.md \
  "$FLEXPIPE_ROOT"/docs/reference/*.md 2>&1); examples_rc=$?
echo "$examples_out"
ex_pass=$(echo "$examples_out" | sed -n 's/^examples: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
ex_fail=$(echo "$examples_out" | sed -n 's/^examples: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
ex_pass=${ex_pass:-0}; ex_fail=${ex_fail:-0}
[ $examples_rc -ne 0 ] && [ "$ex_fail" -eq 0 ] && ex_fail=1
record examples "$ex_pass" "$ex_fail"

log "PyTorch interop (scripts/test-torch.sh; needs its PyTorch environment)"
torch_out=$("$FLEXPIPE_ROOT/scripts/test-torch.sh" --if-present 2>&1); torch_rc=$?
echo "$torch_out" | grep -vE " pass +"
if grep -q '^torch: skipped' <<<"$torch_out"; then
  torch_pass=0; torch_fail=0
else
  torch_pass=$(echo "$torch_out" | sed -n 's/^torch: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
  torch_fail=$(echo "$torch_out" | sed -n 's/^torch: \([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
  torch_pass=${torch_pass:-0}; torch_fail=${torch_fail:-0}
  [ $torch_rc -ne 0 ] && [ "$torch_fail" -eq 0 ] && torch_fail=1
fi
record torch "$torch_pass" "$torch_fail"

echo
log "Summary"
total_pass=0; total_fail=0
for suite in "${SUITES[@]}"; do
  printf '  %-10s %4d passed, %d failed\n' "$suite" "${PASSED[$suite]}" "${FAILED[$suite]}"
  total_pass=$((total_pass + PASSED[$suite])); total_fail=$((total_fail + FAILED[$suite]))
done
if [ "${FAILED[lit]}" -gt 0 ]; then
  # A digest of what failed, last, where a truncated CI log still shows it:
  # each failing test, the RUN line that failed and FileCheck's complaint.
  echo "lit failures:"
  echo "$lit_out" | grep -E '^(FAIL|UNRESOLVED|TIMEOUT|XPASS):|# RUN: at line|error:' |
    grep -B1 -E '^(FAIL|UNRESOLVED|TIMEOUT|XPASS):|error:' |
    grep -v '^--$' | tail -n 20 | sed 's/^/  /'
fi
echo "total: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
