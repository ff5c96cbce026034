// RUN: flexpipe-opt %s -split-input-file -flexpipe-simulate -verify-diagnostics
// RUN: flexpipe-opt %s -split-input-file -flexpipe-convert-to-emitc -verify-diagnostics

// Schedules the verifier rejects are neither simulated (they got impossible
// figures: a backward before its forward held no memory, a compute-only
// schedule had no waits) nor lowered to rank programs (which would hang).

flexpipe.schedule @backward_first actors(1) stages(1) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first, last>] {
  flexpipe.actor 0 {
    // expected-error @+1 {{bwd stage 0 mb 0 on actor 0 runs before the fwd of stage 0 mb 0; every dependency must be satisfied in program order}}
    flexpipe.bwd stage 0 mb 0
    flexpipe.fwd stage 0 mb 0
  }
}

// -----

flexpipe.schedule @compute_only actors(2) stages(2) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+1 {{bwd stage 0 mb 0 on actor 0 runs before the gradient from stage 1 mb 0 is computed or received here}}
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Each actor waits for the other's message before sending its own.
flexpipe.schedule @deadlock actors(2) stages(2) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
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
