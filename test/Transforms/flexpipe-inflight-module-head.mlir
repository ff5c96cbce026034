// RUN: flexpipe-opt %s -flexpipe-spec-to-schedule | FileCheck %s

// A module's global in-flight limit counts the micro-batches that enter the
// module, at its first stages, even where those take other modules' outputs
// (a head after two towers). The head's inputs made its first stage a
// non-source, the limit had no source, and the head ran four forwards in a
// row. With the limit of 1 it alternates, as `@head per_stage [1]` does.

// CHECK-LABEL: flexpipe.actor 2 {
// CHECK: flexpipe.fwd stage 2 mb 0
// CHECK-NOT: flexpipe.fwd
// CHECK: flexpipe.bwd stage 2 mb 0
// CHECK-NOT: flexpipe.bwd
// CHECK: flexpipe.fwd stage 2 mb 1
// CHECK-NOT: flexpipe.fwd
// CHECK: flexpipe.bwd stage 2 mb 1
// CHECK-NOT: flexpipe.bwd
// CHECK: flexpipe.fwd stage 2 mb 2
flexpipe.pipeline @head_limit actors(3) microbatches(4) {
  flexpipe.module @a layers(2) placement(one_to_one) actors [0]
  flexpipe.module @b layers(2) placement(one_to_one) actors [1]
  flexpipe.module @head layers(2) placement(one_to_one) actors [2] inputs [@a, @b]
  flexpipe.priority cttp<fwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight @head global 1
}
