// RUN: flexpipe-opt --flexpipe-spec-to-schedule --flexpipe-verify-schedule %s -split-input-file -verify-diagnostics | FileCheck %s

// The MLLM placement: the embedding (stage 2) and the LM head (stage 3) are
// shared by both actors, each holding half the vocabulary. The last stage's
// output goes to both head slices, every head forward is followed by an
// all_gather of the loss statistics that both actors join together, and the
// head's and embedding's gradients are summed on the stages next to them.
// CHECK-LABEL: flexpipe.schedule @vp actors(2) stages(4) microbatches(2) edges [0 -> 1, 2 -> 0, 1 -> 3] shared [2, 3] stage_info [#flexpipe.stage_info<"gpt", 2>, #flexpipe.stage_info<"gpt", 2>, #flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 0, last>] {
// CHECK-NEXT: flexpipe.actor 0 {
// CHECK-NEXT: flexpipe.fwd stage 2 mb 0
// CHECK-NEXT: flexpipe.fwd stage 2 mb 1
// CHECK-NEXT: flexpipe.recv_act stage 0 mb 0 from 1
// CHECK-NEXT: flexpipe.fwd stage 0 mb 0
// CHECK-NEXT: flexpipe.send_act stage 0 mb 0 to 1
// CHECK-NEXT: flexpipe.recv_act stage 0 mb 1 from 1
// CHECK-NEXT: flexpipe.fwd stage 0 mb 1
// CHECK-NEXT: flexpipe.send_act stage 0 mb 1 to 1
// CHECK-NEXT: flexpipe.recv_act stage 3 mb 0 from 1
// CHECK-NEXT: flexpipe.fwd stage 3 mb 0
// CHECK-NEXT: flexpipe.all_gather stage 3 mb 0 group [0, 1]
// CHECK-NEXT: flexpipe.bwd stage 3 mb 0
// CHECK-NEXT: flexpipe.send_grad stage 3 mb 0 to 1
// CHECK-NEXT: flexpipe.recv_grad stage 0 mb 0 from 1
// CHECK-NEXT: flexpipe.bwd stage 0 mb 0
// CHECK-NEXT: flexpipe.send_grad stage 0 mb 0 to 1
// CHECK-NEXT: flexpipe.bwd stage 2 mb 0
// CHECK-NEXT: flexpipe.recv_act stage 3 mb 1 from 1
// CHECK-NEXT: flexpipe.fwd stage 3 mb 1
// CHECK-NEXT: flexpipe.all_gather stage 3 mb 1 group [0, 1]
// CHECK-NEXT: flexpipe.bwd stage 3 mb 1
// CHECK-NEXT: flexpipe.send_grad stage 3 mb 1 to 1
// CHECK-NEXT: flexpipe.recv_grad stage 0 mb 1 from 1
// CHECK-NEXT: flexpipe.bwd stage 0 mb 1
// CHECK-NEXT: flexpipe.send_grad stage 0 mb 1 to 1
// CHECK-NEXT: flexpipe.bwd stage 2 mb 1
// CHECK-NEXT: }
// CHECK-NEXT: flexpipe.actor 1 {
// CHECK-NEXT: flexpipe.fwd stage 2 mb 0
// CHECK-NEXT: flexpipe.send_act stage 2 mb 0 to 0
// CHECK-NEXT: flexpipe.fwd stage 2 mb 1
// CHECK-NEXT: flexpipe.send_act stage 2 mb 1 to 0
// CHECK-NEXT: flexpipe.recv_act stage 1 mb 0 from 0
// CHECK-NEXT: flexpipe.fwd stage 1 mb 0
// CHECK-NEXT: flexpipe.send_act stage 1 mb 0 to 0
// CHECK-NEXT: flexpipe.fwd stage 3 mb 0
// CHECK-NEXT: flexpipe.all_gather stage 3 mb 0 group [0, 1]
// CHECK-NEXT: flexpipe.bwd stage 3 mb 0
// CHECK-NEXT: flexpipe.recv_grad stage 1 mb 0 from 0
// CHECK-NEXT: flexpipe.bwd stage 1 mb 0
// CHECK-NEXT: flexpipe.send_grad stage 1 mb 0 to 0
// CHECK-NEXT: flexpipe.recv_act stage 1 mb 1 from 0
// CHECK-NEXT: flexpipe.fwd stage 1 mb 1
// CHECK-NEXT: flexpipe.send_act stage 1 mb 1 to 0
// CHECK-NEXT: flexpipe.recv_grad stage 2 mb 0 from 0
// CHECK-NEXT: flexpipe.bwd stage 2 mb 0
// CHECK-NEXT: flexpipe.fwd stage 3 mb 1
// CHECK-NEXT: flexpipe.all_gather stage 3 mb 1 group [0, 1]
// CHECK-NEXT: flexpipe.bwd stage 3 mb 1
// CHECK-NEXT: flexpipe.recv_grad stage 1 mb 1 from 0
// CHECK-NEXT: flexpipe.bwd stage 1 mb 1
// CHECK-NEXT: flexpipe.send_grad stage 1 mb 1 to 0
// CHECK-NEXT: flexpipe.recv_grad stage 2 mb 1 from 0
// CHECK-NEXT: flexpipe.bwd stage 2 mb 1
// CHECK-NEXT: }
flexpipe.pipeline @vp actors(2) microbatches(2) {
  flexpipe.module @gpt layers(4) placement(one_to_one) vocab_parallel
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<depth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
}

// -----

// Bidirectional: one embedding and one head per direction, each with its
// own collectives; in-flight rules count only the transformer stages.
// CHECK-LABEL: flexpipe.schedule @vp_bidirectional actors(2) stages(8)
// CHECK-SAME:    shared [4, 5, 6, 7]
// CHECK-SAME:    #flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 0, last>, #flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 0, last>]
// CHECK-DAG:     flexpipe.all_gather stage 5 mb 0 group [0, 1]
// CHECK-DAG:     flexpipe.all_gather stage 7 mb 1 group [0, 1]
flexpipe.pipeline @vp_bidirectional actors(2) microbatches(2) {
  flexpipe.module @gpt layers(4) placement(one_to_one) bidirectional vocab_parallel
  flexpipe.priority cttp<bwd_first>
  flexpipe.inflight per_stage affine_map<(i)[pp, s, m] -> (pp - i mod pp)>
}

// -----

flexpipe.pipeline @connected actors(2) microbatches(2) {
  flexpipe.module @image layers(2) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.module' op connects to module @image, but a vocab_parallel module (token embedding in, loss out) cannot be connected to other modules}}
  flexpipe.module @text layers(2) placement(one_to_one) inputs [@image] vocab_parallel
}
