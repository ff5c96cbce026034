// Durations are FLOPs / (peak_flops x efficiency), the product as it is
// (docs/CostModel.md): at peak_flops 1, the least a file may give, an
// efficiency of 0.5 takes twice as long as 1 and 0.01 a hundred times. (A
// floor of 1 FLOP/s on the product gave all three 115146752 s.) An
// efficiency so small that the durations would overflow is refused.

// RUN: split-file %s %t
// RUN: flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/peak1.yaml --emit=report | FileCheck %s --check-prefix=FULL
// FULL: iteration time 115146752.000 s,
// RUN: sed 's/efficiency: 1$/efficiency: 0.5/' %t/peak1.yaml > %t/half.yaml
// RUN: flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/half.yaml --emit=report | FileCheck %s --check-prefix=HALF
// HALF: iteration time 230293504.000 s,
// RUN: sed 's/efficiency: 1$/efficiency: 0.01/' %t/peak1.yaml > %t/hundredth.yaml
// RUN: flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/hundredth.yaml --emit=report | FileCheck %s --check-prefix=HUNDREDTH
// HUNDREDTH: iteration time 11514675200.000 s,

// 1e-300 priced the iteration at inf s once the product was used as is.
// RUN: sed 's/efficiency: 1$/efficiency: 1e-300/' %t/peak1.yaml > %t/tiny.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/tiny.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=TINY
// TINY: tiny.yaml:4:13: error: key 'efficiency' must be at least 1e-18, got 1e-300
// RUN: sed 's/efficiency: 1$/efficiency: 0/' %t/peak1.yaml > %t/zero.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/zero.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: zero.yaml:4:13: error: key 'efficiency' must be at least 1e-18, got 0

//--- spec.mlir
flexpipe.pipeline @p actors(2) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
}
//--- model.yaml
global_batch_size: 4
micro_batch_size: 1
modules:
  - {name: gpt, layers: 4, hidden: 64, heads: 4, seq: 32, vocab: 256}
//--- peak1.yaml
devices: 2
devices_per_node: 2
peak_flops: 1
efficiency: 1
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
