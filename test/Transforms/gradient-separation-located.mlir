// RUN: flexpipe-opt %s -split-input-file -flexpipe-gradient-separation -verify-diagnostics

// -flexpipe-gradient-separation refuses what it cannot separate at the op,
// as -flexpipe-verify-schedule does: a deadlock of its replay (transfers
// inserted) at the computation where actor 0 waits, with a note where each
// actor waits. It was one error at the schedule, without notes.
flexpipe.schedule @deadlock actors(2) stages(2) microbatches(4) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 2
    flexpipe.fwd stage 0 mb 0
    // expected-error @+2 {{-flexpipe-gradient-separation needs a schedule that runs: the programs deadlock: actors 0 1 wait for each other in a cycle}}
    // expected-note @+1 {{actor 0 waits here for actor 1}}
    flexpipe.bwd stage 0 mb 0
    flexpipe.fwd stage 0 mb 1
    flexpipe.bwd stage 0 mb 1
    flexpipe.fwd stage 0 mb 3
    flexpipe.bwd stage 0 mb 2
    flexpipe.bwd stage 0 mb 3
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 2
    flexpipe.fwd stage 1 mb 0
    // expected-note @+1 {{actor 1 waits here for actor 0}}
    flexpipe.fwd stage 1 mb 1
    flexpipe.fwd stage 1 mb 3
    flexpipe.bwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 2
    flexpipe.bwd stage 1 mb 3
  }
}

// -----

// A schedule with its transfers: refused at the first one (it was at the
// schedule).
flexpipe.schedule @transfers actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+1 {{actor 0 has an op of kind 'send_act'; gradient separation works on programs of computations and blocking collectives}}
    flexpipe.send_act stage 0 mb 0 to 1
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
