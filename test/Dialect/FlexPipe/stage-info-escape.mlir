// A stage_info's module name is printed escaped, so printed IR parses again
// (a module named g"m printed "g"m", which did not).

// RUN: flexpipe-opt %s | flexpipe-opt | FileCheck %s
// CHECK: stage_info [#flexpipe.stage_info<"g\22m\\x\0Ay", 2, first, last>]

flexpipe.schedule @s actors(1) stages(1) microbatches(1) stage_info [#flexpipe.stage_info<"g\"m\\x\ny", 2, first, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}
