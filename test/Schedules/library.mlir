// Every spec in schedules/ and examples/ parses, verifies and prints in
// canonical form. The count lines fail when a file is added without a
// check here.

// RUN: ls %schedules | count 8
// RUN: ls %examples/*.mlir | count 1
// RUN: flexpipe-opt %schedules/1f1b.mlir | FileCheck %s --check-prefix=ONE_F_ONE_B
// RUN: flexpipe-opt %schedules/bidirectional.mlir | FileCheck %s --check-prefix=BIDIRECTIONAL
// RUN: flexpipe-opt %schedules/gpipe.mlir | FileCheck %s --check-prefix=GPIPE
// RUN: flexpipe-opt %schedules/interleaved-1f1b.mlir | FileCheck %s --check-prefix=INTERLEAVED_1F1B
// RUN: flexpipe-opt %schedules/looped-bfs.mlir | FileCheck %s --check-prefix=LOOPED_BFS
// RUN: flexpipe-opt %schedules/vshape.mlir | FileCheck %s --check-prefix=VSHAPE
// RUN: flexpipe-opt %schedules/zb-h1.mlir | FileCheck %s --check-prefix=ZB_H1
// RUN: flexpipe-opt %schedules/zb-v.mlir | FileCheck %s --check-prefix=ZB_V
// RUN: flexpipe-opt %examples/clip-mixed.mlir | FileCheck %s --check-prefix=CLIP

// ONE_F_ONE_B-LABEL: flexpipe.pipeline @one_f_one_b actors(4) microbatches(8) {
// ONE_F_ONE_B-NEXT: flexpipe.module @gpt layers(8) placement(one_to_one)
// ONE_F_ONE_B-NEXT: flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
// ONE_F_ONE_B-NEXT: flexpipe.inflight per_actor affine_map<(d0)[s0, s1, s2] -> (-d0 + s0)>

// BIDIRECTIONAL-LABEL: flexpipe.pipeline @bidirectional actors(4) microbatches(8) {
// BIDIRECTIONAL-NEXT: flexpipe.module @gpt layers(8) placement(one_to_one) bidirectional
// BIDIRECTIONAL-NEXT: flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
// BIDIRECTIONAL-NEXT: flexpipe.inflight per_stage affine_map<(d0)[s0, s1, s2] -> (-(d0 mod s0) + s0)>

// GPIPE-LABEL: flexpipe.pipeline @gpipe actors(4) microbatches(8) {
// GPIPE-NEXT: flexpipe.module @gpt layers(8) placement(one_to_one)
// GPIPE-NEXT: flexpipe.priority cttp<fwd_first> fstp<breadth_first> bstp<breadth_first>

// INTERLEAVED_1F1B-LABEL: flexpipe.pipeline @interleaved_1f1b actors(4) microbatches(8) {
// INTERLEAVED_1F1B-NEXT: flexpipe.module @gpt layers(16) placement(circular) chunks(2)
// INTERLEAVED_1F1B-NEXT: flexpipe.priority cttp<interleaved> fstp<breadth_first, round> bstp<depth_first, round>
// INTERLEAVED_1F1B-NEXT: flexpipe.inflight per_actor affine_map<(d0)[s0, s1, s2, s3] -> (d0 * -2 + (s1 floordiv s0 - 1) * s3 + s0 * 2 - 1)>

// LOOPED_BFS-LABEL: flexpipe.pipeline @looped_bfs actors(4) microbatches(8) {
// LOOPED_BFS-NEXT: flexpipe.module @gpt layers(16) placement(circular) chunks(2)
// LOOPED_BFS-NEXT: flexpipe.priority cttp<fwd_first> fstp<breadth_first> bstp<depth_first>

// VSHAPE-LABEL: flexpipe.pipeline @vshape actors(4) microbatches(8) {
// VSHAPE-NEXT: flexpipe.module @gpt layers(16) placement(vshape) chunks(2)
// VSHAPE-NEXT: flexpipe.priority cttp<bwd_first> fstp<depth_first> bstp<depth_first>
// VSHAPE-NEXT: flexpipe.inflight per_actor affine_map<(d0)[s0, s1, s2] -> (s1)>

// CLIP-LABEL: flexpipe.pipeline @clip_mixed actors(6) microbatches(8) {
// CLIP-NEXT: flexpipe.module @image layers(16) placement(circular) chunks(2) actors [0, 1, 2, 3]
// CLIP-NEXT: flexpipe.module @text layers(4) placement(one_to_one) actors [4, 5]
// CLIP-NEXT: flexpipe.stage @sync actors [3, 5]
// CLIP-NEXT: flexpipe.instruction @sync_states kind(all_gather) on(@sync)
// CLIP-NEXT: flexpipe.dependency fwd @image[-1] -> @sync_states @sync
// CLIP-NEXT: flexpipe.dependency fwd @text[-1] -> @sync_states @sync
// CLIP-NEXT: flexpipe.dependency @sync_states @sync -> bwd @image[-1]
// CLIP-NEXT: flexpipe.dependency @sync_states @sync -> bwd @text[-1]
// CLIP-NEXT: flexpipe.priority @image cttp<bwd_first> fstp<breadth_first, pp> bstp<depth_first, pp>
// CLIP-NEXT: flexpipe.priority @text cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>

// ZB_H1-LABEL: flexpipe.pipeline @zb_h1 actors(4) microbatches(8) {
// ZB_H1: flexpipe.optimize gradient_separation

// ZB_V-LABEL: flexpipe.pipeline @zb_v actors(4) microbatches(8) {
// ZB_V-NEXT: flexpipe.module @gpt layers(16) placement(vshape) chunks(2)
// ZB_V-NEXT: flexpipe.priority cttp<fwd_first> fstp<depth_first> bstp<breadth_first>
// ZB_V-NEXT: flexpipe.inflight per_actor affine_map<(d0)[s0, s1, s2] -> (s1)>
// ZB_V-NEXT: flexpipe.optimize gradient_separation
