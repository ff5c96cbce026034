// CUDA rank executables on a machine without a GPU stop at start-up with a
// clear message and a non-zero exit, however they are launched: alone, by
// the environment launcher (which names the rank that failed and stops the
// others) and by mpirun (MPI bootstrap). With a GPU, scripts/gpu-test.sh
// trains instead.
// REQUIRES: cuda, mpi
// UNSUPPORTED: cuda-device

// RUN: rm -rf %t && flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 4 --backend=cuda -o %t
// RUN: not %t/rank0 2>&1 | FileCheck %s --check-prefix=ALONE
// ALONE: flexpipe: rank 0: no usable CUDA device: cudaGetDeviceCount failed: {{.*}}. The CUDA backend needs an NVIDIA GPU and its driver; on machines without one, compile with --backend=cpu

// RUN: not %t/run-env.sh --iterations 2 2>&1 | FileCheck %s --check-prefix=ENV
// ENV-DAG: flexpipe: rank {{[01]}}: no usable CUDA device
// ENV-DAG: run-env.sh: rank {{[01]}} (pid {{[0-9]+}}) exited with code 1; stopping the other ranks

// RUN: not %t/run-mpi.sh --iterations 2 2>&1 | FileCheck %s --check-prefix=MPI
// MPI: flexpipe: rank {{[01]}}: no usable CUDA device

// The launch environment is checked before the GPU.
// RUN: not env RANK=1 WORLD_SIZE=2 %t/rank1 2>&1 | FileCheck %s --check-prefix=NOFILE
// NOFILE: flexpipe: WORLD_SIZE is 2: set FLEXPIPE_NCCL_ID_FILE to a file name every rank can reach (rank 0 writes the NCCL id there; run-env.sh sets it)
