// RUN: flexpipe-opt %s -split-input-file -flexpipe-spec-to-schedule -verify-diagnostics

// What the library finds wrong with one statement of a spec is reported at
// that statement's op (sched::StatementError), through the whole pipeline:
// modules, registered instructions, the optimize request.

// Two modules that end on one actor join into a module on another: the
// receiving side could not tell their messages apart. At the joining module.
flexpipe.pipeline @join actors(2) microbatches(1) {
  flexpipe.module @a layers(1) placement(one_to_one) actors [0]
  flexpipe.module @b layers(1) placement(one_to_one) actors [0]
  // expected-error @+1 {{'flexpipe.module' op module @c takes the outputs of @a and @b, whose stages 0 and 1 both run on actor 0, while its stage 2 runs on actor 1: a transfer names the stage it serves, so the two messages between one pair of actors could not be told apart; place @a and @b so that they end on different actors}}
  flexpipe.module @c layers(1) placement(one_to_one) actors [1] inputs [@a, @b]
  flexpipe.priority cttp<fwd_first>
}

// -----

// One module feeds two that start on one other actor: their gradients back
// could not be told apart. At the second module that takes it.
flexpipe.pipeline @fanout actors(3) microbatches(3) {
  flexpipe.module @a layers(2) placement(one_to_one) actors [0, 1]
  flexpipe.module @b layers(1) placement(one_to_one) actors [2] inputs [@a]
  // expected-error @+1 {{'flexpipe.module' op module @c takes the output of @a, as @b does, and their stages 3 and 2 both run on actor 2, while @a's stage 1 runs on actor 1}}
  flexpipe.module @c layers(1) placement(one_to_one) actors [2] inputs [@a]
  flexpipe.priority cttp<fwd_first>
}

// -----

// The same join, with the inputs ending on different actors, is scheduled.
flexpipe.pipeline @join_ok actors(3) microbatches(1) {
  flexpipe.module @a layers(1) placement(one_to_one) actors [0]
  flexpipe.module @b layers(1) placement(one_to_one) actors [1]
  flexpipe.module @c layers(1) placement(one_to_one) actors [2] inputs [@a, @b]
  flexpipe.priority cttp<fwd_first>
}

// -----

// A memory bound below what the fused schedule needs: at the request.
flexpipe.pipeline @bound actors(3) microbatches(5) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.priority cttp<bwd_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  // expected-error @+1 {{'flexpipe.optimize' op gradient separation failed: the memory bound 1 is below the 3 that actor 0 needs even with every weight gradient right after its input gradient}}
  flexpipe.optimize gradient_separation memory_bound(1.0)
}

// -----

// An extra dependency that closes a cycle with the stage graph (stage 2's
// forward before stage 0's, for the same micro-batch): at the dependency,
// with the cycle. It was reported at the pipeline as priorities and
// in-flight limits that admit no step.
flexpipe.pipeline @cycle actors(3) microbatches(3) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  // expected-error @+1 {{'flexpipe.dependency' op the dependency closes a cycle with the stage graph, so none of its computations can ever run: fwd stage 0 mb 0 (actor 0) -> fwd stage 1 mb 0 (actor 1) -> fwd stage 2 mb 0 (actor 2) -> bwd stage 2 mb 0 (actor 2) -> fwd stage 0 mb 0 (actor 0)}}
  flexpipe.dependency bwd @gpt[2] -> fwd @gpt[0]
  flexpipe.priority cttp<bwd_first>
}

// -----

// Through a registered instruction: @probe waits for the last stage's
// forward, which waits for the first stage's, which waits for @probe. At
// the dependency into the dependent, with the cycle (it was reported at
// the pipeline as a step-0 stall).
flexpipe.pipeline @inst_cycle actors(3) microbatches(5) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.instruction @probe kind(compute) on(@gpt[-1])
  flexpipe.dependency fwd @gpt[-1] -> @probe @gpt[-1]
  // expected-error @+1 {{'flexpipe.dependency' op the dependency closes a cycle with the stage graph through @probe, so none of its computations can ever run: @probe -> fwd stage 0 mb 0 (actor 0) -> fwd stage 1 mb 0 (actor 1) -> fwd stage 2 mb 0 (actor 2) -> @probe}}
  flexpipe.dependency @probe @gpt[-1] -> fwd @gpt[0]
}

// -----

// igrad -> @probe -> wgrad where flexpipe.optimize splits the backward
// after scheduling: the scheduler sees one backward on both sides (it was
// reported as an in-flight stall at the pipeline).
flexpipe.pipeline @split_cycle actors(5) microbatches(7) {
  flexpipe.module @gpt layers(5) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  flexpipe.instruction @probe kind(compute) on(@gpt[2])
  flexpipe.dependency igrad @gpt[2] -> @probe @gpt[2]
  // expected-error @+1 {{'flexpipe.dependency' op the dependency closes a cycle with the stage graph through @probe, so none of its computations can ever run: @probe -> bwd stage 2 mb 0 (actor 2) -> @probe (the scheduler orders whole backwards, which flexpipe.optimize may split after scheduling: igrad and wgrad of a stage are one item here)}}
  flexpipe.dependency @probe @gpt[2] -> wgrad @gpt[2]
  flexpipe.optimize split_backward
}

// -----

// The same dependency the other way round is kept.
flexpipe.pipeline @kept actors(3) microbatches(3) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.dependency fwd @gpt[0] -> bwd @gpt[2]
  flexpipe.priority cttp<bwd_first>
}
