// RUN: flexpipe-opt %s -flexpipe-simulate="model=%S/../../configs/models/tiny.yaml cluster=%S/../../configs/clusters/cpu.yaml" -verify-diagnostics
// RUN: not flexpipe-opt %s -flexpipe-simulate=model=%S/../../configs/models/tiny.yaml 2>&1 | FileCheck %s

// Tests a model file on a hand-written schedule that does not say what its
// stages hold.
// expected-error @+1 {{the schedule does not say what its stages hold (no stage_info) to price with a model file: schedule it from a spec, give it a stage_info, or let flexpipe-compile --model split a one-module model evenly over its stages}}
flexpipe.schedule @hand actors(1) stages(1) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 0
  }
}

// Tests a model file without a cluster file.
// CHECK: error: -flexpipe-simulate: a model file needs a cluster file (device throughput, memory and links)
