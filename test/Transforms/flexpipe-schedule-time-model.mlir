// RUN: not flexpipe-opt %s -flexpipe-schedule=time-model=fast 2>&1 | FileCheck %s

// CHECK: for the --time-model option: Cannot find option named 'fast'!
flexpipe.pipeline @p actors(1) microbatches(1) {
  flexpipe.module @gpt layers(1) placement(one_to_one)
}
