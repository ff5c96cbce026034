// RUN: flexpipe-opt %s -split-input-file -flexpipe-insert-comm -verify-diagnostics

// Computation orders that no transfers can serve: actor 1 computes
// micro-batch 1 first, while actor 0 sends micro-batch 0 first. The pass
// wrote the transfers and succeeded; a later pass refused the result at the
// actor region. Now it fails, at the computation the receive serves.
flexpipe.schedule @crossed actors(2) stages(2) microbatches(2) {
  flexpipe.actor 0 {
    // expected-note @+1 {{the send it would match}}
    flexpipe.fwd stage 0 mb 0
    flexpipe.fwd stage 0 mb 1
    flexpipe.bwd stage 0 mb 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{recv_act stage 1 mb 1 from 0 on actor 1 would receive the message of send_act stage 0 mb 0 to 1 on actor 0: sends and receives between two actors must match one to one and in the same order}}
    flexpipe.fwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 1
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Two stages on one actor that feed a stage on another (a join): their
// messages would be two receives of stage 2 micro-batch 0 from actor 0, which
// no transfer tells apart. The pass built both, and its own output failed the
// op verifier ("repeats stage 2 micro-batch 0") at a computation; now the
// layout is refused before any transfer is made.
flexpipe.schedule @join actors(2) stages(3) microbatches(1) edges [0 -> 2, 1 -> 2] {
  flexpipe.actor 0 {
    // expected-note @+1 {{stage 0 computes here}}
    flexpipe.fwd stage 0 mb 0
    // expected-note @+1 {{stage 1 computes here}}
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 0 mb 0
    flexpipe.bwd stage 1 mb 0
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{stage 2 takes the outputs of stages 0 and 1, which both run on actor 0, while stage 2 runs on actor 1: a transfer names the stage it serves, so the two messages between one pair of actors could not be told apart; place stages 0 and 1 on different actors}}
    flexpipe.fwd stage 2 mb 0
    flexpipe.bwd stage 2 mb 0
  }
}

// -----

// A fan-out over three actors: stage 0 (actor 0) feeds stages 1 and 2, both
// on actor 2; their gradients back to actor 0 could not be told apart.
// Actor 1 runs stage 3, fed by stage 1: nothing clashes there.
flexpipe.schedule @fanout actors(3) stages(4) microbatches(3) edges [0 -> 1, 0 -> 2, 1 -> 3] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.fwd stage 0 mb 1
    flexpipe.fwd stage 0 mb 2
    // expected-error @+1 {{stages 1 and 2 take the output of stage 0 and both run on actor 2, while stage 0 runs on actor 0: a transfer names the stage it serves, so the two gradients sent back between one pair of actors could not be told apart; place stages 1 and 2 on different actors}}
    flexpipe.igrad stage 0 mb 0
    flexpipe.igrad stage 0 mb 1
    flexpipe.igrad stage 0 mb 2
    flexpipe.wgrad stage 0 mb 0
    flexpipe.wgrad stage 0 mb 1
    flexpipe.wgrad stage 0 mb 2
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 3 mb 0
    flexpipe.bwd stage 3 mb 0
    flexpipe.fwd stage 3 mb 1
    flexpipe.bwd stage 3 mb 1
    flexpipe.fwd stage 3 mb 2
    flexpipe.bwd stage 3 mb 2
  }
  flexpipe.actor 2 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.fwd stage 2 mb 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.fwd stage 2 mb 1
    flexpipe.fwd stage 1 mb 2
    flexpipe.fwd stage 2 mb 2
    // expected-note @+1 {{stage 1 sends its gradient from here}}
    flexpipe.bwd stage 1 mb 0
    // expected-note @+1 {{stage 2 sends its gradient from here}}
    flexpipe.bwd stage 2 mb 0
    flexpipe.bwd stage 1 mb 1
    flexpipe.bwd stage 2 mb 1
    flexpipe.bwd stage 1 mb 2
    flexpipe.bwd stage 2 mb 2
  }
}
