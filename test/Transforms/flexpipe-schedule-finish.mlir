// -flexpipe-spec-to-schedule builds each program once: -flexpipe-schedule
// {finish} applies what flexpipe.optimize asks for and inserts
// communication in memory (sched::lowerProblem), then writes the IR once.
// The same passes one by one read and rewrite the IR at every step; both
// must give the same schedules, so the IR -> program -> IR round trips lose
// nothing (ops, tokens, collectives, exec attributes and locations, the
// separation figures). Under the cost model on a measured cluster the
// judged, separated program is the one written.
// RUN: flexpipe-opt %s -flexpipe-spec-to-schedule -mlir-print-debuginfo > %t.once
// RUN: flexpipe-opt %s -flexpipe-partition -flexpipe-place -flexpipe-schedule -flexpipe-split-backward=requested-only=true -flexpipe-gradient-separation=requested-only=true -flexpipe-insert-comm -flexpipe-async-comm=requested-only=true -flexpipe-verify-schedule -mlir-print-debuginfo > %t.steps
// RUN: diff %t.once %t.steps
// RUN: FileCheck %s < %t.once
// Handed back in, the finished schedules are taken as they are (before the
// finish, the pipeline separated them again and failed on the transfers).
// RUN: flexpipe-opt %t.once -flexpipe-spec-to-schedule -mlir-print-debuginfo | diff - %t.once
// Up to 6 actors x dp 2: the measured cluster grown to 12 ranks.
// (The modules have the model file's layers: the passes refuse a spec
// written for a model of another size.)
// RUN: sed 's/^devices: 4/devices: 12/' %S/../Tools/Inputs/measured-cpu.yaml > %t.cluster.yaml
// RUN: flexpipe-opt %s -flexpipe-spec-to-schedule="time-model=cost model=%S/Inputs/three-modules.yaml cluster=%t.cluster.yaml dp=2" > %t.cost.once
// RUN: flexpipe-opt %s -flexpipe-partition=model=%S/Inputs/three-modules.yaml -flexpipe-place -flexpipe-schedule="time-model=cost model=%S/Inputs/three-modules.yaml cluster=%t.cluster.yaml dp=2" -flexpipe-split-backward=requested-only=true -flexpipe-gradient-separation="requested-only=true time-model=cost model=%S/Inputs/three-modules.yaml cluster=%t.cluster.yaml dp=2" -flexpipe-insert-comm -flexpipe-async-comm=requested-only=true -flexpipe-verify-schedule > %t.cost.steps
// RUN: diff %t.cost.once %t.cost.steps
// RUN: FileCheck %s --check-prefix=COST < %t.cost.once
// The schedule's flexpipe.optimize holds what the optimize op asks for,
// not other attributes of the op (which then failed its verification).
// RUN: sed 's/flexpipe.optimize gradient_separation async_comm/& {note = "kept out"}/' %s | flexpipe-opt -flexpipe-spec-to-schedule | FileCheck %s --check-prefix=NOTE
// NOTE: flexpipe.optimize = {async_comm, gradient_separation}
// NOTE-NOT: kept out

// CHECK-LABEL: flexpipe.schedule @zb_v actors(5) stages(10) microbatches(11)
// CHECK-SAME: flexpipe.optimize = {async_comm, gradient_separation}
// CHECK-SAME: flexpipe.separation = {{{.*}}unit = "steps"}
// CHECK: = flexpipe.recv_act {{.*}}: !flexpipe.token
// CHECK: flexpipe.wgrad
// CHECK-LABEL: flexpipe.schedule @clip_mixed actors(6)
// CHECK-SAME: flexpipe.separation
// CHECK: flexpipe.all_gather
// CHECK-LABEL: flexpipe.schedule @async actors(4)
// CHECK: = flexpipe.all_gather stage 6 mb 0 group [1, 3] : !flexpipe.token
// CHECK: flexpipe.igrad
// CHECK-LABEL: flexpipe.schedule @plain actors(3) stages(3) microbatches(7)
// CHECK-NOT: flexpipe.optimize
// CHECK: flexpipe.send_act

// COST-LABEL: flexpipe.schedule @zb_v
// COST-SAME: flexpipe.separation = {{{.*}}unit = "s"}
// COST-LABEL: flexpipe.schedule @clip_mixed
// COST-SAME: flexpipe.separation = {{{.*}}unit = "s"}

flexpipe.pipeline @zb_v actors(5) microbatches(11) {
  flexpipe.module @gpt layers(20) placement(vshape) chunks(2)
  flexpipe.priority cttp<fwd_first> fstp<depth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (s)>
  flexpipe.optimize gradient_separation async_comm
}

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

flexpipe.pipeline @async actors(4) microbatches(3) {
  flexpipe.module @image layers(16) placement(circular) chunks(2) actors [0, 1]
  flexpipe.module @text layers(4) placement(one_to_one) actors [2, 3]
  flexpipe.stage @sync actors [1, 3]
  flexpipe.instruction @sync_states kind(all_gather) on(@sync) async
  flexpipe.dependency fwd @image[-1] -> @sync_states @sync
  flexpipe.dependency fwd @text[-1] -> @sync_states @sync
  flexpipe.dependency @sync_states @sync -> bwd @image[-1]
  flexpipe.dependency @sync_states @sync -> bwd @text[-1]
  flexpipe.optimize split_backward async_comm
}

flexpipe.pipeline @plain actors(3) microbatches(7) {
  flexpipe.module @gpt layers(20) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
}
