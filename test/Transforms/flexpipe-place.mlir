// RUN: flexpipe-opt %s -flexpipe-place | FileCheck %s

// CHECK-LABEL: flexpipe.pipeline @one_to_one
// CHECK: flexpipe.module @gpt layers(8) placement(explicit) map [0, 1, 2, 3]
flexpipe.pipeline @one_to_one actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
}

// CHECK-LABEL: flexpipe.pipeline @circular
// CHECK: flexpipe.module @gpt layers(12) placement(explicit) map [0, 1, 2, 0, 1, 2, 0, 1, 2]
flexpipe.pipeline @circular actors(3) microbatches(8) {
  flexpipe.module @gpt layers(12) placement(circular) chunks(3)
}

// CHECK-LABEL: flexpipe.pipeline @vshape
// CHECK: flexpipe.module @gpt layers(16) placement(explicit) map [0, 1, 2, 3, 3, 2, 1, 0]
flexpipe.pipeline @vshape actors(4) microbatches(8) {
  flexpipe.module @gpt layers(16) placement(vshape)
}

// Only the first direction is written; the mirror follows from the group.
// CHECK-LABEL: flexpipe.pipeline @group
// CHECK: flexpipe.module @a layers(4) placement(explicit) bidirectional map [2, 3] actors [2, 3]
// CHECK: flexpipe.module @b layers(4) placement(explicit) map [0, 1]
flexpipe.pipeline @group actors(4) microbatches(8) {
  flexpipe.module @a layers(4) placement(one_to_one) bidirectional actors [2, 3]
  flexpipe.module @b layers(4) placement(explicit) map [0, 1] actors [0, 1]
}
