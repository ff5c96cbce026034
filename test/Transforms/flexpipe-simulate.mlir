// RUN: flexpipe-opt %s -split-input-file -flexpipe-simulate | FileCheck %s
// RUN: flexpipe-opt %s -split-input-file -flexpipe-simulate="model=%S/../../configs/models/tiny.yaml cluster=%S/../../configs/clusters/cpu.yaml" | FileCheck %s --check-prefix=MODEL

// GPipe, 2 actors, 2 micro-batches, unit costs: 6 steps, bubble 1/3.
// CHECK-LABEL: flexpipe.schedule @gpipe
// CHECK-SAME: flexpipe.simulation = {bubble = array<f64: 0.33333333333333331, 0.33333333333333331>, bubble_ratio = 0.33333333333333337 : f64, busy = array<f64: 4.000000e+00, 4.000000e+00>, critical_path = 6 : i64, iteration_time = 6.000000e+00 : f64, over_memory = array<i64>, peak_activation = array<f64: 2.000000e+00, 2.000000e+00>, total_bytes = array<f64: 2.000000e+00, 2.000000e+00>, unit = "steps"}
// MODEL-LABEL: flexpipe.schedule @gpipe
// MODEL-SAME: unit = "s"
flexpipe.schedule @gpipe actors(2) stages(2) microbatches(2) stage_info [#flexpipe.stage_info<"gpt", 4, first>, #flexpipe.stage_info<"gpt", 4, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    flexpipe.send_act stage 0 mb 1 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_grad stage 0 mb 1 from 1
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.recv_act stage 1 mb 1 from 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.bwd stage 1 mb 1
    flexpipe.send_grad stage 1 mb 1 to 0
  }
}

// -----

// A collective: both actors leave when the later one arrives (actor 1 after
// two computations), so actor 0 waits one step in it and finishes at 3;
// actor 1 finishes at 2 and idles the last step.
// CHECK-LABEL: flexpipe.schedule @sync
// CHECK-SAME: bubble = array<f64: 0.33333333333333331, 0.33333333333333331>
// CHECK-SAME: iteration_time = 3.000000e+00 : f64
// (Two directions of one module, each micro-batch taking one; each stage
// holds the model file's 8 layers, as the MODEL run needs.)
flexpipe.schedule @sync actors(2) stages(2) microbatches(2) edges [] stage_info [#flexpipe.stage_info<"gpt", 8, first, last>, #flexpipe.stage_info<"gpt", 8, first, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.all_gather stage 0 mb 0 group [0, 1]
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 1
    flexpipe.all_gather stage 0 mb 0 group [0, 1]
  }
}
