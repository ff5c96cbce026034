#!/usr/bin/env bash
# End-to-end check of the CUDA backend on a machine with NVIDIA GPUs (not part
# of scripts/test.sh: CI has no GPU). Builds, compiles five schedules for the
# tiny GPT (configs/models/tiny.yaml) with --backend=cuda, trains each with
# the environment launcher (run-env.sh), trains the same model in one process
# on the CPU (flexpipe-reference), and compares them with
# scripts/compare-training.py. Prints one line of figures per schedule and
# exits non-zero if any failed.
#
#   1f1b         4 actors, 8 micro-batches
#   1f1b-bf16    the same in bf16 mixed precision (FLEXPIPE_CUDA_MATH=bf16),
#                losses and weights within 2e-2 of the fp32 CPU reference
#
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
# in a gradient near zero into up to 2 lr (2e-3) for that weight. On an H100
# (2026-11-27) the fp32 runs stayed within 1.9e-7 (losses) and 1.4e-4
# (weights). The bf16 run is held to 2e-2 for both (on the H100: losses
# 1.4e-4, weights 7.5e-3).
#
# Bundle mode (below) runs three more entries of the bundle:
#   stress    1F1B on 4 ranks with 2 MiB messages through 256 KiB NCCL
#             buffers in 64 KiB chunks, with the streams on 1, 8 and 32
#             hardware queues (CUDA_DEVICE_MAX_CONNECTIONS); losses against
#             the reference
#   h4096     two hidden-4096 layers on one rank in fp32, tf32 and bf16:
#             iteration time, model TFLOP/s, device memory beside the cost
#             model's prediction, the runtime's profile of the fp32 and bf16
#             runs (profile-MATH.yaml, for flexpipe-compile --profile), and
#             bench/torch-gpt.py (PyTorch, CUDA, fp32 and bf16 autocast) on
#             the same model when Python's torch sees the GPU
#   sanitize  the tiny GPT on one rank under compute-sanitizer's memcheck,
#             initcheck, synccheck and racecheck; none may report an error
#
# With fewer GPUs than ranks, the ranks share the GPUs: run-env.sh starts
# them without MPI, so the CUDA backend counts (LOCAL_WORLD_SIZE above the
# GPUs every rank sees) and gives each rank after the first on a GPU its own
# NCCL_HOSTID (flexpipe-HOST-slotK) so that NCCL accepts several ranks per
# GPU; NCCL then connects the slots over sockets, and iteration times mean
# little.
#
# Usage: scripts/gpu-test.sh [--skip-build] [--iterations N] [--emulation]
#
# --emulation runs the same schedules where there is no GPU: the ranks are
# built with --backend=cuda-emulation (the CUDA backend's host code, kernels,
# streams and NCCL calls on the CPU: test/Runtime/CudaEmulation), so the
# executor, NcclComm's channels, groups and events, and the kernels run as a
# whole, with streams side by side and NCCL sends that wait for their
# receives. It finds ordering and hang mistakes and wrong numerics, not what
# only a GPU shows (speed, NCCL's own transports, memory races within a
# kernel). test/Runtime/cuda-executor-emulation.test runs it.
# Environment: BUILD_DIR (default build), JOBS, FLEXPIPE_TIMEOUT (default 120
# s per rank wait), GPU_TEST_DIR (default $BUILD_DIR/gpu-test; replaced
# when it is an earlier run's, refused when it holds other files).
#
# Without the compiler (a GPU machine with nvcc and NCCL but no LLVM/MLIR, no
# apt, no MPI): scripts/gpu-bundle.sh packs rank sources, runtime libraries
# and the reference's results on a machine that builds the project, and
#
#   scripts/gpu-test.sh --bundle DIR [--iterations N] [--link-only]
#
# prints what the machine has (nvcc, g++, Python packages, NCCL, mpirun,
# GPUs), links every rank with nvcc against DIR/lib, cuBLAS and NCCL (the
# CUDA toolkit's, or the pip wheels': see find_library), trains each
# schedule with run-env.sh and compares with DIR's reference results. Every
# step runs under `timeout`, and the whole finishes in about 8 minutes even
# when a run hangs. --link-only stops after linking (no GPU needed).
# Environment: NCCL_HOME, CUBLAS_HOME (a directory with lib/ or lib64/: only
# that one is tried), CUDA_HOME or NVCC, CXX (nvcc's host compiler, default
# g++), GPU_TEST_DIR (default DIR/../gpu-test), FLEXPIPE_TIMEOUT (default 30
# s per rank wait), GPU_TEST_RUN_TIMEOUT (default 60 s per schedule),
# GPU_TEST_BUDGET (default 450 s: a schedule that could end past it is
# skipped), GPU_TEST_SCHEDULES (the bundle's entries to run, in that order;
# default all), GPU_TEST_STALE_BUNDLE=1 (accept a bundle made with other
# runtime headers).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# --- Bundle mode (--bundle DIR) ---------------------------------------------

# A hash of the runtime's headers, which the rank sources compile against:
# gpu-bundle.sh records it, --bundle checks it against the tree.
header_hash() {
  (cd "$FLEXPIPE_ROOT" && find runtime/include -type f | LC_ALL=C sort |
    xargs cat | sha256sum | cut -c1-16)
}

# step SECONDS WHAT COMMAND...: COMMAND under `timeout`; says which step hung.
step() {
  local limit=$1 what=$2
  shift 2
  timeout --kill-after=10 "$limit" "$@"
  local code=$?
  if [ $code -eq 124 ] || [ $code -eq 137 ]; then
    echo "gpu-test: HUNG: $what did not finish within $limit s" >&2
  fi
  return $code
}

# The directories of Python packages (namespace packages too: the pip wheels
# put NCCL in nvidia/nccl and cuBLAS in nvidia/cublas or nvidia/cu13).
python_dirs() {
  command -v python3 > /dev/null || return 0
  step 30 "python3 looking for $*" python3 - "$@" << 'PY' 2> /dev/null
import importlib.util, sys
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    if spec is not None:
        print("\n".join(spec.submodule_search_locations or []))
PY
}

# find_library WHAT FILE HOME_VARIABLE PIP_MODULES...: the path of FILE
# (libnccl.so.2, libcublas.so.13, ...) in lib/ or lib64/ of $HOME_VARIABLE
# when set (only there), else of the pip packages, the CUDA toolkit and the
# system's library directories; dies saying where it looked.
find_library() {
  local what=$1 file=$2 variable=$3
  shift 3
  local prefixes=() looked=() prefix dir
  if [ -n "${!variable:-}" ]; then
    prefixes=("${!variable}")
  else
    mapfile -t prefixes < <(python_dirs "$@")
    prefixes+=("$CUDA_HOME" /usr /usr/local)
  fi
  for prefix in "${prefixes[@]}"; do
    for dir in "$prefix/lib" "$prefix/lib64" "$prefix/lib/x86_64-linux-gnu" \
               "$prefix/targets/x86_64-linux/lib"; do
      looked+=("$dir")
      if [ -e "$dir/$file" ]; then
        echo "$dir/$file"
        return 0
      fi
    done
  done
  echo "gpu-test: no $what ($file) found; looked in: ${looked[*]}" >&2
  [ -n "${!variable:-}" ] || echo "gpu-test: (pip packages tried: $*; set $variable to a directory with lib/$file)" >&2
  return 1
}

# Prints what the machine has, for the session that reads the output.
inventory() {
  log "Inventory"
  echo "  host:    $(hostname), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  echo "  nvcc:    ${NVCC:-none} ($("${NVCC:-false}" --version 2>/dev/null | sed -n 's/.*release \([^,]*\), \(.*\)/release \1, \2/p'))"
  echo "  $CXX:     $(command -v "$CXX" > /dev/null && "$CXX" --version | head -n 1 || echo none)"
  echo "  cmake:   $(cmake --version 2>/dev/null | head -n 1 || echo none); ninja: $(ninja --version 2>/dev/null || echo none)"
  echo "  mpirun:  $(command -v mpirun > /dev/null && echo "yes, $(command -v mpirun) ($(step 10 'mpirun --version' mpirun --version 2>&1 | head -n 1))" || echo no)"
  if command -v python3 > /dev/null; then
    echo "  python3: $(python3 --version 2>&1 | cut -d' ' -f2); $(step 30 'python3 listing packages' python3 -c '
import importlib.metadata as m
names = sorted({(d.metadata["Name"] or "").lower() for d in m.distributions()})
want = ["torch", "numpy", "mpi4py"] + [n for n in names if n.startswith("nvidia-")]
print(", ".join(n + " " + (m.version(n) if n in names else "no") for n in want))' 2>&1)"
  else
    echo "  python3: none"
  fi
  if [ "$link_only" = 0 ]; then
    echo "  GPUs:    $(step 20 'nvidia-smi' nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | paste -sd ';')"
  fi
}

# link_rank DIR ACTOR: DIR/rankACTOR from DIR/rankACTOR.cpp and the bundle.
link_rank() {
  local dir=$1 actor=$2
  local command=("$NVCC" -ccbin "$CXX" -std=c++17 -O2
    -I"$FLEXPIPE_ROOT/runtime/include" "$dir/rank$actor.cpp" -o "$dir/rank$actor"
    "$BUNDLE/lib/libflexpipe_rt_cuda.a" "$BUNDLE/lib/libFlexPipeRuntime.a"
    -L"$LINK_DIR" -lcublas -lcublasLt -lnccl -lpthread "${RPATHS[@]}")
  echo "${command[*]}" >> "$dir/link.log"
  step 60 "linking $dir/rank$actor" "${command[@]}" >> "$dir/link.log" 2>&1
}

# record NAME OK TEXT: one summary line; OK 0 passes, 1 fails, 2 is a skip.
record() {
  local what
  case $2 in 0) what=PASS ;; 1) what=FAIL ;; *) what=SKIPPED ;; esac
  summary+=("$(printf '%-12s %s: %s' "$1" "$what" "$3")")
  [ "$2" = 0 ] || failures=$((failures + 1))
}

# joined ITEMS...: the items separated by "; ".
joined() {
  local out
  out=$(printf '%s; ' "$@")
  echo "${out%; }"
}

# time_left SECONDS: whether SECONDS more fit in the budget.
time_left() { [ $((SECONDS - T0 + $1)) -le "$BUDGET" ]; }

# mean_time LOG: the run's mean iteration time in ms ('?' if none).
mean_time() {
  local t
  t=$(sed -n 's/.*mean iteration time \([0-9.]*\) ms.*/\1/p' "$1" 2>/dev/null | head -n 1)
  echo "${t:-?}"
}

# train DIR LOG [run-env.sh options]: trains under `step`; prints the log's
# tail; returns the run's code.
train() {
  local dir=$1 log=$2
  shift 2
  step "$RUN_TIMEOUT" "${dir##*/}: training (FLEXPIPE_CUDA_MATH=${FLEXPIPE_CUDA_MATH:-fp32})" \
    "$dir/run-env.sh" "$@" > "$log" 2>&1
  local code=$?
  tail -n 12 "$log"
  return $code
}

# check_compare NAME DIR: trains and compares with the reference's losses
# and weights (ref-weights, or the bundle's ref-weights.gz; losses only
# where there is neither).
check_compare() {
  local name=$1 dir=$2 math losstol weighttol start=$SECONDS
  read -r math losstol weighttol <<< "$(gpu_test_tolerances "$name")"
  log "$name: training $iterations iterations on $ranks ranks ($GPUS GPU(s)$([ "$ranks" -gt "$GPUS" ] && echo ', an NCCL_HOSTID per further rank on a GPU'))"
  FLEXPIPE_CUDA_MATH=$math train "$dir" "$dir/run.log" --iterations "$iterations" \
    --losses "$dir/losses" --weights "$dir/weights"
  local code=$? took=$((SECONDS - start))
  if [ $code -ne 0 ]; then
    record "$name" 1 "the run exited with code $code after $took s$([ $code -eq 124 ] && echo ', hung') (see $dir/run.log)"
    return
  fi
  local weights=()
  [ -f "$dir/ref-weights.gz" ] && gzip -dc "$dir/ref-weights.gz" > "$dir/ref-weights"
  [ -f "$dir/ref-weights" ] && weights=("$dir/weights" "$dir/ref-weights")
  local compare ok
  compare=$(step 60 "$name: compare-training.py" python3 \
    "$FLEXPIPE_ROOT/scripts/compare-training.py" "$dir/losses" \
    "$dir/ref-losses" "${weights[@]}" --loss-tol "$losstol" --weight-tol "$weighttol" 2>&1)
  ok=$?
  echo "$compare"
  record "$name" $((ok != 0)) "$ranks ranks, $took s, mean iteration time $(mean_time "$dir/run.log") ms; $(echo "$compare" | tail -n 1)"
}

# check_sanitize NAME DIR: the one-rank program under compute-sanitizer's
# memcheck, initcheck and synccheck; each must report no error.
check_sanitize() {
  local name=$1 dir=$2 tool sanitizer found=() clean=()
  sanitizer=$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")
  if [ ! -x "$sanitizer" ]; then
    record "$name" 2 "no compute-sanitizer (PATH, $CUDA_HOME/bin)"
    return
  fi
  for tool in memcheck initcheck synccheck racecheck; do
    time_left 90 || { found+=("$tool: no time left"); continue; }
    log "$name: $iterations iterations on one rank under compute-sanitizer --tool $tool"
    # API errors are not reported: NCCL's start-up asks for its kernels of
    # every architecture (cudaFuncGetAttributes) and handles the
    # cudaErrorNoKernelImageForDevice of those not built for this GPU; the
    # backend checks every call of its own and stops on an error.
    step 90 "$name: compute-sanitizer --tool $tool" "$sanitizer" --tool "$tool" \
      --report-api-errors no --error-exitcode 9 --print-limit 20 \
      "$dir/rank0" --iterations "$iterations" \
      > "$dir/sanitize-$tool.log" 2>&1
    local code=$?
    tail -n 6 "$dir/sanitize-$tool.log"
    if [ $code -eq 0 ]; then
      clean+=("$tool")
    else
      found+=("$tool: exit $code, $(grep -m1 -o 'ERROR SUMMARY: [0-9]* error[s]*' "$dir/sanitize-$tool.log" || echo 'no summary')")
    fi
  done
  if [ ${#found[@]} -eq 0 ]; then
    record "$name" 0 "no errors from ${clean[*]} (one rank, $iterations iterations)"
  else
    record "$name" 1 "$(joined "${found[@]}") (see $dir/sanitize-*.log); clean: ${clean[*]:-none}"
  fi
}

# check_stress NAME DIR: large messages through small NCCL buffers, with
# the streams on 1, 8 and 32 hardware queues; losses against the reference.
check_stress() {
  local name=$1 dir=$2 queues results=() bad=0
  for queues in 1 8 32; do
    if ! time_left "$RUN_TIMEOUT"; then results+=("$queues queues: no time left"); bad=1; continue; fi
    log "$name: $ranks ranks, CUDA_DEVICE_MAX_CONNECTIONS=$queues, NCCL_BUFFSIZE=256 KiB, chunks of 64 KiB"
    CUDA_DEVICE_MAX_CONNECTIONS=$queues NCCL_BUFFSIZE=262144 \
      NCCL_P2P_NET_CHUNKSIZE=65536 NCCL_P2P_NVL_CHUNKSIZE=65536 \
      train "$dir" "$dir/run-q$queues.log" --iterations "$iterations" \
      --losses "$dir/losses-q$queues"
    local code=$?
    if [ $code -ne 0 ]; then
      results+=("$queues queues: exit $code$([ $code -eq 124 ] && echo ', hung')"); bad=1; continue
    fi
    if step 30 "$name: compare-training.py" python3 "$FLEXPIPE_ROOT/scripts/compare-training.py" \
         "$dir/losses-q$queues" "$dir/ref-losses" --loss-tol 1e-4 > "$dir/compare-q$queues.log" 2>&1; then
      results+=("$queues queues: $(mean_time "$dir/run-q$queues.log") ms")
    else
      results+=("$queues queues: $(tail -n 1 "$dir/compare-q$queues.log")"); bad=1
    fi
  done
  record "$name" $bad "$ranks ranks, $(cat "$dir/about" 2>/dev/null || echo 'large messages'); $(joined "${results[@]}")"
}

# check_speed NAME DIR: one rank in fp32, tf32 and bf16 (iteration time,
# model TFLOP/s, device memory beside the cost model's prediction), the
# profiles of the fp32 and bf16 runs, and PyTorch on the same model.
check_speed() {
  local name=$1 dir=$2 math flops line results=()
  flops=$(cat "$dir/model-flops")
  for math in fp32 tf32 bf16; do
    time_left "$RUN_TIMEOUT" || { results+=("$math: no time left"); continue; }
    log "$name: FLEXPIPE_CUDA_MATH=$math, $iterations iterations"
    FLEXPIPE_CUDA_MATH=$math train "$dir" "$dir/run-$math.log" --iterations "$iterations" ||
      { results+=("$math: exit $?"); continue; }
    results+=("$math $(tflops "$dir/run-$math.log" "$flops")")
    [ "$math" = tf32 ] && continue
    time_left "$RUN_TIMEOUT" || continue
    FLEXPIPE_CUDA_MATH=$math train "$dir" "$dir/profile-run-$math.log" \
      --iterations "$iterations" --profile "$dir/profile-$math.yaml" ||
      results+=("$math profile: exit $?")
  done
  if python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
    for math in fp32 bf16; do
      time_left 90 || { results+=("PyTorch $math: no time left"); continue; }
      log "$name: PyTorch, $math"
      step 90 "$name: bench/torch-gpt.py ($math)" python3 "$FLEXPIPE_ROOT/bench/torch-gpt.py" \
        $(cat "$dir/model-args") --ranks 1 --device cuda --math "$math" \
        --iterations "$iterations" > "$dir/torch-$math.log" 2>&1 ||
        { tail -n 5 "$dir/torch-$math.log"; results+=("PyTorch $math: exit $?"); continue; }
      cat "$dir/torch-$math.log"
      results+=("PyTorch $math $(tflops "$dir/torch-$math.log" "$flops")")
    done
  else
    results+=("PyTorch: no CUDA-enabled torch")
  fi
  local bad=0
  for line in "${results[@]}"; do case $line in *exit*|*"no time"*) bad=1 ;; esac; done
  record "$name" $bad "one rank; $(joined "${results[@]}")"
}

# tflops LOG FLOPS: "T ms, X TFLOP/s" from LOG's mean iteration time.
tflops() {
  local t
  t=$(mean_time "$1")
  [ "$t" = "?" ] && { echo "no time"; return; }
  awk -v t="$t" -v f="$2" 'BEGIN { printf "%.2f ms, %.1f TFLOP/s", t, f / (t * 1e-3) / 1e12 }'
}

# run_bundled NAME: links the rank programs of one bundle entry, then runs
# its check (the entry's kind: compare, sanitize, stress or speed).
run_bundled() {
  local name=$1 dir="$WORK/$1"
  mkdir -p "$dir"
  cp -r "$BUNDLE/$name"/. "$dir/" || { record "$name" 1 "the bundle lacks its files"; return; }
  local actors start=$SECONDS src kind iterations=$iterations ranks
  kind=$(cat "$dir/kind" 2>/dev/null || echo compare)
  [ -f "$dir/iterations" ] && iterations=$(cat "$dir/iterations")
  time_left 60 || { record "$name" 2 "no time left in the $BUDGET s budget"; return; }
  ranks=$(sed -n 's/^actors=[0-9]* dp=[0-9]* world=\([0-9]*\)$/\1/p' "$dir/run-env.sh")
  actors=$(ls "$dir"/rank*.cpp | wc -l)
  for src in "$dir"/rank*.cpp; do
    src=${src##*/rank}
    if ! link_rank "$dir" "${src%.cpp}"; then
      tail -n 20 "$dir/link.log"
      record "$name" 1 "linking rank${src%.cpp} failed (see $dir/link.log)"
      return
    fi
  done
  log "$name: linked $actors rank programs in $((SECONDS - start)) s"
  if [ "$link_only" = 1 ]; then
    summary+=("$(printf '%-12s LINKED: %d rank programs, %d ranks' "$name" "$actors" "$ranks")")
    return
  fi
  time_left "$RUN_TIMEOUT" || { record "$name" 2 "no time left in the $BUDGET s budget"; return; }
  "check_$kind" "$name" "$dir"
}

# The whole of --bundle DIR.
bundle_mode() {
  T0=$SECONDS
  BUNDLE=$(cd "$bundle" 2>/dev/null && pwd) || die "--bundle $bundle: no such directory"
  [ -f "$BUNDLE/MANIFEST" ] || die "$BUNDLE has no MANIFEST: make it with scripts/gpu-bundle.sh"
  CXX=${CXX:-g++}
  NVCC=${NVCC:-$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")}
  [ -x "$NVCC" ] || NVCC=
  CUDA_HOME=${CUDA_HOME:-$([ -n "$NVCC" ] && cd "$(dirname "$(realpath "$NVCC")")/.." && pwd)}
  inventory
  [ -n "$NVCC" ] || die "no nvcc: looked in PATH and ${CUDA_HOME:-/usr/local/cuda}/bin (set NVCC or CUDA_HOME)"
  command -v "$CXX" > /dev/null || die "no host C++ compiler '$CXX' (set CXX)"
  command -v python3 > /dev/null || die "no python3 (compare-training.py needs it)"

  local nccl cublas cublasLt
  nccl=$(find_library NCCL libnccl.so.2 NCCL_HOME nvidia.nccl nvidia.cu13) || exit 1
  cublas=$(find_library cuBLAS libcublas.so.13 CUBLAS_HOME nvidia.cublas nvidia.cu13) || exit 1
  # cuBLASLt ships beside cuBLAS (the toolkit's lib64, the cuBLAS wheel).
  cublasLt=$(dirname "$cublas")/libcublasLt.so.13
  [ -e "$cublasLt" ] || die "no libcublasLt.so.13 beside $cublas"
  echo "  NCCL:    $nccl"
  echo "  cuBLAS:  $cublas (and libcublasLt.so.13)"

  local want have
  want=$(sed -n 's/^runtime_include_hash=//p' "$BUNDLE/MANIFEST") have=$(header_hash)
  if [ "$want" != "$have" ] && [ "${GPU_TEST_STALE_BUNDLE:-0}" != 1 ]; then
    die "runtime/include differs from the bundle's ($have here, $want in $BUNDLE/MANIFEST): rerun scripts/gpu-bundle.sh, or set GPU_TEST_STALE_BUNDLE=1"
  fi
  local made
  made=$(sed -n 's/^iterations=//p' "$BUNDLE/MANIFEST")
  [ -z "$iterations" ] || [ "$iterations" = "$made" ] ||
    die "the bundle's reference ran $made iterations, not $iterations: rerun scripts/gpu-bundle.sh --iterations $iterations"
  iterations=$made

  local gpus=0
  if [ "$link_only" = 0 ]; then
    gpus=$(step 20 "nvidia-smi -L" nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    if [ "${gpus:-0}" -eq 0 ]; then
      echo "gpu-test: no NVIDIA GPU found (nvidia-smi -L lists none); use --link-only to only link" >&2
      exit 2
    fi
  fi
  GPUS=$gpus
  WORK=$(realpath -m "${GPU_TEST_DIR:-$BUNDLE/../gpu-test}")
  fresh_dir "$WORK" .flexpipe-gpu-test && mkdir -p "$WORK/link"
  # -lnccl, -lcublas and -lcublasLt through links named as the linker wants
  # them (the wheels have only the versioned names); the rank programs find
  # the real ones through their rpath.
  ln -s "$nccl" "$WORK/link/libnccl.so"
  ln -s "$cublas" "$WORK/link/libcublas.so"
  ln -s "$cublasLt" "$WORK/link/libcublasLt.so"
  LINK_DIR=$WORK/link
  RPATHS=(-Xlinker "-rpath=$(dirname "$nccl")" -Xlinker "-rpath=$(dirname "$cublas")")
  export LD_LIBRARY_PATH="$(dirname "$nccl"):$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export FLEXPIPE_TIMEOUT=${FLEXPIPE_TIMEOUT:-30}
  # NCCL's warnings (why a connection failed) go to each run's run.log.
  export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  RUN_TIMEOUT=${GPU_TEST_RUN_TIMEOUT:-60} BUDGET=${GPU_TEST_BUDGET:-450}

  failures=0 summary=()
  local name
  for name in ${GPU_TEST_SCHEDULES:-$(sed -n 's/^schedules=//p' "$BUNDLE/MANIFEST")}; do
    run_bundled "$name"
  done
  echo
    log "Summary ($(sed -n 's/^commit=//p' "$BUNDLE/MANIFEST"); tolerances: losses 1e-4 relative, weights 1e-3, bf16 runs 2e-2 and 2e-2; $((SECONDS - T0)) s in all)"
  local line
  for line in "${summary[@]}"; do echo "  $line"; done
  echo "gpu-test: $((${#summary[@]} - failures)) $([ "$link_only" = 1 ] && echo linked || echo passed), $failures failed"
  [ "$failures" -eq 0 ]
}

# --- Options ---------------------------------------------------------------

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
build=1 iterations= bundle= link_only=0 emulation=0
while [ $# -gt 0 ]; do
  case $1 in
    --skip-build) build=0 ;;
    --emulation) emulation=1 ;;
    --iterations) iterations=${2:?--iterations needs a number}; shift ;;
    --bundle) bundle=${2:?--bundle needs a directory}; shift ;;
    --link-only) link_only=1 ;;
    --header-hash) header_hash; exit ;; # for scripts/gpu-bundle.sh
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see scripts/gpu-test.sh --help)" ;;
  esac
  shift
done
if [ -n "$bundle" ]; then
  bundle_mode
  exit
fi
[ "$link_only" = 0 ] || die "--link-only needs --bundle DIR"
iterations=${iterations:-10}
[ "$iterations" -ge 2 ] 2>/dev/null || die "--iterations must be at least 2"

backend=cuda
if [ "$emulation" = 1 ]; then
  backend=cuda-emulation gpus=1 # the emulation has one GPU
  log "No GPU: the CUDA backend's ranks run on the CPU (--backend=cuda-emulation)"
else
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "${gpus:-0}" -eq 0 ]; then
    echo "gpu-test: no NVIDIA GPU found (nvidia-smi -L lists none); this check needs one (or use --emulation)" >&2
    exit 2
  fi
  log "GPUs: $gpus"
  nvidia-smi -L
fi

if [ "$build" = 1 ]; then
  JOBS=${JOBS:-$(( $(nproc) < 8 ? $(nproc) : 8 ))}
  ensure_packages
  build_all
fi
COMPILE="$BUILD_DIR/bin/flexpipe-compile"
REFERENCE="$BUILD_DIR/bin/flexpipe-reference"
[ -x "$COMPILE" ] && [ -x "$REFERENCE" ] || die "no flexpipe-compile in $BUILD_DIR/bin (build first)"
[ "$emulation" = 1 ] ||
  grep -q '#define FLEXPIPE_ENABLE_CUDA 1' "$BUILD_DIR/include/flexpipe/Config.h" ||
  die "$BUILD_DIR was configured without the CUDA backend"

WORK="${GPU_TEST_DIR:-$BUILD_DIR/gpu-test}"
export FLEXPIPE_TIMEOUT=${FLEXPIPE_TIMEOUT:-120}
fresh_dir "$WORK" .flexpipe-gpu-test

failures=0
summary=()
GPUS=$gpus RUN_TIMEOUT=900
# run NAME SPEC [flexpipe-compile options...]: compiles, trains the
# reference, then trains the ranks and compares (check_compare).
run() {
  local name=$1 spec=$2
  shift 2
  local dir="$WORK/$name" ranks
  log "$name: compiling"
  if ! "$COMPILE" "$spec" --backend="$backend" --emit=exe -o "$dir" "$@"; then
    record "$name" 1 "flexpipe-compile failed"
    return
  fi
  ranks=$(sed -n 's/.*--ntasks=\([0-9]*\).*/\1/p' "$dir/run-slurm.sh")
  if ! "$REFERENCE" "$dir/schedule.txt" --iterations "$iterations" \
       --losses "$dir/ref-losses" --weights "$dir/ref-weights" > "$dir/ref.log"; then
    record "$name" 1 "flexpipe-reference failed (see $dir/ref.log)"
    return
  fi
  check_compare "$name" "$dir"
}

gpu_test_schedules run "$WORK"

echo
log "Summary ($([ "$emulation" = 1 ] && echo "CUDA emulation on the CPU; ")tolerances: losses 1e-4 relative, weights 1e-3, bf16 runs 2e-2 and 2e-2)"
for line in "${summary[@]}"; do echo "  $line"; done
echo "gpu-test: $((${#summary[@]} - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
