// The zero-bubble schedules (split backward, weight gradients moved into
// bubbles) and asynchronous receives train like the single-process
// reference: the runtime's igrad and wgrad do real work, and moving W changes
// only the order a stage's weight gradients are summed in (with the tiny
// GPT's costs, zb-h1 runs W1 after W6 on actor 2: the loss then differs in
// the 8th digit). Same comparison as train.mlir.
// REQUIRES: mpi

// RUN: rm -rf %t && mkdir -p %t
// RUN: %train zb-h1 %schedules/zb-h1.mlir --microbatches 8 --time-model=cost | FileCheck %s
// RUN: %train zb-v %schedules/zb-v.mlir --microbatches 8 --time-model=cost | FileCheck %s
// RUN: sed 's/optimize gradient_separation/optimize gradient_separation async_comm/' %schedules/zb-v.mlir > %t/zb-v-async.mlir
// RUN: %train zb-v-async %t/zb-v-async.mlir --microbatches 8 --time-model=cost | FileCheck %s
// RUN: grep -c flexpipe_rt_wait %t/zb-v-async/rank0.cpp | FileCheck %s --check-prefix=ASYNC
// CHECK: training: 4 iterations, loss {{.*}}, worst loss difference {{.*}}, worst weight difference {{.*}}, {{[0-9]+}} parameters
// ASYNC: {{[1-9][0-9]*}}
