// RUN: flexpipe-opt %s -split-input-file -flexpipe-spec-to-schedule -verify-diagnostics
// The passes one by one report the same: the schedule IR does not record
// the dependencies, so -flexpipe-schedule checks them on the program the
// later passes will make of it (@split passed them all, its weight
// gradient run after the input gradient that depends on it).
// RUN: flexpipe-opt %s -split-input-file -flexpipe-partition -flexpipe-place -flexpipe-schedule -flexpipe-split-backward=requested-only=true -flexpipe-gradient-separation=requested-only=true -flexpipe-insert-comm -flexpipe-async-comm=requested-only=true -flexpipe-verify-schedule -verify-diagnostics

// An extra dependency between computations must hold when the schedule
// runs, not only in the scheduler's steps: the source must happen before
// the destination through program order, messages or collectives.

// Two towers on actors that exchange nothing: the scheduler orders 1F0
// after 0F0, but no message makes actor 1 wait.
flexpipe.pipeline @apart actors(2) microbatches(2) {
  flexpipe.module @image layers(1) placement(one_to_one) actors [0]
  flexpipe.module @text layers(1) placement(one_to_one) actors [1]
  // expected-error @+1 {{'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, fwd of stage 0 (actor 0) does not happen before fwd of stage 1 (actor 1): nothing the two actors exchange orders them (the scheduler did, but no message makes actor 1 wait); connect the stages with data (`inputs`), place them on one actor, or order them through a collective instruction (kind(all_gather)) both actors join}}
  flexpipe.dependency fwd @image[0] -> fwd @text[0]
}

// -----

// Of two broken dependencies, the first stated is reported, though the
// check answers them one source actor at a time (actor 0 first).
flexpipe.pipeline @first_stated actors(4) microbatches(2) {
  flexpipe.module @a layers(1) placement(one_to_one) actors [0]
  flexpipe.module @b layers(1) placement(one_to_one) actors [1]
  flexpipe.module @c layers(1) placement(one_to_one) actors [2]
  flexpipe.module @d layers(1) placement(one_to_one) actors [3]
  // expected-error @+1 {{'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, fwd of stage 2 (actor 2) does not happen before fwd of stage 3 (actor 3)}}
  flexpipe.dependency fwd @c[0] -> fwd @d[0]
  flexpipe.dependency fwd @a[0] -> fwd @b[0]
}

// -----

// The weight gradient of stage 2 sends nothing once the backward is split,
// and gradient separation places it after the input gradients it should
// precede.
flexpipe.pipeline @split actors(3) microbatches(4) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  // expected-error @+1 {{'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, wgrad of stage 2 (actor 2) does not happen before igrad of stage 1 (actor 1): the backward was split after scheduling and the weight gradient placed on its own, where no message or later computation orders it (flexpipe.optimize split_backward or gradient_separation); start the dependency at igrad, or leave the backward whole}}
  flexpipe.dependency wgrad @gpt[2] -> igrad @gpt[1]
  flexpipe.optimize gradient_separation
}

// -----

// A runtime operation (kind(compute)) orders nothing between actors: on the
// last stage's actor, @probe ran for every micro-batch before anything
// arrived there, though it depends on the first stage's forward.
flexpipe.pipeline @exec_source actors(3) microbatches(5) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  flexpipe.instruction @probe kind(compute) on(@gpt[-1])
  // expected-error @+1 {{'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, fwd of stage 0 (actor 0) does not happen before @probe on actor 2: a runtime operation (kind(compute)) orders nothing between actors, and no message orders these two; attach the instruction to a stage of actor 0, connect the stages with data (`inputs`), or make it a collective (kind(all_gather)), which every member joins}}
  flexpipe.dependency fwd @gpt[0] -> @probe @gpt[-1]
}

// -----

// And into a computation of another actor: actor 0 runs @probe after it
// sent micro-batch 0 on, so nothing holds stage 2's forward back.
flexpipe.pipeline @exec_dependent actors(3) microbatches(5) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  flexpipe.instruction @probe kind(compute) on(@gpt[0])
  flexpipe.dependency fwd @gpt[0] -> @probe @gpt[0]
  // expected-error @+1 {{'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, @probe on actor 0 does not happen before fwd of stage 2 (actor 2)}}
  flexpipe.dependency @probe @gpt[0] -> fwd @gpt[2]
}

// -----

// On the actor of its stage, in the order the data flows: kept.
flexpipe.pipeline @exec_kept actors(3) microbatches(5) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  flexpipe.instruction @probe kind(compute) on(@gpt[1])
  flexpipe.dependency fwd @gpt[1] -> @probe @gpt[1]
  flexpipe.dependency @probe @gpt[1] -> bwd @gpt[1]
}

// -----

// A shared stage: each member runs its own instance on what it computed,
// so another member's forward need not come first (it was refused: the
// instruction on actor 0 was held to actor 1's forward).
flexpipe.pipeline @exec_shared actors(2) microbatches(3) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
  flexpipe.share @gpt stage 1 actors [0, 1]
  flexpipe.instruction @probe kind(compute) on(@gpt[-1])
  flexpipe.dependency fwd @gpt[-1] -> @probe @gpt[-1]
  flexpipe.dependency @probe @gpt[-1] -> bwd @gpt[-1]
}

// -----

// Dependents outside the sources' micro-batches do not wait for an instance
// (the mirrored direction of a bidirectional module here): with next(2),
// micro-batch 2 of the mirrored stage 3 was held to an instance the
// scheduler never made it wait for.
flexpipe.pipeline @exec_range actors(3) microbatches(4) {
  flexpipe.module @gpt layers(8) placement(one_to_one) bidirectional
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.instruction @probe kind(compute) on(@gpt[-1]) next(2)
  flexpipe.dependency fwd @gpt[-1] -> @probe @gpt[-1]
  flexpipe.dependency @probe @gpt[-1] -> fwd @gpt[3]
}
