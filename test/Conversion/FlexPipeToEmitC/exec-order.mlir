// The description lists exec instances by actor id, each actor's in program
// order, whatever order the schedule lists its actor regions in (they
// followed the regions: actor 1's came first here).

// RUN: flexpipe-opt --flexpipe-convert-to-emitc %s | FileCheck %s
// CHECK: exec probe stage 0 actor 0 mb 0 count 1 outputs 0\0Aexec probe stage 1 actor 1 mb 0 count 1 outputs 0\0A

flexpipe.schedule @reversed actors(2) stages(2) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 4, first>, #flexpipe.stage_info<"gpt", 4, last>] {
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.exec @probe stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.exec @probe stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
}
