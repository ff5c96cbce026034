// RUN: flexpipe-opt %s -split-input-file -flexpipe-spec-to-schedule -verify-diagnostics > /dev/null
// Over a thousand towers: the check would take each source actor times the
// program (4096 towers took 283 s and 6.5 GB); the limit is said not to be
// checked instead.
// RUN: python3 -c "k = 1024; print('flexpipe.pipeline @towers actors(%%d) microbatches(16) {' %% (k + 1)); [print('  flexpipe.module @t%%d layers(1) placement(one_to_one) actors [%%d]' %% (i, i)) for i in range(k)]; print('  flexpipe.module @head layers(1) placement(one_to_one) actors [%%d] inputs [%%s]' %% (k, ', '.join('@t%%d' %% i for i in range(k)))); print('  flexpipe.inflight global 4'); print('}')" > %t.towers.mlir
// RUN: flexpipe-opt %t.towers.mlir -flexpipe-spec-to-schedule 2>&1 >/dev/null | FileCheck %s --check-prefix=BUDGET
// BUDGET: warning: limits micro-batches in flight to 4, which is not checked against the programs: its first stages are on 1024 actors, and the check takes their number times the {{[0-9]+}} instructions

// A global in-flight limit counts micro-batches across the pipeline. The
// scheduler keeps it in its own timing; the programs keep it only where
// program order, messages or collectives make an actor wait. Where the
// limit's first stages are on several actors and nothing orders them, the
// limit is said not to hold when the schedule runs (the simulator and the
// runtime let micro-batch 3 enter on actor 2 at step 16 while micro-batch 2
// was released on actor 0 only at step 17).

// Bidirectional: the mirrored direction enters on the last actor.
flexpipe.pipeline @bidirectional actors(3) microbatches(5) {
  flexpipe.module @gpt layers(6) placement(one_to_one) bidirectional
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  // expected-warning @+1 {{limits micro-batches in flight to 1, which the programs do not keep when they run: micro-batch 3 may enter at the forward of stage 3 (actor 2) while 1 other is in flight (micro-batch 2): nothing the actors exchange makes actor 2 wait until it is released}}
  flexpipe.inflight global 1
}

// -----

// Two towers: a micro-batch enters on either, and its release on the other
// tower orders nothing on this one.
flexpipe.pipeline @towers actors(5) microbatches(5) {
  flexpipe.module @a layers(4) placement(one_to_one) actors [0, 1]
  flexpipe.module @b layers(2) placement(one_to_one) actors [2]
  flexpipe.module @head layers(4) placement(one_to_one) actors [3, 4] inputs [@a, @b]
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  // expected-warning @+1 {{limits micro-batches in flight to 2, which the programs do not keep when they run: micro-batch 2 may enter at the forward of stage 0 (actor 0) while 3 others are in flight (micro-batches 0, 1, 3)}}
  flexpipe.inflight global 2
}

// -----

// One source actor: its program keeps the limit.
flexpipe.pipeline @one_source actors(4) microbatches(7) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight global 2
}

// -----

// A limit no schedule of m micro-batches can exceed.
flexpipe.pipeline @roomy actors(3) microbatches(5) {
  flexpipe.module @gpt layers(6) placement(one_to_one) bidirectional
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight global 5
}

// -----

// Bidirectional with a limit the programs keep under every timing: actor 1
// runs the backward of micro-batch 2 before the forward of 3, and actor 0
// that of 0 before the forward of 1, so at most one other is in flight
// when either enters. (Counting each micro-batch that may be in flight on
// its own warned here: 2 and 3 cannot be in flight together.)
flexpipe.pipeline @kept actors(2) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(one_to_one) bidirectional
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight global 2
}

// -----

// Posted receives change what a message orders: checked on the finished
// program.
flexpipe.pipeline @posted actors(3) microbatches(5) {
  flexpipe.module @gpt layers(6) placement(one_to_one) bidirectional
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.optimize split_backward async_comm
  // expected-warning @+1 {{limits micro-batches in flight to 1, which the programs do not keep when they run}}
  flexpipe.inflight global 1
}
