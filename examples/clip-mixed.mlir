// Two towers on disjoint actors with mixed schedules (interleaved 1F1B for the
// image tower, 1F1B for the text tower), joined by an all-gather of their
// output states after each last-stage forward.
flexpipe.pipeline @clip_mixed actors(6) microbatches(8) {
  flexpipe.module @image layers(16) placement(circular) chunks(2) actors [0, 1, 2, 3]
  flexpipe.module @text layers(4) placement(one_to_one) actors [4, 5]
  flexpipe.stage @sync actors [3, 5]
  flexpipe.instruction @sync_states kind(all_gather) on(@sync)
  flexpipe.dependency fwd @image[-1] -> @sync_states @sync
  flexpipe.dependency fwd @text[-1] -> @sync_states @sync
  flexpipe.dependency @sync_states @sync -> bwd @image[-1]
  flexpipe.dependency @sync_states @sync -> bwd @text[-1]
  flexpipe.priority @image cttp<bwd_first> fstp<breadth_first, pp> bstp<depth_first, pp>
  flexpipe.priority @text cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
}
