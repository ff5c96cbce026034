// RUN: flexpipe-opt %s -flexpipe-simulate="model=%S/../../configs/models/tiny.yaml cluster=%S/../../configs/clusters/cpu.yaml" -verify-diagnostics
// RUN: not flexpipe-opt %s -flexpipe-simulate=model=%S/../../configs/models/tiny.yaml 2>&1 | FileCheck %s
// RUN: printf 'name: x\nlayers: 0x\n' > %t.yaml
// RUN: not flexpipe-opt %s -flexpipe-simulate="model=%t.yaml cluster=%S/../../configs/clusters/cpu.yaml" 2>&1 | FileCheck %s --check-prefix=FILE -DYAML=%t.yaml
// RUN: not flexpipe-opt %s -flexpipe-schedule="model=%t.missing cluster=%S/../../configs/clusters/cpu.yaml" 2>&1 | FileCheck %s --check-prefix=MISSING -DYAML=%t.missing

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

// Tests a fault in a file: reported where the file has it (with its line),
// not at the module.
// FILE: [[YAML]]:2:1: error: -flexpipe-simulate: unknown key 'layers' in the model file
// FILE-NEXT: layers: 0x
// FILE-NOT: see current operation
// MISSING: [[YAML]]:0:0: error: -flexpipe-schedule: cannot read the file:
// MISSING-NOT: see current operation
