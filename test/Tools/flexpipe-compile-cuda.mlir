// flexpipe-compile --backend=cuda: rank executables built with nvcc against
// the CUDA runtime backend, and their launchers. Runs without a GPU: it
// compiles and links, and the executables answer --help.
// REQUIRES: cuda

// RUN: rm -rf %t && mkdir -p %t && cd %t && flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 4 --dp 2 --backend=cuda | FileCheck %s --check-prefix=EXE
// EXE: flexpipe-compile: wrote 2 rank executables and launchers to 1f1b.ranks/ (run 1f1b.ranks/run-env.sh)

// RUN: ls %t/1f1b.ranks | FileCheck %s --check-prefix=FILES
// FILES:      rank0
// FILES-NEXT: rank0.cpp
// FILES-NEXT: rank1
// FILES-NEXT: rank1.cpp
// FILES-NEXT: run-env.sh
// FILES-NEXT: run-mpi.sh
// FILES-NEXT: run-slurm.sh
// FILES-NEXT: schedule.txt

// The executables link cuBLAS and NCCL and start without a GPU for --help.
// RUN: %t/1f1b.ranks/rank0 --help 2>&1 | FileCheck %s --check-prefix=HELP
// HELP: usage: RANK_PROGRAM [--iterations N] [--threads N] [--lr X] [--losses FILE] [--weights FILE] [--profile FILE] [--trace FILE]

// The environment launcher starts actors x dp = 4 ranks, rank r running
// actor r / 2 (rank r on device r, as the cost model prices it); mpirun and
// srun start the same.
// RUN: FileCheck %s --check-prefix=ENV < %t/1f1b.ranks/run-env.sh
// ENV: #!/usr/bin/env bash
// ENV: actors=2 dp=2 world=4
// ENV: export RANK=$r WORLD_SIZE=$world LOCAL_RANK=$i LOCAL_WORLD_SIZE=$per
// ENV: exec "$dir/rank$((r / dp))" "$@"
// RUN: FileCheck %s --check-prefix=MPI < %t/1f1b.ranks/run-mpi.sh
// MPI: mpirun ${FLEXPIPE_MPIRUN_FLAGS---oversubscribe} -np 1 "$dir/rank0" "$@" : -np 1 "$dir/rank0" "$@" : -np 1 "$dir/rank1" "$@" : -np 1 "$dir/rank1" "$@"
// RUN: FileCheck %s --check-prefix=SLURM < %t/1f1b.ranks/run-slurm.sh
// SLURM: exec "$dir/rank$((SLURM_PROCID / 2))" "$@"
// SLURM: exec srun --ntasks=4 ${FLEXPIPE_SRUN_FLAGS-} "$dir/run-slurm.sh" --flexpipe-slurm-task "$@"

// The generated C++ is the same for both backends; only the link differs.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 4 --dp 2 --emit=cpp -o %t/cpu
// RUN: diff %t/cpu/rank0.cpp %t/1f1b.ranks/rank0.cpp

// A runtime directory without the CUDA library is an error, not a crash.
// RUN: mkdir -p %t/empty && not env FLEXPIPE_RUNTIME_LIB=%t/empty flexpipe-compile %schedules/1f1b.mlir --actors 2 --backend=cuda -o %t/bad 2>&1 | FileCheck %s --check-prefix=NOLIB
// NOLIB: flexpipe-compile: cannot find {{.*}}empty/libflexpipe_rt_cuda.a (build the flexpipe_rt_cuda target, or set FLEXPIPE_RUNTIME_LIB)
// RUN: not env FLEXPIPE_NVCC=no-such-nvcc flexpipe-compile %schedules/1f1b.mlir --actors 2 --backend=cuda -o %t/bad 2>&1 | FileCheck %s --check-prefix=NONVCC
// NONVCC: flexpipe-compile: cannot find nvcc 'no-such-nvcc' (set FLEXPIPE_NVCC)
// RUN: not flexpipe-compile %schedules/1f1b.mlir --backend=rocm 2>&1 | FileCheck %s --check-prefix=BACKEND
// BACKEND: --backend: rocm not in {cpu,cuda,cuda-emulation}

// run-env.sh with stand-in rank programs (no GPU): it starts every rank with
// torchrun's variables, passes the arguments on, and exits 0 when all do.
// RUN: rm -rf %t/fake && cp -r %t/1f1b.ranks %t/fake
// RUN: printf '#!/bin/sh\necho "actor %%s: rank $RANK of $WORLD_SIZE, local $LOCAL_RANK of $LOCAL_WORLD_SIZE, args $*, id file ${FLEXPIPE_NCCL_ID_FILE:+set}, run ${FLEXPIPE_RUN_ID:+set}, host id ${NCCL_HOSTID:-unset}"\n' 0 > %t/fake/rank0
// RUN: printf '#!/bin/sh\necho "actor %%s: rank $RANK of $WORLD_SIZE, local $LOCAL_RANK of $LOCAL_WORLD_SIZE, args $*, id file ${FLEXPIPE_NCCL_ID_FILE:+set}, run ${FLEXPIPE_RUN_ID:+set}, host id ${NCCL_HOSTID:-unset}"\n' 1 > %t/fake/rank1
// RUN: chmod +x %t/fake/rank0 %t/fake/rank1
// RUN: %t/fake/run-env.sh --iterations 3 | sort | FileCheck %s --check-prefix=RANKS
// RANKS:      actor 0: rank 0 of 4, local 0 of 4, args --iterations 3, id file set, run set, host id unset
// RANKS-NEXT: actor 0: rank 1 of 4, local 1 of 4, args --iterations 3, id file set, run set, host id unset
// RANKS-NEXT: actor 1: rank 2 of 4, local 2 of 4, args --iterations 3, id file set, run set, host id unset
// RANKS-NEXT: actor 1: rank 3 of 4, local 3 of 4, args --iterations 3, id file set, run set, host id unset

// Machine 1 of 2 starts ranks 2 and 3, both replicas of actor 1: a replica
// group (the gradient all-reduce) shares a machine, as the cost model
// prices it. The launcher sets no NCCL host id: the ranks do, from
// LOCAL_WORLD_SIZE and the GPUs they see (bootstrap.test).
// RUN: env FLEXPIPE_NNODES=2 FLEXPIPE_NODE_RANK=1 FLEXPIPE_RUN_ID=job7 FLEXPIPE_NCCL_ID_FILE=%t/id %t/fake/run-env.sh | sort | FileCheck %s --check-prefix=NODE
// NODE:      actor 1: rank 2 of 4, local 0 of 2, args , id file set, run set, host id unset
// NODE-NEXT: actor 1: rank 3 of 4, local 1 of 2, args , id file set, run set, host id unset
// RUN: not env FLEXPIPE_NNODES=2 %t/fake/run-env.sh 2>&1 | FileCheck %s --check-prefix=SHARED
// SHARED: run-env.sh: on several machines set FLEXPIPE_NCCL_ID_FILE (on a shared file system) and FLEXPIPE_RUN_ID (the same on every machine)
// RUN: not env FLEXPIPE_NNODES=3 %t/fake/run-env.sh 2>&1 | FileCheck %s --check-prefix=NODES
// NODES: run-env.sh: FLEXPIPE_NNODES (3) must divide 4 ranks and FLEXPIPE_NODE_RANK (0) be below it
// Decimal numbers only (08 read as octal: "value too great for base").
// RUN: not env FLEXPIPE_NNODES=08 %t/fake/run-env.sh 2>&1 | FileCheck %s --check-prefix=OCTAL
// OCTAL: run-env.sh: FLEXPIPE_NNODES (08) must divide 4 ranks and FLEXPIPE_NODE_RANK (0) be below it

// A rank that fails stops the others; the launcher names it and exits with
// its code.
// RUN: printf '#!/bin/sh\nexec sleep 60\n' > %t/fake/rank0
// RUN: printf '#!/bin/sh\nsleep 0.5\nexit 3\n' > %t/fake/rank1
// RUN: %t/fake/run-env.sh 2> %t/fail.err; echo "exit code $?" >> %t/fail.err
// RUN: FileCheck %s --check-prefix=FAIL < %t/fail.err
// FAIL: run-env.sh: rank {{[23]}} (pid {{[0-9]+}}) exited with code 3; stopping the other ranks
// FAIL: exit code 3
