// RUN: flexpipe-opt %s -split-input-file -flexpipe-spec-to-schedule -flexpipe-convert-to-emitc="model=%S/../../configs/models/clip-tiny.yaml" -verify-diagnostics

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

// -----

// next(3): the all-gather of micro-batch 0 releases the backwards of 0 to 2,
// and the text tower's backward of micro-batch 1 runs before its own
// all-gather. The note at the instruction says why (the error alone named
// neither the all-gather nor next(N)).
flexpipe.pipeline @released actors(3) microbatches(5) {
  flexpipe.module @image layers(4) placement(one_to_one) actors [0, 1]
  // expected-error @+1 {{'flexpipe.bwd' op runs before the all-gather of sync stage 3 mb 1 has run on actor 2}}
  flexpipe.module @text layers(2) placement(one_to_one) actors [2]
  flexpipe.stage @sync actors [1, 2]
  // expected-note @+1 {{the all-gather of micro-batch 1 comes after that backward on actor 2: the backward needs it first (a dependency from the sync instruction to the tower's last backward, with next(1): one all-gather releasing the backwards of several micro-batches, next(N) above 1, is not supported yet)}}
  flexpipe.instruction @sync_states kind(all_gather) on(@sync) next(3)
  flexpipe.dependency fwd @image[-1] -> @sync_states @sync
  flexpipe.dependency fwd @text[-1] -> @sync_states @sync
  flexpipe.dependency @sync_states @sync -> bwd @image[-1]
  flexpipe.dependency @sync_states @sync -> bwd @text[-1]
  flexpipe.priority @image cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight @image per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  flexpipe.priority @text cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight @text per_actor affine_map<(a)[pp, s, m] -> (pp - a + 1)>
}
