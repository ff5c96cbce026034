// RUN: flexpipe-opt %s -split-input-file -flexpipe-spec-to-schedule | FileCheck %s

// An extra dependency between computations must hold when the schedule
// runs, not only in the scheduler's steps: the source must happen before
// the destination through program order, messages or collectives.

// Kept: the input gradient sends stage 2's gradient on to stage 1.
// CHECK-LABEL: flexpipe.schedule @split_igrad
flexpipe.pipeline @split_igrad actors(3) microbatches(4) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  flexpipe.dependency igrad @gpt[2] -> igrad @gpt[1]
  flexpipe.optimize gradient_separation
}

// -----

// Kept by program order: two modules on one actor, the second's forwards
// after the first's backwards.
// CHECK-LABEL: flexpipe.schedule @one_actor
// CHECK:      flexpipe.bwd stage 0 mb 1
// CHECK-NEXT: flexpipe.fwd stage 1 mb 0
flexpipe.pipeline @one_actor actors(1) microbatches(2) {
  flexpipe.module @a layers(1) placement(one_to_one)
  flexpipe.module @b layers(1) placement(one_to_one)
  flexpipe.dependency bwd @a[0] -> fwd @b[0]
}

// -----

// Kept through data: stage 0's forward reaches stage 2 through stage 1.
// CHECK-LABEL: flexpipe.schedule @through
flexpipe.pipeline @through actors(3) microbatches(3) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.dependency fwd @gpt[0] -> fwd @gpt[2]
}
