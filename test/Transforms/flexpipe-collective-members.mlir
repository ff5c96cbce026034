// RUN: flexpipe-opt %s -split-input-file -flexpipe-spec-to-schedule -verify-diagnostics

// A collective orders only its members: each leaves an instance once every
// member joined it, and a member's program orders its own computations
// against it. A computation on an actor that does not join it is ordered
// against it only through messages (its data reaching a member first, or a
// member's data reaching it after). Where none does, the dependency is kept
// by nothing (the all-gather ran before the forward on actor 2 it depends
// on finished, exit 0), and it is refused at the dependency.
flexpipe.pipeline @source_outside actors(3) microbatches(3) {
  flexpipe.module @a layers(3) placement(one_to_one)
  flexpipe.stage @sync actors [0, 1]
  flexpipe.instruction @ag kind(all_gather) on(@sync)
  // expected-error @+1 {{'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, fwd of stage 2 (actor 2) happens before no instance of @ag (on actors [0, 1]): actor 2 does not join the collective, and no message orders them; add actor 2 to the registered stage's actors, or make this end a computation of a member, or one whose data reaches a member first}}
  flexpipe.dependency fwd @a[-1] -> @ag @sync
  flexpipe.dependency @ag @sync -> bwd @a[-1]
}

// -----

// A dependent outside the collective.
flexpipe.pipeline @dependent_outside actors(5) microbatches(4) {
  flexpipe.module @a layers(5) placement(one_to_one)
  flexpipe.stage @sync actors [0, 3]
  flexpipe.instruction @ag kind(all_gather) on(@sync)
  flexpipe.dependency fwd @a[-2] -> @ag @sync
  // expected-error @+1 {{'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, no instance of @ag (on actors [0, 3]) happens before bwd of stage 4 (actor 4): actor 4 does not join the collective}}
  flexpipe.dependency @ag @sync -> bwd @a[-1]
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
}

// -----

// An asynchronous gather, and a stage shared by a member and an actor
// outside: the actor outside is named.
flexpipe.pipeline @shared_outside actors(4) microbatches(2) {
  flexpipe.module @a layers(4) placement(one_to_one)
  flexpipe.share @a stage 3 actors [2, 3]
  flexpipe.stage @sync actors [0, 3]
  flexpipe.instruction @g kind(gather) on(@sync) async
  // expected-error @+1 {{'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, fwd of stage 3 (actor 2) happens before no instance of @g (on actors [0, 3]): actor 2 does not join the collective}}
  flexpipe.dependency fwd @a[3] -> @g @sync
}

// -----

// Both ends on members: each member's program keeps them.
flexpipe.pipeline @members actors(4) microbatches(4) {
  flexpipe.module @a layers(4) placement(one_to_one)
  flexpipe.stage @sync actors [0, 3]
  flexpipe.instruction @ag kind(all_gather) on(@sync)
  flexpipe.dependency fwd @a[-1] -> @ag @sync
  flexpipe.dependency @ag @sync -> bwd @a[-1]
  flexpipe.dependency @ag @sync -> bwd @a[0]
}

// -----

// Members' programs are checked as they run: the split backward places the
// weight gradients after scheduling, where actor 0 ran the all-gather
// before the weight gradient it depends on (accepted, exit 0).
flexpipe.pipeline @wgrad_after actors(4) microbatches(6) {
  flexpipe.module @a layers(4) placement(one_to_one)
  flexpipe.stage @sync actors [0, 3]
  flexpipe.instruction @ag kind(all_gather) on(@sync)
  // expected-error @+1 {{'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, wgrad of stage 3 (actor 3) does not happen before @ag on actor 3: the actor runs them the other way round (the split backward's weight gradients are placed after scheduling, which sees no extra dependency); start the dependency at igrad, or leave the backward whole}}
  flexpipe.dependency wgrad @a[-1] -> @ag @sync
  flexpipe.dependency wgrad @a[0] -> @ag @sync
  flexpipe.optimize split_backward gradient_separation
}

// -----

// Ends outside the collective that data orders: the forward of stage 0 on
// actor 0 reaches the members through the activations before they join, and
// its backward comes after the gradients that leave them after it. Kept,
// and accepted (a refusal by the actors alone took them for unordered).
flexpipe.pipeline @ordered_by_data actors(3) microbatches(3) {
  flexpipe.module @a layers(3) placement(one_to_one)
  flexpipe.stage @sync actors [1, 2]
  flexpipe.instruction @ag kind(all_gather) on(@sync)
  flexpipe.dependency fwd @a[-1] -> @ag @sync
  flexpipe.dependency @ag @sync -> bwd @a[-1]
  flexpipe.dependency fwd @a[0] -> @ag @sync
  flexpipe.dependency @ag @sync -> bwd @a[0]
}
