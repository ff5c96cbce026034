// Passes that work on schedules refuse a module that holds only specs: they
// left it as it was and exited 0, so -flexpipe-convert-to-emitc "lowered" a
// spec to nothing and -flexpipe-verify-schedule "verified" it.
// RUN: not flexpipe-opt %s -flexpipe-verify-schedule 2>&1 | FileCheck %s --check-prefix=VERIFY
// RUN: not flexpipe-opt %s -flexpipe-simulate 2>&1 | FileCheck %s --check-prefix=SIMULATE
// RUN: not flexpipe-opt %s -flexpipe-insert-comm 2>&1 | FileCheck %s --check-prefix=INSERT
// RUN: not flexpipe-opt %s -flexpipe-split-backward 2>&1 | FileCheck %s --check-prefix=SPLIT
// RUN: not flexpipe-opt %s -flexpipe-gradient-separation 2>&1 | FileCheck %s --check-prefix=SEPARATE
// RUN: not flexpipe-opt %s -flexpipe-async-comm 2>&1 | FileCheck %s --check-prefix=ASYNC
// RUN: not flexpipe-opt %s -flexpipe-convert-to-emitc 2>&1 | FileCheck %s --check-prefix=EMITC
// VERIFY: pass-levels.mlir:[[@LINE+8]]:1: error: 'flexpipe.pipeline' op is a spec, and -flexpipe-verify-schedule works on schedules (flexpipe.schedule): turn the spec into one first (-flexpipe-spec-to-schedule, or flexpipe-compile)
// SIMULATE: error: 'flexpipe.pipeline' op is a spec, and -flexpipe-simulate works on schedules
// INSERT: error: 'flexpipe.pipeline' op is a spec, and -flexpipe-insert-comm works on schedules
// SPLIT: error: 'flexpipe.pipeline' op is a spec, and -flexpipe-split-backward works on schedules
// SEPARATE: error: 'flexpipe.pipeline' op is a spec, and -flexpipe-gradient-separation works on schedules
// ASYNC: error: 'flexpipe.pipeline' op is a spec, and -flexpipe-async-comm works on schedules
// EMITC: error: 'flexpipe.pipeline' op is a spec, and -flexpipe-convert-to-emitc works on schedules

flexpipe.pipeline @one_f_one_b actors(3) microbatches(5) {
  flexpipe.module @gpt layers(6) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
}

// A pass that rewrites a program drops the prediction -flexpipe-simulate
// made of the old one: it kept the 1F1B figures (14 steps) after the
// backwards were split (the program then takes 21).
// RUN: flexpipe-opt %s -flexpipe-spec-to-schedule -flexpipe-simulate | FileCheck %s --check-prefix=BEFORE
// RUN: flexpipe-opt %s -flexpipe-spec-to-schedule -flexpipe-simulate -flexpipe-split-backward | FileCheck %s --check-prefix=STALE
// RUN: flexpipe-opt %s -flexpipe-spec-to-schedule -flexpipe-simulate -flexpipe-split-backward -flexpipe-simulate | FileCheck %s --check-prefix=AGAIN
// BEFORE: iteration_time = 1.400000e+01
// STALE-NOT: flexpipe.simulation
// AGAIN: iteration_time = 2.100000e+01

// A schedule without communication (before -flexpipe-insert-comm) misses
// every input from another actor: the passes that replay it say to insert
// communication first.
// RUN: flexpipe-opt %s -flexpipe-partition -flexpipe-place -flexpipe-schedule > %t.compute.mlir
// RUN: not flexpipe-opt %t.compute.mlir -flexpipe-verify-schedule 2>&1 | FileCheck %s --check-prefix=NOCOMM
// RUN: not flexpipe-opt %t.compute.mlir -flexpipe-simulate 2>&1 | FileCheck %s --check-prefix=NOCOMM
// RUN: not flexpipe-opt %t.compute.mlir -flexpipe-convert-to-emitc 2>&1 | FileCheck %s --check-prefix=NOCOMM
// NOCOMM: error: {{.*}} runs before {{.*}} is computed or received here (the program has no sends or receives: insert communication first, -flexpipe-insert-comm)
