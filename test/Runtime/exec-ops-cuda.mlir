// flexpipe-compile --backend=cuda --ops: the operations are compiled with
// nvcc's host compiler and linked into every CUDA rank and into 'reference'.
// Runs without a GPU: the ranks link and answer --help, and a rank built
// without the operation its program runs says so before looking for a GPU.
// REQUIRES: cuda

// RUN: rm -rf %t && flexpipe-compile %examples/ops/log-norms.mlir --actors 2 --microbatches 2 --backend=cuda --ops %examples/ops/ActivationNorms.cpp -o %t/ops
// RUN: ls %t/ops | FileCheck %s --check-prefix=FILES
// FILES:      ActivationNorms.cpp
// FILES-NEXT: ActivationNorms.o
// FILES-NEXT: rank0
// FILES-NEXT: rank0.cpp
// FILES-NEXT: rank1
// FILES-NEXT: rank1.cpp
// FILES-NEXT: reference
// FILES-NEXT: reference.cpp
// FILES-NEXT: run-env.sh
// RUN: %t/ops/reference --list-operations | FileCheck %s --check-prefix=LIST
// LIST: log_norms
// RUN: %t/ops/rank1 --help 2>&1 | FileCheck %s --check-prefix=HELP
// HELP: usage: RANK_PROGRAM

// The build line of --emit=cpp is nvcc's.
// RUN: flexpipe-compile %examples/ops/log-norms.mlir --actors 2 --microbatches 2 --backend=cuda --ops %examples/ops/ActivationNorms.cpp --emit=cpp -o %t/cpp
// RUN: FileCheck %s --check-prefix=BUILD < %t/cpp/build.sh
// BUILD: nvcc -ccbin {{.*}} -c ActivationNorms.cpp -o ActivationNorms.o
// BUILD: nvcc -ccbin {{.*}} rank1.cpp ActivationNorms.o -o rank1 {{.*}}libflexpipe_rt_cuda.a {{.*}}-lcublas -lcublasLt -lnccl{{$}}

// RUN: flexpipe-compile %examples/ops/log-norms.mlir --actors 2 --microbatches 2 --backend=cuda -o %t/none 2>&1 | FileCheck %s --check-prefix=WARN
// WARN: warning: the program runs @log_norms, but no --ops file was given
// RUN: not %t/none/rank1 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: flexpipe: the program runs @log_norms but no operation of that name was compiled in; pass its source with flexpipe-compile --ops
