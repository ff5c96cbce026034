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
