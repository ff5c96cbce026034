// RUN: flexpipe-opt %s -split-input-file -flexpipe-spec-to-schedule | FileCheck %s

// Registered stages, instructions and dependencies (the paper's
// register_new_stage, register_new_inst, set_cssr_deps): two towers on
// disjoint actors joined by an all-gather of their output states after each
// last-stage forward. The blocking all-gather sits between the forward and
// the backward of each micro-batch on both towers' last actors; stages are
// numbered image 0-3, text 4-5, then the registered stage 6.

// CHECK-LABEL: flexpipe.schedule @blocking actors(4) stages(7) microbatches(2)
// CHECK-SAME: edges [0 -> 1, 1 -> 2, 2 -> 3, 4 -> 5]
// CHECK-SAME: #flexpipe.stage_info<"sync", 0>]
// CHECK: flexpipe.actor 1 {
// CHECK: flexpipe.fwd stage 3 mb 0
// CHECK-NEXT: flexpipe.all_gather stage 6 mb 0 group [1, 3]
// CHECK-NEXT: flexpipe.bwd stage 3 mb 0
// CHECK: flexpipe.actor 3 {
// CHECK: flexpipe.fwd stage 5 mb 0
// CHECK-NOT: flexpipe.bwd
// CHECK: flexpipe.all_gather stage 6 mb 0 group [1, 3]
// CHECK-NEXT: flexpipe.bwd stage 5 mb 0
flexpipe.pipeline @blocking actors(4) microbatches(2) {
  flexpipe.module @image layers(4) placement(circular) chunks(2) actors [0, 1]
  flexpipe.module @text layers(2) placement(one_to_one) actors [2, 3]
  flexpipe.stage @sync actors [1, 3]
  flexpipe.instruction @sync_states kind(all_gather) on(@sync)
  flexpipe.dependency fwd @image[-1] -> @sync_states @sync
  flexpipe.dependency fwd @text[-1] -> @sync_states @sync
  flexpipe.dependency @sync_states @sync -> bwd @image[-1]
  flexpipe.dependency @sync_states @sync -> bwd @text[-1]
  flexpipe.priority @image cttp<interleaved> fstp<breadth_first, 2> bstp<depth_first, 2>
  flexpipe.priority @text cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
}

// -----

// The asynchronous version: each member posts the all-gather and goes on;
// the wait comes right before the backward that needs it.
// CHECK-LABEL: flexpipe.schedule @async
// CHECK: flexpipe.actor 3 {
// CHECK: flexpipe.fwd stage 5 mb 0
// CHECK: %[[T0:.*]] = flexpipe.all_gather stage 6 mb 0 group [1, 3] : !flexpipe.token
// CHECK: flexpipe.wait %[[T0]]
// CHECK-NEXT: flexpipe.bwd stage 5 mb 0
flexpipe.pipeline @async actors(4) microbatches(2) {
  flexpipe.module @image layers(4) placement(circular) chunks(2) actors [0, 1]
  flexpipe.module @text layers(2) placement(one_to_one) actors [2, 3]
  flexpipe.stage @sync actors [1, 3]
  flexpipe.instruction @sync_states kind(all_gather) on(@sync) async
  flexpipe.dependency fwd @image[-1] -> @sync_states @sync
  flexpipe.dependency fwd @text[-1] -> @sync_states @sync
  flexpipe.dependency @sync_states @sync -> bwd @image[-1]
  flexpipe.dependency @sync_states @sync -> bwd @text[-1]
}

// -----

// DistMM-Pipe's grouping: prev(2) next(2) makes one instance per two
// micro-batches (named by its first); both forwards come before it and both
// backwards after it. A gather goes to the stage's lowest-numbered actor,
// whatever order the stage lists them in.
// CHECK-LABEL: flexpipe.schedule @grouped
// CHECK: flexpipe.actor 1 {
// CHECK: flexpipe.fwd stage 1 mb 0
// CHECK: flexpipe.fwd stage 1 mb 1
// CHECK: flexpipe.gather stage 4 mb 0 group [1, 3] root 1
// CHECK: flexpipe.bwd stage 1 mb 0
// CHECK: flexpipe.bwd stage 1 mb 1
// CHECK: flexpipe.gather stage 4 mb 2 group [1, 3] root 1
// CHECK-NOT: flexpipe.gather
// CHECK: flexpipe.actor 2 {
flexpipe.pipeline @grouped actors(4) microbatches(4) {
  flexpipe.module @image layers(2) placement(one_to_one) actors [0, 1]
  flexpipe.module @text layers(2) placement(one_to_one) actors [2, 3]
  flexpipe.stage @sync actors [3, 1]
  flexpipe.instruction @sync_states kind(gather) on(@sync) prev(2) next(2)
  flexpipe.dependency fwd @image[-1] -> @sync_states @sync
  flexpipe.dependency fwd @text[-1] -> @sync_states @sync
  flexpipe.dependency @sync_states @sync -> bwd @image[-1]
  flexpipe.dependency @sync_states @sync -> bwd @text[-1]
  flexpipe.inflight @image per_actor [3, 2]
  flexpipe.inflight @text per_actor [3, 2]
}

// -----

// A registered computation on a module stage: each of its actors runs it
// after the stage's forward; the backward waits for it.
// CHECK-LABEL: flexpipe.schedule @compute
// CHECK: flexpipe.actor 1 {
// CHECK: flexpipe.fwd stage 1 mb 0
// CHECK-NEXT: flexpipe.exec @normalize stage 1 mb 0
// CHECK: flexpipe.bwd stage 1 mb 0
flexpipe.pipeline @compute actors(2) microbatches(2) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.instruction @normalize kind(compute) on(@gpt[-1])
  flexpipe.dependency fwd @gpt[-1] -> @normalize @gpt[-1]
  flexpipe.dependency @normalize @gpt[-1] -> bwd @gpt[-1]
}

// -----

// The instruction's runtime attributes travel to every exec.
// CHECK-LABEL: flexpipe.schedule @attrs
// CHECK: flexpipe.exec @log_norms stage 1 mb 0 attrs {file = "norms.txt"}
flexpipe.pipeline @attrs actors(2) microbatches(1) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.instruction @log_norms kind(compute) on(@gpt[-1]) attrs {file = "norms.txt"}
  flexpipe.dependency fwd @gpt[-1] -> @log_norms @gpt[-1]
}

// -----

// A registered stage holds no layers and no forwards: it is not one of the
// stages an in-flight limit or the symbol `s` counts (a per-stage map over
// this pipeline gave three limits for two stages and the spec was refused).
// Limits [2, 1]: actor 0 runs two forwards before its first backward.

// CHECK-LABEL: flexpipe.schedule @perstage_registered actors(2) stages(3)
// CHECK: flexpipe.actor 0 {
// CHECK-NEXT: flexpipe.fwd stage 0 mb 0
// CHECK-NOT: flexpipe.fwd
// CHECK: flexpipe.fwd stage 0 mb 1
// CHECK-NOT: flexpipe.fwd
// CHECK: flexpipe.bwd stage 0 mb 0
// CHECK-NOT: flexpipe.bwd
// CHECK: flexpipe.fwd stage 0 mb 2
flexpipe.pipeline @perstage_registered actors(2) microbatches(4) {
  flexpipe.module @a layers(2) placement(one_to_one)
  flexpipe.inflight per_stage affine_map<(i)[pp, s, m] -> (s - i)>
  flexpipe.stage @sync actors [0, 1]
  flexpipe.instruction @ag kind(all_gather) on(@sync)
  flexpipe.dependency fwd @a[-1] -> @ag @sync
}
