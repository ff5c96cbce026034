// Bad specs reach the user as located diagnostics with exit code 1.

// RUN: split-file %s %t
// RUN: not flexpipe-compile %t/inflight.mlir 2>&1 | FileCheck %s --check-prefix=INFLIGHT
// RUN: not flexpipe-compile %t/idle.mlir 2>&1 | FileCheck %s --check-prefix=IDLE
// RUN: not flexpipe-compile %t/interval.mlir 2>&1 | FileCheck %s --check-prefix=INTERVAL
// RUN: not flexpipe-compile %t/priority.mlir 2>&1 | FileCheck %s --check-prefix=PRIORITY
// RUN: not flexpipe-compile %t/cycle.mlir 2>&1 | FileCheck %s --check-prefix=CYCLE
// RUN: not flexpipe-compile %t/stuck.mlir 2>&1 | FileCheck %s --check-prefix=STUCK
// RUN: not flexpipe-compile %t/empty.mlir 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not flexpipe-compile %t/syntax.mlir 2>&1 | FileCheck %s --check-prefix=SYNTAX

// INFLIGHT: inflight.mlir:3:3: error: 'flexpipe.inflight' op gives actor 0 an in-flight limit of 0; every limit must be at least 1
// IDLE: idle.mlir:1:1: error: 'flexpipe.pipeline' op leaves actor 3 without any stage
// INTERVAL: interval.mlir:3:25: error: custom op 'flexpipe.priority' a stage traversal interval must be at least 1, got 0; omit it to take the first item
// PRIORITY: priority.mlir:3:25: error: custom op 'flexpipe.priority' unknown computation-type traversal priority 'depth_first'; expected bwd_first, fwd_first or interleaved
// CYCLE: cycle.mlir:4:3: error: 'flexpipe.dependency' op closes a cycle of extra dependencies, so none of its instructions can ever be scheduled; remove one of them
// CYCLE: cycle.mlir:3:3: note: part of the cycle
// STUCK: stuck.mlir:1:1: error: 'flexpipe.pipeline' op cannot be scheduled: no actor can make progress at step 6
// STUCK: note: actor 0 has 18 computations left: fwd stage 3 mb 0 (actor 0) is ready but the actor's in-flight limit 6 is reached
// EMPTY: error: '{{.*}}empty.mlir' holds no flexpipe.pipeline or flexpipe.schedule to compile
// SYNTAX: syntax.mlir:2:3: error: custom op 'flexpipe.modul' is unknown

//--- inflight.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.inflight per_actor 0
}
//--- idle.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one) actors [0, 1, 2]
}
//--- interval.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(circular)
  flexpipe.priority fstp<breadth_first, 0>
}
//--- priority.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<depth_first>
}
//--- cycle.mlir
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.dependency fwd @gpt[0] -> fwd @gpt[1]
  flexpipe.dependency fwd @gpt[1] -> fwd @gpt[0]
}
//--- stuck.mlir
flexpipe.pipeline @p actors(3) microbatches(6) {
  flexpipe.module @gpt layers(6) placement(circular)
  flexpipe.priority cttp<fwd_first>
  flexpipe.inflight per_actor [6, 5, 4]
}
//--- empty.mlir
func.func @nothing() {
  return
}
//--- syntax.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.modul @gpt layers(8) placement(one_to_one)
}
