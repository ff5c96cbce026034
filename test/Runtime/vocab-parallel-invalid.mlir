// RUN: flexpipe-opt %s -flexpipe-convert-to-emitc -split-input-file -verify-diagnostics

// Tests that a shared stage holding transformer layers is rejected: the
// runtime shares only the vocabulary-parallel embedding and head.
// expected-error @+1 {{'flexpipe.schedule' op shares stage 1 (4 layers, last) between actors; the runtime runs only a vocabulary-parallel token embedding (0 layers, first) or LM head (0 layers, last) as a shared stage}}
flexpipe.schedule @layers actors(2) stages(2) microbatches(1) edges [0 -> 1] shared [1]
    stage_info [#flexpipe.stage_info<"gpt", 4, first>, #flexpipe.stage_info<"gpt", 4, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Tests that a shared stage that is both first and last is rejected.
// expected-error @+1 {{'flexpipe.schedule' op shares stage 0 (0 layers, first, last) between actors; the runtime runs only a vocabulary-parallel token embedding (0 layers, first) or LM head (0 layers, last) as a shared stage}}
flexpipe.schedule @both actors(2) stages(1) microbatches(1) shared [0]
    stage_info [#flexpipe.stage_info<"gpt", 0, first, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 0 mb 0
  }
}

// -----

// Tests that a vocabulary-parallel stage must run on at least two actors.
// expected-error @+1 {{'flexpipe.schedule' op shares stage 0, but only one actor runs its computations; a vocabulary-parallel stage needs at least two}}
flexpipe.schedule @alone actors(2) stages(2) microbatches(1) edges [0 -> 1] shared [0]
    stage_info [#flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 8, last>] {
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

// Tests that the embedding and the head cannot follow each other directly.
// expected-error @+1 {{'flexpipe.schedule' op connects shared stages 0 and 1; a vocabulary-parallel embedding and head need a transformer stage between them}}
flexpipe.schedule @adjacent actors(2) stages(2) microbatches(1) edges [0 -> 1] shared [0, 1]
    stage_info [#flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 0, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 0 mb 0
  }
}

// -----

// Tests that the stage feeding a vocabulary-parallel head holds no head.
// expected-error @+1 {{'flexpipe.schedule' op feeds vocabulary-parallel head 1 from stage 0, which is marked last and so holds a head itself}}
flexpipe.schedule @two_heads actors(2) stages(2) microbatches(1) edges [0 -> 1] shared [1]
    stage_info [#flexpipe.stage_info<"gpt", 8, first, last>, #flexpipe.stage_info<"gpt", 0, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.fwd stage 1 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
  }
}

// -----

// Tests that an all-gather outside a vocabulary-parallel head is rejected.
flexpipe.schedule @gather_elsewhere actors(2) stages(2) microbatches(1) edges [0 -> 1]
    stage_info [#flexpipe.stage_info<"gpt", 4, first>, #flexpipe.stage_info<"gpt", 4, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    // expected-error @+1 {{'flexpipe.all_gather' op cannot be lowered: stage 0 is neither a vocabulary-parallel LM head (a shared stage with 0 layers and last) nor the sync stage of a two-tower model (0 layers, neither first nor last, a module of its own), whose all-gathers the runtime runs}}
    flexpipe.all_gather stage 0 mb 0 group [0, 1]
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.all_gather stage 0 mb 0 group [0, 1]
  }
}

// -----

// Tests that the all-gather of a head names exactly the actors that run it.
flexpipe.schedule @wrong_group actors(3) stages(3) microbatches(1) edges [0 -> 1, 1 -> 2] shared [2]
    stage_info [#flexpipe.stage_info<"gpt", 4, first>, #flexpipe.stage_info<"gpt", 4>, #flexpipe.stage_info<"gpt", 0, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.fwd stage 2 mb 0
    // expected-error @+1 {{'flexpipe.all_gather' op gathers in a group other than the actors that run stage 2; list exactly them, in ascending order}}
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.fwd stage 2 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
  }
  flexpipe.actor 2 {
    flexpipe.fwd stage 2 mb 0
  }
}

// -----

// Tests that gather is still rejected.
flexpipe.schedule @gather actors(2) stages(1) microbatches(1)
    stage_info [#flexpipe.stage_info<"gpt", 8, first, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+1 {{'flexpipe.gather' op cannot be lowered yet: the runtime runs computations, point-to-point transfers and the all-gathers of vocabulary-parallel heads and of two-tower sync stages}}
    flexpipe.gather stage 0 mb 0 group [0, 1] root 0
  }
  flexpipe.actor 1 {
    flexpipe.gather stage 0 mb 0 group [0, 1] root 0
  }
}
