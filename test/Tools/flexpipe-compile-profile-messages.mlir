// A profile prices every message when it has `messages`, also an empty
// list, or `default_message_s`, also 0 (docs/CostModel.md): a pair not
// listed takes default_message_s, 0 without it. `messages: []` read as no
// key left the messages to the cluster's links, 0.5 s each here.

// RUN: split-file %s %t
// With neither key the links price them: seconds.
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %configs/models/tiny.yaml --cluster %t/slow-links.yaml --profile %t/none.yaml --emit=report | FileCheck %s --check-prefix=LINKS
// LINKS: iteration time 8.033 s,
// An empty list: every message is free, 1F1B on 4 actors at 1 + 2 ms per
// stage takes (8 + 3) x 3 ms.
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %configs/models/tiny.yaml --cluster %t/slow-links.yaml --profile %t/empty.yaml --emit=report | FileCheck %s --check-prefix=EMPTY
// EMPTY: iteration time 33.000 ms,
// An empty list beside default_message_s: every message takes the default.
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %configs/models/tiny.yaml --cluster %t/slow-links.yaml --profile %t/empty-default.yaml --emit=report | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: iteration time 49.000 ms,

//--- slow-links.yaml
devices: 4
devices_per_node: 4
peak_flops: 50e9
efficiency: 0.5
memory_bytes: 4294967296
intra_node: {bandwidth_bytes_per_s: 5e9, latency_s: 0.5}
inter_node: {bandwidth_bytes_per_s: 1e9, latency_s: 0.5}
//--- none.yaml
stages:
  - {stage: 0, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 1, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 2, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 3, fwd_s: 1e-3, bwd_s: 2e-3}
//--- empty.yaml
stages:
  - {stage: 0, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 1, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 2, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 3, fwd_s: 1e-3, bwd_s: 2e-3}
messages: []
//--- empty-default.yaml
stages:
  - {stage: 0, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 1, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 2, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 3, fwd_s: 1e-3, bwd_s: 2e-3}
messages: []
default_message_s: 1e-3
