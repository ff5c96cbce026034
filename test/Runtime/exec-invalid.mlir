// RUN: flexpipe-opt %s -flexpipe-convert-to-emitc -split-input-file -verify-diagnostics

// Tests that an attribute the runtime cannot pass is rejected at its exec.
module {
  flexpipe.schedule @arrays actors(1) stages(1) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first, last>] {
    flexpipe.actor 0 {
      flexpipe.fwd stage 0 mb 0
      // expected-error @+1 {{'flexpipe.exec' op has attribute 'ranks' = [0, 1], which the runtime cannot pass to operation @log_norms; runtime attributes are strings, integers, floats, booleans and unit attributes}}
      flexpipe.exec @log_norms stage 0 mb 0 attrs {file = "norms.txt", ranks = [0, 1]}
      flexpipe.bwd stage 0 mb 0
    }
  }
}

// -----

// Tests that an integer beyond int64_t is rejected.
module {
  flexpipe.schedule @wide actors(1) stages(1) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first, last>] {
    flexpipe.actor 0 {
      flexpipe.fwd stage 0 mb 0
      // expected-error @+1 {{'flexpipe.exec' op has attribute 'seed' = 18446744073709551615 : ui64, which does not fit in 64 signed bits; the runtime passes integers as int64_t}}
      flexpipe.exec @log_norms stage 0 mb 0 attrs {seed = 18446744073709551615 : ui64}
      flexpipe.bwd stage 0 mb 0
    }
  }
}

// -----

// Tests that an instruction name FLEXPIPE_OPERATION cannot register is
// rejected.
module {
  flexpipe.schedule @spaced actors(1) stages(1) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first, last>] {
    flexpipe.actor 0 {
      flexpipe.fwd stage 0 mb 0
      // expected-error @+1 {{'flexpipe.exec' op runs instruction 'log norms', a name the runtime cannot bind an operation to; name the instruction with letters, digits, '_', '.' and '-', starting with a letter or '_'}}
      flexpipe.exec @"log norms" stage 0 mb 0
      flexpipe.bwd stage 0 mb 0
    }
  }
}

// -----

// Tests that gather is still rejected (exec no longer is).
module {
  flexpipe.schedule @gathers actors(2) stages(2) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
    flexpipe.actor 0 {
      flexpipe.fwd stage 0 mb 0
      flexpipe.exec @log_norms stage 0 mb 0
      flexpipe.send_act stage 0 mb 0 to 1
      flexpipe.recv_grad stage 0 mb 0 from 1
      flexpipe.bwd stage 0 mb 0
    }
    flexpipe.actor 1 {
      flexpipe.recv_act stage 1 mb 0 from 0
      flexpipe.fwd stage 1 mb 0
      // expected-error @+1 {{'flexpipe.gather' op cannot be lowered yet: the runtime runs computations, point-to-point transfers and the all-gathers of vocabulary-parallel heads and of two-tower sync stages}}
      flexpipe.gather stage 1 mb 0 group [0, 1] root 1
      flexpipe.bwd stage 1 mb 0
      flexpipe.send_grad stage 1 mb 0 to 0
    }
  }
}

// -----

// Tests that a gather of a module-less stage beside one module gets the
// same refusal: there are no towers to join.
module {
  flexpipe.schedule @one_module_sync actors(2) stages(3) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>, #flexpipe.stage_info<"sync", 0>] {
    flexpipe.actor 0 {
      flexpipe.fwd stage 0 mb 0
      flexpipe.send_act stage 0 mb 0 to 1
      // expected-error @+1 {{'flexpipe.gather' op cannot be lowered yet: the runtime runs computations, point-to-point transfers and the all-gathers of vocabulary-parallel heads and of two-tower sync stages}}
      flexpipe.gather stage 2 mb 0 group [0, 1] root 0
      flexpipe.recv_grad stage 0 mb 0 from 1
      flexpipe.bwd stage 0 mb 0
    }
    flexpipe.actor 1 {
      flexpipe.recv_act stage 1 mb 0 from 0
      flexpipe.fwd stage 1 mb 0
      flexpipe.gather stage 2 mb 0 group [0, 1] root 0
      flexpipe.bwd stage 1 mb 0
      flexpipe.send_grad stage 1 mb 0 to 0
    }
  }
}
