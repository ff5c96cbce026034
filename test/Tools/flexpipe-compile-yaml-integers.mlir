// Integer keys are numbers too: at most 1e18, as docs/CostModel.md says of
// every number (devices_per_node, cores_per_node, a contention point's
// ranks, a measured layer's micro_batch and a profile's stage and actors
// took up to 9223372036854775807). Refused where they stand, with the key.

// RUN: split-file %s %t
// RUN: sed 's/devices_per_node: 2/devices_per_node: 9223372036854775807/' %t/cluster.yaml > %t/per-node.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/per-node.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=PERNODE
// PERNODE: per-node.yaml:2:19: error: key 'devices_per_node' must be at most 1000000000000000000, got 9223372036854775807
// RUN: sed 's/cores_per_node: 2/cores_per_node: 1000000000000000001/' %t/cluster.yaml > %t/cores.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/cores.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=CORES
// CORES: cores.yaml:9:19: error: key 'cores_per_node' must be at most 1000000000000000000, got 1000000000000000001
// RUN: sed 's/ranks: 2,/ranks: 9223372036854775807,/' %t/cluster.yaml > %t/ranks.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/ranks.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=RANKS
// RANKS: ranks.yaml:12:15: error: key 'ranks' must be at most 1000000000000000000, got 9223372036854775807
// RUN: sed 's/micro_batch: 2,/micro_batch: 9223372036854775807,/' %t/cluster.yaml > %t/micro-batch.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/micro-batch.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=MICROBATCH
// MICROBATCH: micro-batch.yaml:15:65: error: key 'micro_batch' must be at most 1000000000000000000, got 9223372036854775807
// Digits past what 64 bits hold are out of range too, not "no integer".
// RUN: sed 's/cores_per_node: 2/cores_per_node: 99999999999999999999/' %t/cluster.yaml > %t/cores-wide.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/cores-wide.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=WIDE
// WIDE: cores-wide.yaml:9:19: error: key 'cores_per_node' must be at most 1000000000000000000, got 99999999999999999999
// RUN: sed 's/stage: 1,/stage: 9223372036854775807,/' %t/profile.yaml > %t/stage.yaml
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/stage.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=STAGE
// STAGE: stage.yaml:3:13: error: key 'stage' must be at most 1000000000000000000, got 9223372036854775807
// RUN: sed 's/to: 1,/to: 9223372036854775807,/' %t/profile.yaml > %t/to.yaml
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/to.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=TO
// TO: to.yaml:5:19: error: key 'to' must be at most 1000000000000000000, got 9223372036854775807
// RUN: sed 's/from: 0,/from: -99999999999999999999,/' %t/profile.yaml > %t/from.yaml
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/from.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=FROM
// FROM: from.yaml:5:12: error: key 'from' must be at least 0, got -99999999999999999999

// 1e18 itself is in range; the files as written are fine.
// RUN: sed 's/devices_per_node: 2/devices_per_node: 1000000000000000000/' %t/cluster.yaml > %t/largest.yaml
// RUN: flexpipe-compile %t/spec.mlir --model %t/model.yaml --cluster %t/largest.yaml --emit=report | FileCheck %s --check-prefix=GOOD
// RUN: flexpipe-compile %t/spec.mlir --profile %t/profile.yaml --emit=report | FileCheck %s --check-prefix=GOOD
// GOOD: iteration time

//--- spec.mlir
flexpipe.pipeline @p actors(2) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
}
//--- model.yaml
global_batch_size: 8
micro_batch_size: 1
modules:
  - {name: gpt, layers: 4, hidden: 64, heads: 4, seq: 32, vocab: 256}
//--- cluster.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
measured:
  cores_per_node: 2
  contention:
    - {ranks: 1, slowdown: 1}
    - {ranks: 2, slowdown: 1.1}
  layers:
    - {kind: block, hidden: 64, seq: 32, heads: 4, micro_batch: 1, fwd_s: 1e-3, igrad_s: 1e-3, wgrad_s: 1e-3}
    - {kind: block, hidden: 64, seq: 32, heads: 4, micro_batch: 2, fwd_s: 2e-3, igrad_s: 2e-3, wgrad_s: 2e-3}
//--- profile.yaml
stages:
  - {stage: 0, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 1, fwd_s: 1e-3, bwd_s: 2e-3}
messages:
  - {from: 0, to: 1, seconds: 1e-4}
