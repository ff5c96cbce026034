// What the runtime cannot run is diagnosed at the op or schedule, and the
// lowering stops.

// RUN: flexpipe-opt --flexpipe-convert-to-emitc --split-input-file --verify-diagnostics %s

// expected-error @below {{does not say what its stages hold (no stage_info): compile it from a spec, give it a stage_info, or let flexpipe-compile --model split a one-module model evenly over its stages}}
flexpipe.schedule @bare actors(1) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// Two modules without a sync stage are neither the GPT nor two towers.
// expected-error @below {{has modules 'a', 'b' and 0 registered sync stage(s)}}
flexpipe.schedule @two actors(2) stages(2) microbatches(1) stage_info [#flexpipe.stage_info<"a", 1, first, last>, #flexpipe.stage_info<"b", 1, first, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// A shared stage must be a vocabulary-parallel embedding or head.
// expected-error @below {{shares stage 0 (1 layers, first) between actors}}
flexpipe.schedule @shared actors(2) stages(2) microbatches(1) shared [0] stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// -----

// Tests more layers along the stages than a model may have (each stage
// within the limit; the description's block indices are ints).
// expected-error @+1 {{'flexpipe.schedule' op holds 2097152 layers along its stages; a model may have at most 1048576}}
flexpipe.schedule @too_deep actors(2) stages(2) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1048576, first>, #flexpipe.stage_info<"gpt", 1048576, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
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

// -----

// The runtime's reader checks the description on every backend: first and
// last swapped lowered for the CPU and every rank refused it at start.
// expected-error @below {{has a runtime description its reader refuses: schedule description: stage 0 is not a first stage but no edge leads to it}}
flexpipe.schedule @swapped actors(2) stages(2) microbatches(1) edges [0 -> 1] stage_info [#flexpipe.stage_info<"gpt", 4, last>, #flexpipe.stage_info<"gpt", 4, first>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
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

// -----

// Copies of a block must be summable: here the up direction is cut 3 + 1
// and the down one 2 + 2, so no stage is another's copy and every rank
// trained its blocks apart from the other's, without a word.
// expected-error @below {{block 0 is held by stages 0 (actor 0) and 2 (actor 1), whose gradients would never be summed: copies of a piece must sit on one actor, or be one stage and its copy on another actor (the same blocks, first and last), or, vocabulary-parallel, be split over the same actors}}
flexpipe.schedule @uneven_directions actors(2) stages(4) microbatches(2) edges [0 -> 1, 2 -> 3] stage_info [#flexpipe.stage_info<"gpt", 2, first>, #flexpipe.stage_info<"gpt", 2, last>, #flexpipe.stage_info<"gpt", 3, first>, #flexpipe.stage_info<"gpt", 1, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_act stage 3 mb 1 from 1
    flexpipe.fwd stage 3 mb 1
    flexpipe.bwd stage 3 mb 1
    flexpipe.send_grad stage 3 mb 1 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 2 mb 1
    flexpipe.send_act stage 2 mb 1 to 0
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.recv_grad stage 2 mb 1 from 0
    flexpipe.bwd stage 2 mb 1
  }
}

// -----

// A direction given no micro-batches: no program computes stages 2 and 3
// (the reader refused the description as "stage 2 names actor -1").
// expected-error @below {{computes stage 2 on no actor (no program computes it), and the runtime holds each stage on an actor: give its direction micro-batches, or drop the stage}}
flexpipe.schedule @idle_direction actors(2) stages(4) microbatches(1) edges [0 -> 1, 2 -> 3] stage_info [#flexpipe.stage_info<"gpt", 2, first>, #flexpipe.stage_info<"gpt", 2, last>, #flexpipe.stage_info<"gpt", 2, first>, #flexpipe.stage_info<"gpt", 2, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
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
