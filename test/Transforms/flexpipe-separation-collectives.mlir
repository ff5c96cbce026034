// Gradient separation with blocking collectives: two towers on disjoint
// actors joined by an all-gather, or a gather, of their output states after
// each last-stage forward (examples/clip-mixed.mlir). Each member waits for
// the last in the re-timing as in the simulator; separation shortens the
// iteration (30.6 against 34.2 units) and the result verifies.
// RUN: flexpipe-opt %s --flexpipe-spec-to-schedule=time-model=cost -flexpipe-verify-schedule | FileCheck %s
// RUN: sed 's/kind(all_gather)/kind(gather)/' %s | flexpipe-opt --flexpipe-spec-to-schedule=time-model=cost -flexpipe-verify-schedule | FileCheck %s

// CHECK: flexpipe.separation = {{{.*}}strategy = "stash-all", time = 30.6{{[0-9]*}} : f64, time_before = 34.2{{[0-9]*}} : f64

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
  flexpipe.optimize gradient_separation
}
