// RUN: sed "s/micro_batch_size: 4/micro_batch_size: 1/" %S/../../configs/models/clip-tiny.yaml > %t.yaml
// RUN: flexpipe-compile %s --model %t.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=cpp -o %t.one 2>&1 | FileCheck %s
// RUN: flexpipe-compile %s --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=cpp -o %t.four 2>&1 | count 0

// Two towers trained on micro-batches of one sample learn nothing (the
// contrastive loss of one pair is 0: the ranks trained with loss 0.000000
// and no gradient, without a word); the lowering warns.
// CHECK: warning: trains two towers on micro-batches of one sample (micro_batch_size 1 in the model file)

flexpipe.pipeline @clip_mixed actors(4) microbatches(8) {
  flexpipe.module @image layers(4) placement(circular) chunks(2) actors [0, 1]
  flexpipe.module @text layers(2) placement(one_to_one) actors [2, 3]
  flexpipe.stage @sync actors [1, 3]
  flexpipe.instruction @sync_states kind(all_gather) on(@sync) async
  flexpipe.dependency fwd @image[-1] -> @sync_states @sync
  flexpipe.dependency fwd @text[-1] -> @sync_states @sync
  flexpipe.dependency @sync_states @sync -> bwd @image[-1]
  flexpipe.dependency @sync_states @sync -> bwd @text[-1]
  flexpipe.priority @image cttp<interleaved> fstp<breadth_first, 2> bstp<depth_first, 2>
  flexpipe.inflight @image per_actor affine_map<(a)[pp, s, m] -> (s + pp - a * 2 - 1)>
  flexpipe.priority @text cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight @text per_actor affine_map<(a)[pp, s, m] -> (pp - a + 2)>
}
