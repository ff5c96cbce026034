#!/usr/bin/env bash
# Packs what scripts/gpu-test.sh --bundle needs on a GPU machine that has
# nvcc and NCCL but no LLVM/MLIR, no OpenBLAS and no apt: for each schedule
# gpu-test.sh trains (the tiny GPT, configs/models/tiny.yaml), the rank
# sources flexpipe-compile writes (--backend=cuda --emit=cpp), the schedule
# description and the environment launcher (run-env.sh); the runtime's static
# libraries with the CUDA backend and without MPI, for sm_90 (H100, H200);
# and the expected results: flexpipe-reference's losses and final weights
# for the same iterations, trained here on the CPU. The runtime's headers
# are not copied: runtime/include travels with the tree.
#
#   DIR/MANIFEST                     iterations, commit, header hash, ...
#   DIR/lib/libflexpipe_rt_cuda.a    CUDA backend (cuBLAS, NCCL, own kernels)
#   DIR/lib/libFlexPipeRuntime.a     schedule, executor, model data
#   DIR/NAME/rank*.cpp schedule.txt run-env.sh
#   DIR/NAME/ref-losses ref-weights.gz
#   DIR/NAME/kind iterations         what gpu-test.sh does with NAME
#
# Beyond the six compared runs (kind 'compare'), three entries for what only
# a GPU shows:
#   stress    1F1B on 4 ranks of a GPT with 2 MiB messages
#             (configs/models/gpt-h256-long.yaml), losses only (kind stress)
#   h4096     two hidden-4096 layers on one rank (configs/models/gpt-h4096.yaml):
#             speed, memory and PyTorch beside it; no reference (kind speed)
#   sanitize  the tiny GPT on one rank, for compute-sanitizer (kind sanitize)
#
# Runs here, where the project builds: flexpipe-compile from BUILD_DIR
# (default build, not rebuilt), the runtime and flexpipe-reference built in
# GPU_BUILD_DIR (default build-gpu, configured once with CUDA ON, MPI OFF).
#
# Usage: scripts/gpu-bundle.sh [-o DIR] [--iterations N]
#   -o DIR          the bundle (default $GPU_BUILD_DIR/bundle; replaced when
#                   it is an earlier bundle; other non-empty ones are refused)
#   --iterations N  iterations of every run (default 10)
# Environment: BUILD_DIR, GPU_BUILD_DIR, JOBS, CUDA_ARCHS (default 90).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
GPU_BUILD_DIR=${GPU_BUILD_DIR:-$FLEXPIPE_ROOT/build-gpu}
out= iterations=10
while [ $# -gt 0 ]; do
  case $1 in
    -o) out=${2:?-o needs a directory}; shift ;;
    --iterations) iterations=${2:?--iterations needs a number}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see scripts/gpu-bundle.sh --help)" ;;
  esac
  shift
done
[ "$iterations" -ge 2 ] 2>/dev/null || die "--iterations must be at least 2"
out=$(realpath -m "${out:-$GPU_BUILD_DIR/bundle}")

COMPILE="$BUILD_DIR/bin/flexpipe-compile"
[ -x "$COMPILE" ] || die "no $COMPILE: build the compiler first (scripts/test.sh or ninja -C $BUILD_DIR flexpipe-compile)"

# The runtime without MPI: ranks start from the environment (run-env.sh).
if [ ! -f "$GPU_BUILD_DIR/build.ninja" ]; then
  log "Configuring $GPU_BUILD_DIR (CUDA backend, no MPI, sm_${CUDA_ARCHS:-90})"
  mkdir -p "$GPU_BUILD_DIR"
  cmake -S "$FLEXPIPE_ROOT" -B "$GPU_BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DFLEXPIPE_ENABLE_CUDA=ON \
    -DFLEXPIPE_ENABLE_MPI=OFF -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" \
    -DFLEXPIPE_CPU_ARCH=x86-64-v2 > "$GPU_BUILD_DIR/cmake.log" 2>&1 ||
    die "CMake configuration failed (see $GPU_BUILD_DIR/cmake.log)"
fi
config="$GPU_BUILD_DIR/include/flexpipe/Config.h"
grep -q '#define FLEXPIPE_ENABLE_CUDA 1' "$config" ||
  die "$GPU_BUILD_DIR has no CUDA backend (FLEXPIPE_ENABLE_CUDA is 0 in $config)"
grep -q '#define FLEXPIPE_ENABLE_MPI 0' "$config" ||
  die "$GPU_BUILD_DIR has MPI on: reconfigure it with -DFLEXPIPE_ENABLE_MPI=OFF"
log "Building the runtime in $GPU_BUILD_DIR"
ninja -C "$GPU_BUILD_DIR" -j "$JOBS" flexpipe_rt_cuda FlexPipeRuntime \
  flexpipe-reference > "$GPU_BUILD_DIR/bundle-build.log" 2>&1 ||
  { tail -n 30 "$GPU_BUILD_DIR/bundle-build.log"; die "the runtime's build failed"; }
REFERENCE="$GPU_BUILD_DIR/bin/flexpipe-reference"

fresh_dir "$out" .flexpipe-gpu-bundle MANIFEST && mkdir -p "$out/lib"
cp "$GPU_BUILD_DIR/lib/libflexpipe_rt_cuda.a" "$GPU_BUILD_DIR/lib/libFlexPipeRuntime.a" "$out/lib/"

# entry NAME KIND ITERATIONS REFERENCE SPEC [flexpipe-compile options...]:
# rank sources, launcher and (REFERENCE: full, losses or none) the
# reference's results of one schedule.
entry() {
  local name=$1 kind=$2 runs=$3 reference=$4 spec=$5
  shift 5
  local dir="$out/$name"
  log "$name: rank sources$([ "$reference" = none ] || echo " and reference ($runs iterations)")"
  "$COMPILE" "$spec" --backend=cuda --emit=cpp -o "$dir" "$@" ||
    die "$name: flexpipe-compile failed"
  rm -f "$dir/build.sh" # this machine's paths; gpu-test.sh links instead
  local actors dp
  actors=$(ls "$dir"/rank*.cpp | wc -l)
  dp=$(sed -n 's/^dp \([0-9]*\)$/\1/p' "$dir/schedule.txt")
  sed -e "s/@ACTORS@/$actors/g" -e "s/@DP@/${dp:-1}/g" \
    -e "s/@WORLD@/$((actors * ${dp:-1}))/g" \
    "$FLEXPIPE_ROOT/tools/flexpipe-compile/templates/run-env.sh.in" > "$dir/run-env.sh"
  chmod +x "$dir/run-env.sh"
  echo "flexpipe-compile ${spec#"$FLEXPIPE_ROOT/"} $*" > "$dir/compile-command"
  echo "$kind" > "$dir/kind"
  echo "$runs" > "$dir/iterations"
  # The report: the cost model's iteration time and memory for this schedule.
  "$COMPILE" "$spec" --emit=report "$@" > "$dir/report.txt" 2>&1 || true
  case $reference in
    full)
      "$REFERENCE" "$dir/schedule.txt" --iterations "$runs" \
        --losses "$dir/ref-losses" --weights "$dir/ref-weights" > "$dir/ref.log" ||
        die "$name: flexpipe-reference failed (see $dir/ref.log)"
      gzip -9 "$dir/ref-weights" ;;
    losses)
      "$REFERENCE" "$dir/schedule.txt" --iterations "$runs" \
        --losses "$dir/ref-losses" > "$dir/ref.log" ||
        die "$name: flexpipe-reference failed (see $dir/ref.log)" ;;
  esac
  names+=("$name")
}
# add NAME SPEC [options...]: a run trained and compared with the reference.
add() {
  local name=$1
  shift
  entry "$name" compare "$iterations" full "$@"
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
names=()
gpu_test_schedules add "$scratch"
# model_field YAML KEY: the first 'KEY: value' of a model YAML.
model_field() { sed -n "s/^ *$2: *\([0-9]*\).*/\1/p" "$1" | head -n 1; }
entry stress stress 3 losses "$FLEXPIPE_ROOT/schedules/1f1b.mlir" \
  --model "$FLEXPIPE_ROOT/configs/models/gpt-h256-long.yaml" \
  --cluster "$FLEXPIPE_ROOT/configs/clusters/a800.yaml"
echo "2 MiB messages" > "$out/stress/about"
big=$FLEXPIPE_ROOT/configs/models/gpt-h4096.yaml
entry h4096 speed 5 none "$FLEXPIPE_ROOT/schedules/1f1b.mlir" --model "$big" --microbatches 4 \
  --cluster "$FLEXPIPE_ROOT/configs/clusters/a800.yaml" --actors 1
# Model FLOPs of one iteration (matrix products, attention counted whole, a
# backward twice the forward) and bench/torch-gpt.py's arguments for it.
read -r L h a s V mbs gbs <<< "$(for k in layers hidden heads seq vocab micro_batch_size global_batch_size; do model_field "$big" $k; done | paste -sd ' ')"
awk -v L="$L" -v h="$h" -v s="$s" -v V="$V" -v g="$gbs" \
  'BEGIN { printf "%.0f\n", 3 * g * s * (L * (24 * h * h + 4 * s * h) + 2 * h * V) }' > "$out/h4096/model-flops"
echo "--hidden $h --heads $a --seq $s --vocab $V --layers $L --microbatches $((gbs / mbs)) --micro-batch-size $mbs" > "$out/h4096/model-args"
entry sanitize sanitize 3 none "$FLEXPIPE_ROOT/schedules/1f1b.mlir" \
  --model "$FLEXPIPE_ROOT/configs/models/tiny.yaml" \
  --cluster "$FLEXPIPE_ROOT/configs/clusters/a800.yaml" --actors 1 --microbatches 2
# What gpu-test.sh --bundle checks before it links.
{
  echo "iterations=$iterations"
  echo "schedules=${names[*]}"
  echo "commit=$(git -C "$FLEXPIPE_ROOT" rev-parse HEAD 2>/dev/null || echo unknown)$(
    git -C "$FLEXPIPE_ROOT" diff --quiet HEAD -- runtime 2>/dev/null || echo ' (runtime/ modified)')"
  echo "runtime_include_hash=$("$FLEXPIPE_ROOT/scripts/gpu-test.sh" --header-hash)"
  echo "cuda_archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$GPU_BUILD_DIR/CMakeCache.txt")"
  echo "nvcc=$(sed -n 's/^FLEXPIPE_NVCC:[A-Z]*=//p' "$GPU_BUILD_DIR/CMakeCache.txt"), $(
    "$(sed -n 's/^FLEXPIPE_NVCC:[A-Z]*=//p' "$GPU_BUILD_DIR/CMakeCache.txt")" --version | tail -n 1)"
  echo "made=$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
} > "$out/MANIFEST"
log "Bundle: $out ($(du -sh "$out" | cut -f1)); on the GPU machine run"
echo "  bash scripts/gpu-test.sh --bundle ${out#"$FLEXPIPE_ROOT/"}"
