// -flexpipe-gradient-separation replays its input as it would be lowered
// (communication inserted) before it optimizes: a wgrad before its igrad
// was reordered unseen and the pass exited 0.
// RUN: not flexpipe-opt %s -flexpipe-gradient-separation 2>&1 | FileCheck %s
// CHECK: error: -flexpipe-gradient-separation needs a schedule that runs: wgrad stage 0 mb 0 on actor 0 runs before the igrad of stage 0 mb 0; every dependency must be satisfied in program order

module {
  flexpipe.schedule @s actors(1) stages(1) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first, last>] {
    flexpipe.actor 0 {
      flexpipe.fwd stage 0 mb 0
      flexpipe.wgrad stage 0 mb 0
      flexpipe.igrad stage 0 mb 0
    }
  }
}
