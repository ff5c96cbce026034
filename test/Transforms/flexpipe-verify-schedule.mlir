// RUN: flexpipe-opt %s -split-input-file -flexpipe-verify-schedule -verify-diagnostics

// Tests a valid schedule with asynchronous receives and a collective (both
// members name the same instance: stage 0, micro-batch 0).
flexpipe.schedule @ok actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    %g = flexpipe.recv_grad stage 0 mb 0 from 1 : !flexpipe.token
    flexpipe.all_gather stage 0 mb 0 group [0, 1]
    flexpipe.wait %g
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    %a = flexpipe.recv_act stage 1 mb 0 from 0 : !flexpipe.token
    flexpipe.wait %a
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.all_gather stage 0 mb 0 group [0, 1]
  }
}

// -----

// Tests a deadlock: each actor receives before it sends.
flexpipe.schedule @cycle actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+2 {{the programs deadlock: actors 0 1 wait for each other in a cycle}}
    // expected-note @+1 {{actor 0 waits here for actor 1}}
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    // expected-note @+1 {{actor 1 waits here for actor 0}}
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }
}

// -----

// Tests a collective that one member never joins.
flexpipe.schedule @lonely actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    // expected-error @+1 {{all_gather stage 0 mb 0 on actor 0 waits for actor 1, which finishes its program without providing it}}
    flexpipe.all_gather stage 0 mb 0 group [0, 1]
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }
}

// -----

// Tests receives posted in the opposite order of the sends.
flexpipe.schedule @crossed actors(2) stages(2) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-note @+1 {{the send it would match}}
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    flexpipe.send_act stage 0 mb 1 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_grad stage 0 mb 1 from 1
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{recv_act stage 1 mb 1 from 0 on actor 1 would receive the message of send_act stage 0 mb 0 to 1 on actor 0: sends and receives between two actors must match one to one and in the same order}}
    flexpipe.recv_act stage 1 mb 1 from 0
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 1
    flexpipe.send_grad stage 1 mb 1 to 0
  }
}

// -----

// Tests a computation that runs before its input is received.
flexpipe.schedule @early actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{fwd stage 1 mb 0 on actor 1 runs before the activation of stage 0 mb 0 is computed or received here; every dependency must be satisfied in program order}}
    flexpipe.fwd stage 1 mb 0
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }
}

// -----

// Tests a forward whose backward never runs (reported at the forward).
flexpipe.schedule @half actors(1) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    // expected-error @+1 {{stage 0 micro-batch 0 runs a forward but never completes its backward; every forward needs a bwd (or igrad and wgrad)}}
    flexpipe.fwd stage 0 mb 0
  }
}

// -----

// Tests a schedule that leaves out a micro-batch it declares (it verified and
// trained on half the data until fuzzing found it).
// expected-error @+1 {{micro-batch 1 is never computed, but the schedule has 3 micro-batches; every one needs its forward and backward on every stage}}
flexpipe.schedule @skips actors(1) stages(1) microbatches(3) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
    flexpipe.fwd stage 0 mb 2
    flexpipe.bwd stage 0 mb 2
  }
}

// -----

// Tests a receive from an actor that runs no neighbouring stage.
flexpipe.schedule @stranger actors(3) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{recv_act stage 1 mb 0 from 2 on actor 1 expects a message from actor 2, which runs no stage adjacent to stage 1}}
    flexpipe.recv_act stage 1 mb 0 from 2
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
  flexpipe.actor 2 {
  }
}

// -----

// Tests waits on sends: a send is complete once its receive is posted (MPI's
// wait on a large message, NCCL's completion event). Each actor waits for a
// send before it posts the receive the other one's wait needs: the 1F1B
// steady state written with send waits deadlocks, which the verifier used to
// accept (it completed sends at once).
flexpipe.schedule @send_waits actors(2) stages(2) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    %s = flexpipe.send_act stage 0 mb 1 to 1 : !flexpipe.token
    // expected-error @+2 {{the programs deadlock: actors 0 1 wait for each other in a cycle}}
    // expected-note @+1 {{actor 0 waits here for actor 1}}
    flexpipe.wait %s
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_grad stage 0 mb 1 from 1
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    %g = flexpipe.send_grad stage 1 mb 0 to 0 : !flexpipe.token
    // expected-note @+1 {{actor 1 waits here for actor 0}}
    flexpipe.wait %g
    flexpipe.recv_act stage 1 mb 1 from 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 1
    flexpipe.send_grad stage 1 mb 1 to 0
  }
}

// -----

// Tests the same programs with the receive posted before the wait (an
// asynchronous receive): they verify.
flexpipe.schedule @send_waits_posted actors(2) stages(2) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    %s = flexpipe.send_act stage 0 mb 1 to 1 : !flexpipe.token
    %r = flexpipe.recv_grad stage 0 mb 0 from 1 : !flexpipe.token
    flexpipe.wait %s
    flexpipe.wait %r
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_grad stage 0 mb 1 from 1
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    %g = flexpipe.send_grad stage 1 mb 0 to 0 : !flexpipe.token
    flexpipe.wait %g
    flexpipe.recv_act stage 1 mb 1 from 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 1
    flexpipe.send_grad stage 1 mb 1 to 0
  }
}

// -----

// Tests a wait on a send that nothing receives: actor 2 runs no stage that
// takes it, which the send names (it was reported at the wait, as a wait
// that never completes).
flexpipe.schedule @send_wait_unreceived actors(3) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    // expected-error @+1 {{send_act stage 0 mb 0 to 2 on actor 0 sends to actor 2, which runs no stage after stage 0 that would take the message}}
    %s = flexpipe.send_act stage 0 mb 0 to 2 : !flexpipe.token
    flexpipe.wait %s
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }
  flexpipe.actor 2 {
  }
}

// -----

// Tests a send that nothing receives (the iteration's final wait for every
// send would never end): actor 2 runs no stage that takes it.
flexpipe.schedule @unreceived actors(3) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    // expected-error @+1 {{send_act stage 0 mb 0 to 2 on actor 0 sends to actor 2, which runs no stage after stage 0 that would take the message}}
    flexpipe.send_act stage 0 mb 0 to 2
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }  flexpipe.actor 2 {
  }
}

// -----

// Tests a backward with no forward (reported there, before any message is
// matched: it was reported as a receive taking another micro-batch's
// message, at ops the user never wrote).
flexpipe.schedule @no_forward actors(1) stages(1) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 1
    // expected-error @+1 {{stage 0 micro-batch 0 completes a backward but runs no forward; every backward needs its forward}}
    flexpipe.bwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 1
  }
}

// -----

// Tests a micro-batch that takes both directions of a bidirectional pipeline
// (its gradient counted twice; this verified and simulated).
flexpipe.schedule @both_ways actors(2) stages(4) microbatches(2) edges [0 -> 1, 2 -> 3] stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>, #flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
  flexpipe.actor 0 {
    // expected-note @+1 {{its other forward}}
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    flexpipe.send_act stage 0 mb 1 to 1
    flexpipe.recv_act stage 3 mb 0 from 1
    flexpipe.fwd stage 3 mb 0
    flexpipe.bwd stage 3 mb 0
    flexpipe.send_grad stage 3 mb 0 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_grad stage 0 mb 1 from 1
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{micro-batch 0 runs stage 0 and stage 2 of module 'gpt', which no stage edge connects (two directions of a bidirectional pipeline); a micro-batch takes one}}
    flexpipe.fwd stage 2 mb 0
    flexpipe.send_act stage 2 mb 0 to 0
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.recv_act stage 1 mb 1 from 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 1
    flexpipe.send_grad stage 1 mb 1 to 0
    flexpipe.recv_grad stage 2 mb 0 from 0
    flexpipe.bwd stage 2 mb 0
  }
}

// -----

// Tests a micro-batch that skips a stage of its pipeline.
flexpipe.schedule @skips actors(2) stages(2) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    // expected-error @+1 {{micro-batch 1 runs 1 of the 2 stages connected to stage 0; it needs its forward and backward on every one}}
    flexpipe.fwd stage 0 mb 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }
}

// -----

// Tests a shared (vocabulary-parallel) stage that one member leaves out for
// a micro-batch: that micro-batch would miss a vocabulary slice.
flexpipe.schedule @slice actors(2) stages(1) microbatches(2) shared [0] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+1 {{stage 0 micro-batch 1 runs its forward on actor 0 only, but the stage is shared by actors 0 and 1; every member computes its part for every micro-batch}}
    flexpipe.fwd stage 0 mb 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// Tests a small program that declares the most stages and micro-batches a
// schedule may have: the checks take memory per computation (one cell per
// stage and micro-batch was 2^40 of them: std::bad_alloc).
flexpipe.schedule @sparse actors(1) stages(1048576) microbatches(1048576) {
  flexpipe.actor 0 {
    // expected-error @+1 {{micro-batch 0 runs 1 of the 1048576 stages connected to stage 0; it needs its forward and backward on every one}}
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// Tests a receive for a stage its actor does not compute (it was reported as
// the peer running no stage adjacent to it).
flexpipe.schedule @foreign_stage actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    // expected-error @+1 {{recv_grad stage 1 mb 0 from 1 on actor 0 receives for stage 1, which actor 0 does not compute}}
    flexpipe.recv_grad stage 1 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }
}

// -----

// Tests a stage of no layers (a spec's `partition [4, 0, 4, 0]` makes them):
// still a stage every micro-batch runs, not a registered one.
flexpipe.schedule @zero_layers actors(1) stages(3) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 0>, #flexpipe.stage_info<"gpt", 1, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.fwd stage 2 mb 0
    flexpipe.bwd stage 2 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// Tests a micro-batch that skips a whole tower (its gradient averaged over
// fewer micro-batches than the other's).
flexpipe.schedule @skips_tower actors(2) stages(2) microbatches(2) edges [] stage_info [#flexpipe.stage_info<"image", 1, first, last>, #flexpipe.stage_info<"text", 1, first, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
    // expected-error @+1 {{micro-batch 1 runs no stage of module 'text'; every micro-batch runs each module}}
    flexpipe.fwd stage 0 mb 1
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Tests a vocabulary-parallel head (stage 3: shared, no layers, last)
// whose all_gather of the loss statistics is left out on both members: the
// slices' backwards would take their local softmax for the whole one.
flexpipe.schedule @vp_no_gather actors(2) stages(4) microbatches(1) edges [0 -> 1, 2 -> 0, 1 -> 3] shared [2, 3] stage_info [#flexpipe.stage_info<"gpt", 2>, #flexpipe.stage_info<"gpt", 2>, #flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 0, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 2 mb 0
    flexpipe.recv_act stage 0 mb 0 from 1
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_act stage 3 mb 0 from 1
    flexpipe.fwd stage 3 mb 0
    flexpipe.bwd stage 3 mb 0
    flexpipe.send_grad stage 3 mb 0 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.send_grad stage 0 mb 0 to 1
    flexpipe.bwd stage 2 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 2 mb 0
    flexpipe.send_act stage 2 mb 0 to 0
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.send_act stage 1 mb 0 to 0
    flexpipe.fwd stage 3 mb 0
    // expected-error @+1 {{bwd stage 3 mb 0 on actor 1 runs before the all_gather of the loss statistics of stage 3 mb 0 (a vocabulary-parallel head's slices exchange them) completes here}}
    flexpipe.bwd stage 3 mb 0
    flexpipe.recv_grad stage 1 mb 0 from 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.recv_grad stage 2 mb 0 from 0
    flexpipe.bwd stage 2 mb 0
  }
}

// -----

// Tests the same head with an asynchronous all_gather: its wait completes
// it, and the backward after the wait is fine; one before it is not.
flexpipe.schedule @vp_async_gather actors(2) stages(4) microbatches(1) edges [0 -> 1, 2 -> 0, 1 -> 3] shared [2, 3] stage_info [#flexpipe.stage_info<"gpt", 2>, #flexpipe.stage_info<"gpt", 2>, #flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 0, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 2 mb 0
    flexpipe.recv_act stage 0 mb 0 from 1
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_act stage 3 mb 0 from 1
    flexpipe.fwd stage 3 mb 0
    %t = flexpipe.all_gather stage 3 mb 0 group [0, 1] : !flexpipe.token
    flexpipe.wait %t
    flexpipe.bwd stage 3 mb 0
    flexpipe.send_grad stage 3 mb 0 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.send_grad stage 0 mb 0 to 1
    flexpipe.bwd stage 2 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 2 mb 0
    flexpipe.send_act stage 2 mb 0 to 0
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.send_act stage 1 mb 0 to 0
    flexpipe.fwd stage 3 mb 0
    %t = flexpipe.all_gather stage 3 mb 0 group [0, 1] : !flexpipe.token
    // expected-error @+1 {{bwd stage 3 mb 0 on actor 1 runs before the all_gather of the loss statistics of stage 3 mb 0}}
    flexpipe.bwd stage 3 mb 0
    flexpipe.wait %t
    flexpipe.recv_grad stage 1 mb 0 from 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.recv_grad stage 2 mb 0 from 0
    flexpipe.bwd stage 2 mb 0
  }
}

// -----

// Tests a schedule whose programs compute nothing (it verified, lowered, and
// every rank refused it at start).
// expected-error @+1 {{no actor computes stage 0: every micro-batch needs its forward and backward on every stage}}
flexpipe.schedule @empty actors(2) stages(2) microbatches(2) stage_info [#flexpipe.stage_info<"gpt", 4, first>, #flexpipe.stage_info<"gpt", 4, last>] {
  flexpipe.actor 0 {
  }
  flexpipe.actor 1 {
  }
}

// -----

// Tests members of one collective that name different groups (it verified:
// the instance counted its first member's group, and actor 2 never joined).
flexpipe.schedule @groups actors(3) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-note @+1 {{the other member}}
    flexpipe.all_gather stage 0 mb 0 group [0, 2]
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{all_gather stage 0 mb 0 on actor 1 names the group of actors 1 and 2, but actor 0's names the group of actors 0 and 2; every member of a collective names the same}}
    flexpipe.all_gather stage 0 mb 0 group [1, 2]
  }
  flexpipe.actor 2 {
  }
}

// -----

// Tests members of one gather that name different roots.
flexpipe.schedule @roots actors(2) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-note @+1 {{the other member}}
    flexpipe.gather stage 0 mb 0 group [0, 1] root 0
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{gather stage 0 mb 0 on actor 1 names root 1, but actor 0's names root 0; every member of a collective names the same}}
    flexpipe.gather stage 0 mb 0 group [0, 1] root 1
  }
}

// -----

// Tests a runtime operation on an actor that does not compute its stage
// (it verified, compiled and ran: the stage's instances elsewhere counted
// it, and its micro-batch's outputs were never seen).
flexpipe.schedule @exec_elsewhere actors(2) stages(2) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    // expected-error @+1 {{exec stage 1 mb 0 on actor 0, but actor 0 does not compute stage 1 (actor 1 does): every actor of the stage runs its own instance, on the outputs it computed}}
    flexpipe.exec @probe stage 1 mb 0
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }
}

// -----

// Tests members of one stage and micro-batch that run different collectives
// (an all_gather meeting a gather): the cycle names the mistake.
flexpipe.schedule @mixed_collectives actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    // expected-error @+2 {{the programs deadlock: actors 0 1 wait for each other in a cycle: actor 0 runs all_gather and actor 1 runs gather of stage 0 mb 0; every member of a collective runs the same kind}}
    // expected-note @+1 {{actor 0 waits here for actor 1}}
    flexpipe.all_gather stage 0 mb 0 group [0, 1]
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    // expected-note @+1 {{actor 1 waits here for actor 0}}
    flexpipe.gather stage 0 mb 0 group [0, 1] root 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }
}

// -----

// A hand-written join whose two messages one receive cannot tell apart: the
// layout is named (it said that stage 2 runs before the activation of stage
// 1 is received, and two receives are refused as a repeat).
flexpipe.schedule @join actors(2) stages(3) microbatches(1) edges [0 -> 2, 1 -> 2] {
  flexpipe.actor 0 {
    // expected-note @+1 {{stage 0 computes here}}
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    // expected-note @+1 {{stage 1 computes here}}
    flexpipe.fwd stage 1 mb 0
    flexpipe.send_act stage 1 mb 0 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_grad stage 1 mb 0 from 1
    flexpipe.bwd stage 1 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 2 mb 0 from 0
    // expected-error @+1 {{stage 2 takes the outputs of stages 0 and 1, which both run on actor 0, while stage 2 runs on actor 1}}
    flexpipe.fwd stage 2 mb 0
    flexpipe.bwd stage 2 mb 0
    flexpipe.send_grad stage 2 mb 0 to 0
  }
}
