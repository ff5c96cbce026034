// RUN: flexpipe-opt %s -flexpipe-verify-schedule | FileCheck %s --check-prefix=TAGGED
// RUN: flexpipe-opt %s -split-input-file -flexpipe-verify-schedule=channels=pair -verify-diagnostics
// RUN: not flexpipe-opt %s -flexpipe-verify-schedule=channels=tag 2>&1 | FileCheck %s --check-prefix=BAD

// Tagged runtimes (the default) tell the two messages apart: valid.
// TAGGED: flexpipe.schedule @swapped
// BAD: for the --channels option: Cannot find option named 'tag'!

// A V shape over two actors (stages 0 and 3 on actor 0, 1 and 2 on actor 1).
// Untagged, actor 1's second receive from actor 0 takes actor 0's second
// send, the activation of micro-batch 1, not the gradient it was posted for.
flexpipe.schedule @swapped actors(2) stages(4) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    // expected-note @+1 {{the send it would match}}
    flexpipe.send_act stage 0 mb 1 to 1
    flexpipe.recv_act stage 3 mb 0 from 1
    flexpipe.fwd stage 3 mb 0
    flexpipe.bwd stage 3 mb 0
    flexpipe.send_grad stage 3 mb 0 to 1
    flexpipe.recv_act stage 3 mb 1 from 1
    flexpipe.fwd stage 3 mb 1
    flexpipe.bwd stage 3 mb 1
    flexpipe.send_grad stage 3 mb 1 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_grad stage 0 mb 1 from 1
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.fwd stage 2 mb 0
    flexpipe.send_act stage 2 mb 0 to 0
    // expected-error @+1 {{recv_grad stage 2 mb 0 from 0 on actor 1 would receive the message of send_act stage 0 mb 1 to 1 on actor 0: without tags, the receives an actor posts for a peer must come in the order of that peer's sends}}
    flexpipe.recv_grad stage 2 mb 0 from 0
    flexpipe.bwd stage 2 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.recv_act stage 1 mb 1 from 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.fwd stage 2 mb 1
    flexpipe.send_act stage 2 mb 1 to 0
    flexpipe.recv_grad stage 2 mb 1 from 0
    flexpipe.bwd stage 2 mb 1
    flexpipe.bwd stage 1 mb 1
    flexpipe.send_grad stage 1 mb 1 to 0
  }
}

// -----

// Posting the gradient's receive after the activation's fixes it.
flexpipe.schedule @ordered actors(2) stages(2) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    flexpipe.send_act stage 0 mb 1 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_grad stage 0 mb 1 from 1
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    %a = flexpipe.recv_act stage 1 mb 1 from 0 : !flexpipe.token
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.wait %a
    flexpipe.fwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 1
    flexpipe.send_grad stage 1 mb 1 to 0
  }
}
