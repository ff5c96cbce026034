# Shared by the FlexPipe scripts: package list, dependency install, build.
# Sourced, not run. Honours BUILD_DIR (default: <repo>/build) and JOBS.

# An exported CDPATH would make `cd` print where it went, doubling every
# path taken from $(cd ... && pwd) in these scripts.
unset CDPATH
FLEXPIPE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$FLEXPIPE_ROOT/build}"
# About 1 GB per compile job; two jobs fit every machine we target.
JOBS="${JOBS:-2}"

# Debian 12 packages the build and tests need (see ../shared/MLIR-RECIPE.md).
FLEXPIPE_PACKAGES=(
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  cmake ninja-build g++ python3
  libyaml-cpp-dev libcli11-dev catch2
  libopenmpi-dev openmpi-bin libopenblas-dev libeigen3-dev
  libboost-context-dev
)

if [ -t 1 ]; then
  log() { printf '\033[1m==> %s\033[0m\n' "$*"; }
else
  log() { printf '==> %s\n' "$*"; }
fi
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# fresh_dir DIR MARK [OLD...]: empties DIR (makes it when missing) for a
# script's output, and leaves the file MARK in it. A DIR that is not empty
# must hold MARK (or a file OLD that earlier versions left), the sign of this
# script's earlier output: nothing else is deleted.
fresh_dir() {
  local dir=$1 mark=$2 sign
  if [ -e "$dir" ] || [ -L "$dir" ]; then
    [ -d "$dir" ] || die "$dir exists and is not a directory"
    if [ -n "$(ls -A "$dir")" ]; then
      for sign in "${@:2}"; do [ -e "$dir/$sign" ] && break; sign=; done
      [ -n "$sign" ] ||
        die "$dir is not empty and holds no $mark, so it is not this script's output; name a new or empty directory"
    fi
    rm -rf "$dir"
  fi
  mkdir -p "$dir" && touch "$dir/$mark"
}

# Installs whichever of FLEXPIPE_PACKAGES are missing, without prompting.
ensure_packages() {
  local missing=()
  for pkg in "${FLEXPIPE_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$pkg")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "All ${#FLEXPIPE_PACKAGES[@]} Debian packages present"
    return 0
  fi
  log "Installing missing Debian packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "need root (or sudo) to install: ${missing[*]}"
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq || die "apt-get update failed"
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "apt-get install failed for: ${missing[*]}"
}

# Configures (once, with the array FLEXPIPE_CMAKE_ARGS when set) and builds
# every target.
build_all() {
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    log "Configuring in $BUILD_DIR"
    cmake -S "$FLEXPIPE_ROOT" -B "$BUILD_DIR" -G Ninja \
      -DCMAKE_BUILD_TYPE=Release \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      "${FLEXPIPE_CMAKE_ARGS[@]}" || die "CMake configuration failed"
  fi
  log "Building (ninja -j$JOBS)"
  ninja -C "$BUILD_DIR" -j "$JOBS" all flexpipe-doc || die "build failed"
}

# The schedules the GPU test trains (scripts/gpu-test.sh, gpu-bundle.sh):
# calls FN NAME SPEC [flexpipe-compile options...] for each, with the tiny
# GPT (configs/models/tiny.yaml); zb-v with asynchronous receives is written
# into DIR. The zero-bubble schedules run without --model (the built-in
# model's default sizes are the tiny model's), on the cost time model.
# gpu_test_tolerances NAME: FLEXPIPE_CUDA_MATH, the loss and the weight
# tolerances for schedule NAME against the fp32 CPU reference: 1e-4 / 1e-3
# (the GPU sums in other orders); for NAME ending in -bf16, bf16 mixed
# precision and 2e-2 / 2e-2 (8 significant bits in every activation; the
# emulation measures 8e-3 of the largest gradient, and Adam moves a weight by
# up to 2 lr a step whatever its gradient's size).
gpu_test_tolerances() {
  case $1 in
    *-bf16) echo bf16 2e-2 2e-2 ;;
    *) echo fp32 1e-4 1e-3 ;;
  esac
}

gpu_test_schedules() {
  local fn=$1 dir=$2
  local tiny=(--model "$FLEXPIPE_ROOT/configs/models/tiny.yaml"
              --cluster "$FLEXPIPE_ROOT/configs/clusters/a800.yaml")
  "$fn" 1f1b "$FLEXPIPE_ROOT/schedules/1f1b.mlir" "${tiny[@]}" --microbatches 8
  # The same ranks in bf16 mixed precision (FLEXPIPE_CUDA_MATH=bf16):
  # gpu_test_tolerances gives its looser tolerances.
  "$fn" 1f1b-bf16 "$FLEXPIPE_ROOT/schedules/1f1b.mlir" "${tiny[@]}" \
    --microbatches 8
  "$fn" interleaved "$FLEXPIPE_ROOT/schedules/interleaved-1f1b.mlir" \
    "${tiny[@]}" --microbatches 8
  "$fn" dp2xpp2 "$FLEXPIPE_ROOT/schedules/1f1b.mlir" "${tiny[@]}" --actors 2 \
    --dp 2 --microbatches 4
  "$fn" zb-h1 "$FLEXPIPE_ROOT/schedules/zb-h1.mlir" --microbatches 8 \
    --time-model=cost
  sed 's/optimize gradient_separation/optimize gradient_separation async_comm/' \
    "$FLEXPIPE_ROOT/schedules/zb-v.mlir" > "$dir/zb-v-async.mlir"
  "$fn" zb-v-async "$dir/zb-v-async.mlir" --microbatches 8 --time-model=cost
}
