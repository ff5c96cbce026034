// RUN: flexpipe-opt %s -flexpipe-convert-to-emitc="model=%S/../../configs/models/clip-tiny.yaml" -split-input-file -verify-diagnostics
// RUN: not flexpipe-opt %s -flexpipe-convert-to-emitc -split-input-file 2>&1 | FileCheck %s --check-prefix=NO-MODEL

// The two-tower model (docs/Runtime.md): what the lowering rejects.

// NO-MODEL: error: 'flexpipe.schedule' op is a two-tower model (modules 'image' and 'text'); give the lowering a model file with their sizes (--model)

// Tests that a model of three modules is rejected.
// expected-error @+1 {{'flexpipe.schedule' op has modules 'image', 'text', 'audio' and 1 registered sync stage(s) (0 layers, neither first nor last, a module of their own); the runtime runs one GPT module, or two towers joined by one sync stage}}
flexpipe.schedule @three actors(3) stages(4) microbatches(1) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"audio", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
  flexpipe.actor 2 {
    flexpipe.fwd stage 2 mb 0
    flexpipe.bwd stage 2 mb 0
  }
}

// -----

// Tests that two towers need a sync stage to join them.
// expected-error @+1 {{'flexpipe.schedule' op has modules 'image', 'text' and 0 registered sync stage(s) (0 layers, neither first nor last, a module of their own); the runtime runs one GPT module, or two towers joined by one sync stage}}
flexpipe.schedule @unjoined actors(2) stages(2) microbatches(1) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>] {
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

// Tests that the towers must be the model file's.
// expected-error @+1 {{'flexpipe.schedule' op needs a model file with exactly its two towers, 'image' and 'audio'}}
flexpipe.schedule @audio actors(2) stages(3) microbatches(1) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"audio", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Tests that a tower holds the model file's layers.
// expected-error @+1 {{'flexpipe.schedule' op holds 3 layers in tower 'image' but the model file's has 4}}
flexpipe.schedule @layers actors(2) stages(3) microbatches(1) edges []
    stage_info [#flexpipe.stage_info<"image", 3, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Tests that the towers meet only at the sync stage.
// expected-error @+1 {{'flexpipe.schedule' op connects stage 0 of tower 'image' to stage 1 of tower 'text'; the towers meet only at the sync stage's all-gather}}
flexpipe.schedule @crossing actors(2) stages(3) microbatches(1) edges [0 -> 1]
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Tests that a tower is one pipeline: a bidirectional tower has two first
// stages.
// expected-error @+1 {{'flexpipe.schedule' op has 2 first and 2 last stage(s) in tower 'text'; the runtime runs each tower as one pipeline, with one first and one last stage}}
flexpipe.schedule @bidirectional actors(3) stages(4) microbatches(2) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
  flexpipe.actor 2 {
    flexpipe.fwd stage 2 mb 1
    flexpipe.bwd stage 2 mb 1
  }
}

// -----

// Tests that the towers' last stages run on two actors.
// expected-error @+1 {{'flexpipe.schedule' op runs the last stages of both towers on actor 1; the sync stage's all-gather needs them on two actors}}
flexpipe.schedule @one_end actors(2) stages(5) microbatches(1) edges [0 -> 1, 2 -> 3]
    stage_info [#flexpipe.stage_info<"image", 2, first>, #flexpipe.stage_info<"image", 2, last>, #flexpipe.stage_info<"text", 1, first>, #flexpipe.stage_info<"text", 1, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.fwd stage 2 mb 0
    flexpipe.send_act stage 2 mb 0 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_grad stage 2 mb 0 from 1
    flexpipe.bwd stage 2 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.recv_act stage 3 mb 0 from 0
    flexpipe.fwd stage 3 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.bwd stage 3 mb 0
    flexpipe.send_grad stage 3 mb 0 to 0
  }
}

// -----

// Tests that the sync stage's all-gather joins exactly the towers' last
// actors.
flexpipe.schedule @wrong_group actors(3) stages(3) microbatches(1) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+1 {{'flexpipe.all_gather' op gathers in group [0, 2], but sync stage 2 joins the actors of the towers' last stages, [0, 1]; list exactly them, in ascending order}}
    flexpipe.all_gather stage 2 mb 0 group [0, 2]
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
  flexpipe.actor 2 {
    flexpipe.all_gather stage 2 mb 0 group [0, 2]
  }
}

// -----

// Tests that a micro-batch's all-gather follows its forward.
flexpipe.schedule @early actors(2) stages(3) microbatches(1) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    // expected-error @+1 {{'flexpipe.all_gather' op comes before the fwd of stage 1 mb 0 on actor 1, whose embeddings it exchanges; gather after it}}
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Tests that the backward of a tower's last stage waits for the all-gather.
flexpipe.schedule @unwaited actors(2) stages(3) microbatches(1) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    // expected-note @+1 {{the all-gather of micro-batch 0 is waited for after that backward on actor 1}}
    %t = flexpipe.all_gather stage 2 mb 0 group [0, 1] : !flexpipe.token
    // expected-error @+1 {{'flexpipe.igrad' op runs before the all-gather of sync stage 2 mb 0 has completed (wait for its token) on actor 1; the gradient of the tower's embeddings comes from it}}
    flexpipe.igrad stage 1 mb 0
    flexpipe.wait %t
    flexpipe.wgrad stage 1 mb 0
  }
}

// -----

// Tests that the backward of a tower's last stage needs the all-gather.
flexpipe.schedule @missing actors(2) stages(3) microbatches(1) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+1 {{'flexpipe.bwd' op runs before the all-gather of sync stage 2 mb 0 has run on actor 0; the gradient of the tower's embeddings comes from it}}
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Tests an all-gather that stands for two micro-batches (a sync instruction
// with prev(2) next(2)): said as such (it was reported as a backward
// before its all-gather, though the all-gather ran before it).
flexpipe.schedule @grouped actors(2) stages(3) microbatches(2) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.fwd stage 0 mb 1
    // expected-note @+1 {{the sync stage's all-gathers (actor 0 runs one for micro-batch 0, none for 1)}}
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 0 mb 0
    // expected-error @+1 {{'flexpipe.bwd' op has no all-gather of sync stage 2 mb 1 on actor 0 before it: the runtime exchanges the towers' embeddings one micro-batch per all-gather, and an instruction that groups several (prev(N) or next(N) above 1) is not supported yet; give the sync instruction prev(1) next(1)}}
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 1
  }
}

// -----

// Tests that the sync stage computes nothing.
flexpipe.schedule @computed actors(2) stages(3) microbatches(1) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+1 {{'flexpipe.fwd' op computes sync stage 2, which holds nothing; the towers' last stages compute the loss after its all-gather}}
    flexpipe.fwd stage 2 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.all_gather stage 2 mb 0 group [0, 1]
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Tests that a gather to one actor cannot join the towers.
flexpipe.schedule @gather actors(2) stages(3) microbatches(1) edges []
    stage_info [#flexpipe.stage_info<"image", 4, first, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    // expected-error @+1 {{'flexpipe.gather' op gathers sync stage 2 to one actor, but the contrastive loss needs both towers' embeddings on both towers' last actors; use flexpipe.all_gather}}
    flexpipe.gather stage 2 mb 0 group [0, 1] root 0
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.gather stage 2 mb 0 group [0, 1] root 0
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// Tests that a tower's stages form one chain from its first to its last
// stage.
// expected-error @+1 {{'flexpipe.schedule' op does not chain the stages of tower 'image' from its first stage 0 to its last stage 2 along single edges; the runtime runs each tower as one pipeline}}
flexpipe.schedule @branching actors(4) stages(5) microbatches(1) edges [0 -> 1, 0 -> 2]
    stage_info [#flexpipe.stage_info<"image", 2, first>, #flexpipe.stage_info<"image", 1>, #flexpipe.stage_info<"image", 1, last>, #flexpipe.stage_info<"text", 2, first, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
  }
  flexpipe.actor 2 {
    flexpipe.fwd stage 2 mb 0
    flexpipe.bwd stage 2 mb 0
  }
  flexpipe.actor 3 {
    flexpipe.fwd stage 3 mb 0
    flexpipe.bwd stage 3 mb 0
  }
}
