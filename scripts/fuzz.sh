#!/usr/bin/env bash
# Fuzzes FlexPipe's input readers with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer (docs/Testing.md, "Fuzzing").
#
#   scripts/fuzz.sh SECONDS [TARGET...]
#
# Builds build-fuzz/ with clang-22 (installing clang-22 and libclang-rt-22-dev
# when missing), then runs each target (default: all of test/Fuzz/seeds.sh's)
# for SECONDS from its working corpus build-fuzz/corpus/<target>, seeded with
# the repository's test inputs and test/Fuzz/corpus/<target>. Prints one line
# per target: executions, executions per second, coverage (edges and
# features), corpus size. An input that crashes, trips a sanitizer, breaks a
# property (FUZZ_CHECK), takes over 20 s or 2 GB is saved in
# build-fuzz/crashes/<target>/ and the script exits 1; reproduce it with
# build-fuzz/bin/flexpipe-fuzz-<target> FILE, and once fixed, copy it into
# test/Fuzz/corpus/<target>/ so that the lit suite replays it forever.
#
# Environment: FUZZ_JOBS targets at once (default 1), FUZZ_MAX_LEN longest
# input in bytes (default 4096), FUZZ_SEED libFuzzer's random seed (default:
# a new one each run; CI fixes it).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
source "$FLEXPIPE_ROOT/test/Fuzz/seeds.sh"

usage() { die "usage: scripts/fuzz.sh SECONDS [TARGET...] (targets: $(fuzz_targets))"; }
[ $# -ge 1 ] || usage
seconds=$1; shift
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || usage
targets=("$@")
[ ${#targets[@]} -gt 0 ] || read -ra targets <<< "$(fuzz_targets)"
for t in "${targets[@]}"; do
  fuzz_seeds "$t" >/dev/null || die "no fuzz target '$t' (targets: $(fuzz_targets))"
done

FLEXPIPE_PACKAGES+=(clang-22 libclang-rt-22-dev)
ensure_packages
FUZZ_DIR="$FLEXPIPE_ROOT/build-fuzz"
if [ ! -f "$FUZZ_DIR/build.ninja" ]; then
  log "Configuring the fuzz build in $FUZZ_DIR (clang-22, libFuzzer, ASan, UBSan)"
  CC=clang-22 CXX=clang++-22 cmake -S "$FLEXPIPE_ROOT" -B "$FUZZ_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DFLEXPIPE_FUZZ=ON -DFLEXPIPE_ENABLE_CUDA=OFF -DFLEXPIPE_ENABLE_MPI=OFF \
    "-DLLVM_USE_SANITIZER=Address;Undefined" \
    "-DLLVM_UBSAN_FLAGS=-fsanitize=undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined" \
    -DCMAKE_C_FLAGS=-fsanitize=fuzzer-no-link \
    -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link >/dev/null \
    || die "CMake configuration of the fuzz build failed"
fi
log "Building the fuzz targets (ninja -j$JOBS)"
ninja -C "$FUZZ_DIR" -j "$JOBS" flexpipe-fuzzers || die "fuzz build failed"

# Leaks are checked (an input's IR is freed with it; the shared MLIR context is
# replaced every 1,000 inputs);
# LLVM's allocators poison memory that Debian's uninstrumented MLIR libraries
# then touch, so manual poisoning is off as in scripts/test.sh --sanitize.
export ASAN_OPTIONS="allow_user_poisoning=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"
max_len=${FUZZ_MAX_LEN:-4096}
failed=0
run_target() {
  local t=$1 exe="$FUZZ_DIR/bin/flexpipe-fuzz-${1//_/-}"
  local corpus="$FUZZ_DIR/corpus/$t" crashes="$FUZZ_DIR/crashes/$t"
  local log_file="$FUZZ_DIR/logs/$t.log"
  mkdir -p "$corpus" "$crashes" "$FUZZ_DIR/logs"
  local seeds=()
  for s in $(fuzz_seeds "$t"); do seeds+=("$FLEXPIPE_ROOT/$s"); done
  "$exe" "$corpus" "${seeds[@]}" -max_total_time="$seconds" -max_len="$max_len" \
    -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    ${FUZZ_SEED:+-seed="$FUZZ_SEED"} \
    -artifact_prefix="$crashes/" > "$log_file" 2>&1
  local rc=$?
  local execs rate cov ft units
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log_file" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log_file" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log_file" | tail -1 | cut -d' ' -f2)
  ft=$(grep -oE 'ft: [0-9]+' "$log_file" | tail -1 | cut -d' ' -f2)
  units=$(find "$corpus" -type f | wc -l)
  printf '%-17s %12s execs %8s/s  cov %6s  ft %7s  corpus %6s  %s\n' "$t" \
    "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$units" \
    "$([ $rc -eq 0 ] && echo ok || echo "FAILED (rc $rc, log $log_file)")"
  return $rc
}
log "Fuzzing ${targets[*]} for ${seconds} s each"
running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if [ "$running" -ge "${FUZZ_JOBS:-1}" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
if [ $failed -ne 0 ]; then
  echo "fuzz: failures; inputs in $FUZZ_DIR/crashes/" >&2
  exit 1
fi
echo "fuzz: no failure"
