// RUN: flexpipe-opt %s -flexpipe-partition | FileCheck %s

// CHECK-LABEL: flexpipe.pipeline @even
// CHECK: flexpipe.module @gpt layers(10) placement(one_to_one) partition [3, 3, 2, 2]
flexpipe.pipeline @even actors(4) microbatches(8) {
  flexpipe.module @gpt layers(10) placement(one_to_one)
}

// Stages per direction of a bidirectional V: 2 chunks x 2 actors.
// CHECK-LABEL: flexpipe.pipeline @chunks
// CHECK: flexpipe.module @gpt layers(9) placement(vshape) bidirectional partition [3, 2, 2, 2]
flexpipe.pipeline @chunks actors(2) microbatches(8) {
  flexpipe.module @gpt layers(9) placement(vshape) bidirectional
}

// An explicit partition is kept.
// CHECK-LABEL: flexpipe.pipeline @given
// CHECK: flexpipe.module @gpt layers(8) placement(one_to_one) partition [1, 7]
flexpipe.pipeline @given actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one) partition [1, 7]
}

