// RUN: flexpipe-opt %s -split-input-file -flexpipe-partition="balance=cost model=%configs/models/tiny.yaml" -verify-diagnostics | FileCheck %s

// The model file says how big the model is, and prices the stages: its
// sizes balance them, not the spec's model<...> (a 1M-token vocabulary
// here, which made the last stage a layer short, 2-2-3-1, while the
// 256-token file balances 2-2-2-2).
// CHECK-LABEL: flexpipe.pipeline @file_sizes
// CHECK: partition [2, 2, 2, 2]
flexpipe.pipeline @file_sizes actors(4) microbatches(4) {
  flexpipe.module @gpt layers(8) placement(one_to_one) model<hidden = 64, heads = 4, seq = 32, vocab = 1000000>
}

// -----

// A spec written for a model of another size: scheduled with the file's
// costs, it was refused only where an optimization or the simulator priced
// it (flexpipe-compile writes the file's count into the spec).
// expected-error @+2 {{'flexpipe.module' op has layers(16), but the model file's module 'gpt' has 8; write the file's count (flexpipe-compile --model does) or use the file the spec was written for}}
flexpipe.pipeline @other_size actors(2) microbatches(2) {
  flexpipe.module @gpt layers(16) placement(one_to_one)
}
