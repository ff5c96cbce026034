// RUN: flexpipe-opt %s -split-input-file -flexpipe-schedule | FileCheck %s
// RUN: flexpipe-opt %s -split-input-file -flexpipe-schedule=time-model=cost | FileCheck %s --check-prefix=COST

// GPipe on 2 actors: forwards first.
// CHECK-LABEL: flexpipe.schedule @gpipe actors(2) stages(2) microbatches(2)
// CHECK-SAME:    stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
// CHECK-NEXT:    flexpipe.actor 0 {
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 0
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 1
// CHECK-NEXT:      flexpipe.bwd stage 0 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 0 mb 1
// CHECK-NEXT:    }
// CHECK-NEXT:    flexpipe.actor 1 {
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 1
// CHECK-NEXT:      flexpipe.bwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 1 mb 1
// CHECK-NEXT:    }
// CHECK-NEXT:  }
flexpipe.pipeline @gpipe actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.priority cttp<fwd_first>
}

// -----

// Two towers feeding a joint head: a branching stage DAG. The head waits for
// both towers; its backward feeds both.
// CHECK-LABEL: flexpipe.schedule @towers actors(3) stages(3) microbatches(1) edges [0 -> 2, 1 -> 2]
// CHECK-SAME:    stage_info [#flexpipe.stage_info<"image", 1, first, last>, #flexpipe.stage_info<"text", 1, first, last>, #flexpipe.stage_info<"head", 1, first, last>] {
// CHECK-NEXT:    flexpipe.actor 0 {
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 0 mb 0
// CHECK-NEXT:    }
// CHECK-NEXT:    flexpipe.actor 1 {
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 1 mb 0
// CHECK-NEXT:    }
// CHECK-NEXT:    flexpipe.actor 2 {
// CHECK-NEXT:      flexpipe.fwd stage 2 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 2 mb 0
// CHECK-NEXT:    }
flexpipe.pipeline @towers actors(3) microbatches(1) {
  flexpipe.module @image layers(1) placement(one_to_one) actors [0]
  flexpipe.module @text layers(1) placement(one_to_one) actors [1]
  flexpipe.module @head layers(1) placement(one_to_one) actors [2] inputs [@image, @text]
}

// -----

// Per-actor priorities: at step 2 actor 1 could run its backward of
// micro-batch 0 or its forward of micro-batch 1. The pipeline says
// bwd_first; actor 1's override says fwd_first, so it takes every forward
// before its first backward.
// CHECK-LABEL: flexpipe.schedule @override
// CHECK:         flexpipe.actor 1 {
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 1
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 2
// CHECK-NEXT:      flexpipe.bwd stage 1 mb 0
flexpipe.pipeline @override actors(2) microbatches(3) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.priority cttp<bwd_first>
  flexpipe.priority actors [1] cttp<fwd_first>
}

// The same override counted from the last actor.
// CHECK-LABEL: flexpipe.schedule @override_last
// CHECK:         flexpipe.actor 1 {
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 1
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 2
// CHECK-NEXT:      flexpipe.bwd stage 1 mb 0
flexpipe.pipeline @override_last actors(2) microbatches(3) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.priority cttp<bwd_first>
  flexpipe.priority actors [-1] cttp<fwd_first>
}

// The same without the override: backward first.
// CHECK-LABEL: flexpipe.schedule @no_override
// CHECK:         flexpipe.actor 1 {
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 1
flexpipe.pipeline @no_override actors(2) microbatches(3) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.priority cttp<bwd_first>
}

// -----

// Shared stage: stage 0 runs on both actors (each its part).
// CHECK-LABEL: flexpipe.schedule @shared actors(2) stages(2) microbatches(1) shared [0]
// CHECK-SAME:    {
// CHECK-NEXT:    flexpipe.actor 0 {
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 0 mb 0
// CHECK-NEXT:    }
// CHECK-NEXT:    flexpipe.actor 1 {
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 0
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 0 mb 0
// CHECK-NEXT:    }
flexpipe.pipeline @shared actors(2) microbatches(1) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.share @gpt stage 0 actors [0, 1]
}

// -----

// Unequal stages: stage 0 has three layers, stage 1 one. Under the cost
// model actor 0's forwards take 3 units and its backwards 6. Choosing
// greedily, actor 0 would take the backward of micro-batch 0 (ready at 6)
// before its third forward and finish at 30; the step model's order (all
// three forwards first) finishes at 27 under the same durations, so the cost
// model keeps it.
// COST-LABEL: flexpipe.schedule @uneven
// COST:         flexpipe.actor 0 {
// COST-NEXT:      flexpipe.fwd stage 0 mb 0
// COST-NEXT:      flexpipe.fwd stage 0 mb 1
// COST-NEXT:      flexpipe.fwd stage 0 mb 2
// COST-NEXT:      flexpipe.bwd stage 0 mb 0
// COST-NEXT:      flexpipe.bwd stage 0 mb 1
// CHECK-LABEL: flexpipe.schedule @uneven
// CHECK:         flexpipe.actor 0 {
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 0
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 1
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 2
// CHECK-NEXT:      flexpipe.bwd stage 0 mb 0
flexpipe.pipeline @uneven actors(2) microbatches(3) {
  flexpipe.module @gpt layers(4) placement(one_to_one) partition [3, 1]
  flexpipe.priority cttp<bwd_first>
}
