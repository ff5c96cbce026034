// RUN: flexpipe-opt %s -split-input-file -flexpipe-verify-schedule -verify-diagnostics

// A vocabulary-parallel stage's slices (shared [...]): what takes the
// stage's output or gradient needs every slice, its own and the others'
// messages. The verifier took the actor's own slice for the whole input:
// these programs passed and stopped at run time ("has 1 of its 2 input
// parts"), or, with an asynchronous receive, trained on a half-filled
// buffer.

// As the scheduler writes it (2 actors, the embedding and head split):
// valid.
flexpipe.schedule @vp actors(2) stages(4) microbatches(1) edges [0 -> 1, 2 -> 0, 1 -> 3] shared [2, 3] stage_info [#flexpipe.stage_info<"gpt", 1>, #flexpipe.stage_info<"gpt", 1>, #flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 0, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 2 mb 0
    flexpipe.recv_act stage 0 mb 0 from 1
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_act stage 3 mb 0 from 1
    flexpipe.fwd stage 3 mb 0
    flexpipe.all_gather stage 3 mb 0 group [0, 1]
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
    flexpipe.all_gather stage 3 mb 0 group [0, 1]
    flexpipe.bwd stage 3 mb 0
    flexpipe.recv_grad stage 1 mb 0 from 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.recv_grad stage 2 mb 0 from 0
    flexpipe.bwd stage 2 mb 0
  }
}

// -----

// The first layers run before the other embedding slice arrives.
flexpipe.schedule @vp actors(2) stages(4) microbatches(1) edges [0 -> 1, 2 -> 0, 1 -> 3] shared [2, 3] stage_info [#flexpipe.stage_info<"gpt", 1>, #flexpipe.stage_info<"gpt", 1>, #flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 0, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 2 mb 0
    // expected-error @below {{fwd stage 0 mb 0 on actor 0 runs before the activation of stage 2 mb 0 (the slice of actor 1) is computed or received here}}
    flexpipe.fwd stage 0 mb 0
    flexpipe.recv_act stage 0 mb 0 from 1
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_act stage 3 mb 0 from 1
    flexpipe.fwd stage 3 mb 0
    flexpipe.all_gather stage 3 mb 0 group [0, 1]
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
    flexpipe.all_gather stage 3 mb 0 group [0, 1]
    flexpipe.bwd stage 3 mb 0
    flexpipe.recv_grad stage 1 mb 0 from 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.recv_grad stage 2 mb 0 from 0
    flexpipe.bwd stage 2 mb 0
  }
}

// -----

// The last layers' backward runs before the other head slice's gradient
// arrives.
flexpipe.schedule @vp actors(2) stages(4) microbatches(1) edges [0 -> 1, 2 -> 0, 1 -> 3] shared [2, 3] stage_info [#flexpipe.stage_info<"gpt", 1>, #flexpipe.stage_info<"gpt", 1>, #flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 0, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 2 mb 0
    flexpipe.recv_act stage 0 mb 0 from 1
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_act stage 3 mb 0 from 1
    flexpipe.fwd stage 3 mb 0
    flexpipe.all_gather stage 3 mb 0 group [0, 1]
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
    flexpipe.all_gather stage 3 mb 0 group [0, 1]
    flexpipe.bwd stage 3 mb 0
    // expected-error @below {{bwd stage 1 mb 0 on actor 1 runs before the gradient from stage 3 mb 0 (the slice of actor 0) is computed or received here}}
    flexpipe.bwd stage 1 mb 0
    flexpipe.recv_grad stage 1 mb 0 from 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.recv_grad stage 2 mb 0 from 0
    flexpipe.bwd stage 2 mb 0
  }
}

// -----

// The head's all_gather before the head's forward on one actor: there
// is nothing to exchange yet (it stopped the run).
flexpipe.schedule @vp actors(2) stages(4) microbatches(1) edges [0 -> 1, 2 -> 0, 1 -> 3] shared [2, 3] stage_info [#flexpipe.stage_info<"gpt", 1>, #flexpipe.stage_info<"gpt", 1>, #flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 0, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 2 mb 0
    flexpipe.recv_act stage 0 mb 0 from 1
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_act stage 3 mb 0 from 1
    flexpipe.fwd stage 3 mb 0
    flexpipe.all_gather stage 3 mb 0 group [0, 1]
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
    // expected-error @below {{all_gather stage 3 mb 0 on actor 1 runs before the fwd of stage 3 mb 0, whose loss statistics it exchanges}}
    flexpipe.all_gather stage 3 mb 0 group [0, 1]
    flexpipe.fwd stage 3 mb 0
    flexpipe.bwd stage 3 mb 0
    flexpipe.recv_grad stage 1 mb 0 from 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.recv_grad stage 2 mb 0 from 0
    flexpipe.bwd stage 2 mb 0
  }
}
