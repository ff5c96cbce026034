// RUN: flexpipe-opt %s -flexpipe-spec-to-schedule -flexpipe-convert-to-emitc="model=%S/../../configs/models/clip-tiny.yaml" -verify-diagnostics

// The schedule written from a spec puts each instruction where the
// statement it comes from is: a module's computations and messages at the
// module, a registered instruction's collectives at the flexpipe.instruction.
// What a later pass finds wrong with them is said there (both were at the
// pipeline's line).
flexpipe.pipeline @grouped actors(2) microbatches(2) {
  // expected-error @+1 {{'flexpipe.bwd' op has no all-gather of sync stage 2 mb 1 on actor 0 before it}}
  flexpipe.module @image layers(4) placement(one_to_one) actors [0]
  flexpipe.module @text layers(2) placement(one_to_one) actors [1]
  flexpipe.stage @sync actors [0, 1]
  // expected-note @+1 {{the sync stage's all-gathers (actor 0 runs one for micro-batch 0, none for 1)}}
  flexpipe.instruction @sync_states kind(all_gather) on(@sync) prev(2) next(2)
  flexpipe.dependency fwd @image[-1] -> @sync_states @sync
  flexpipe.dependency fwd @text[-1] -> @sync_states @sync
  flexpipe.dependency @sync_states @sync -> bwd @image[-1]
  flexpipe.dependency @sync_states @sync -> bwd @text[-1]
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
}
