// RUN: flexpipe-opt %s -split-input-file -flexpipe-spec-to-schedule -verify-diagnostics

// A collective orders only its members: each leaves an instance once every
// member joined it, and a member's program orders its own computations
// against it. A dependency between a collective and a computation on an
// actor that does not join it is kept by nothing (the all-gather ran before
// the forward on actor 2 it depends on finished, exit 0), so it is refused
// at the dependency.
flexpipe.pipeline @source_outside actors(3) microbatches(3) {
  flexpipe.module @a layers(3) placement(one_to_one)
  flexpipe.stage @sync actors [0, 1]
  flexpipe.instruction @ag kind(all_gather) on(@sync)
  // expected-error @+1 {{'flexpipe.dependency' op connects collective @ag (kind(all_gather) of actors [0, 1]) with fwd of @a[2] on actor 2, which does not join it: a collective orders only its members' computations, so nothing would keep this dependency when the schedule runs; add actor 2 to the actors of flexpipe.stage @sync, or make the other end a computation on one of actors [0, 1]}}
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
  // expected-error @+1 {{'flexpipe.dependency' op connects collective @ag (kind(all_gather) of actors [0, 3]) with bwd of @a[4] on actor 4, which does not join it: a collective orders only its members' computations, so nothing would keep this dependency when the schedule runs; add actor 4 to the actors of flexpipe.stage @sync, or make the other end a computation on one of actors [0, 3]}}
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
  // expected-error @+1 {{'flexpipe.dependency' op connects collective @g (kind(gather) of actors [0, 3]) with fwd of @a[3] on actor 2, which does not join it}}
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
  flexpipe.dependency wgrad @a[-1] -> @ag @sync
  // expected-error @+1 {{'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, wgrad of stage 0 (actor 0) does not happen before @ag on actor 0: the actor runs them the other way round (the split backward's weight gradients are placed after scheduling, which sees no extra dependency)}}
  flexpipe.dependency wgrad @a[0] -> @ag @sync
  flexpipe.optimize split_backward gradient_separation
}
