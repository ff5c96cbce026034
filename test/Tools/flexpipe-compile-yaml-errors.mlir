// Bad model, cluster and profile files: a message naming the file, the line
// and the key, and exit code 1.

// RUN: split-file %s %t
// RUN: not flexpipe-compile %t/spec.mlir --model %t/missing.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not flexpipe-compile %t/spec.mlir --model %t/negative.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not flexpipe-compile %t/spec.mlir --model %t/unknown.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not flexpipe-compile %t/spec.mlir --model %t/batch.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not flexpipe-compile %t/spec.mlir --model %t/type.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=TYPE
// A leading 0 (yaml-cpp reads it as octal: 010 layers were 8):
// RUN: sed 's/heads: many/heads: 010/' %t/type.yaml > %t/octal.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/octal.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=OCTAL
// RUN: sed 's/heads: many/heads: -08/' %t/type.yaml > %t/octal8.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/octal8.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=OCTAL8
// RUN: not flexpipe-compile %t/spec.mlir --model %t/syntax.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not flexpipe-compile %t/spec.mlir --model %t/heads.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not flexpipe-compile %t/spec.mlir --model %t/other.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/efficiency.yaml 2>&1 | FileCheck %s --check-prefix=EFFICIENCY
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/link.yaml 2>&1 | FileCheck %s --check-prefix=LINK
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/profile.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=PROFILE
// A quoted number is a string in YAML (it passed as the number).
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/quoted.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=QUOTED
// A file of one kind given for another: the error says which kind its keys
// are.
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/good-cluster.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=KIND-PROFILE
// RUN: printf 'name: x\n? [a, b]\n: 1\n' > %t/list-key.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/list-key.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=LISTKEY
// A control character: yaml-cpp dropped a NUL byte ("unknown key 'oo'");
// UTF-16 text, which yaml-cpp reads, stays readable.
// RUN: printf 'name: x\n\000foo: 1\n' > %t/nul.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/nul.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=NUL
// RUN: iconv -f UTF-8 -t UTF-16 %t/good-model.yaml > %t/utf16.yaml
// RUN: flexpipe-compile %t/spec.mlir --model %t/utf16.yaml --cluster %t/good-cluster.yaml --emit=report | FileCheck %s --check-prefix=UTF16
// RUN: printf 'stages: []\n? \n: 1\n' > %t/empty-key.yaml
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/empty-key.yaml 2>&1 | FileCheck %s --check-prefix=EMPTYKEY
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-cluster.yaml --cluster %t/good-model.yaml 2>&1 | FileCheck %s --check-prefix=KIND-MODEL
// RUN: not flexpipe-opt %t/spec.mlir '-flexpipe-spec-to-schedule=model=%t/good-model.yaml cluster=%t/profile.yaml' 2>&1 | FileCheck %s --check-prefix=KIND-CLUSTER
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml 2>&1 | FileCheck %s --check-prefix=NOCLUSTER
// RUN: flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/good-cluster.yaml --emit=report | FileCheck %s --check-prefix=GOOD
// Infinite, NaN and absurd numbers would overflow the simulation (and used to
// hang the SVG writer): refused, and no file is left behind.
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/inf.yaml --emit=svg -o %t/inf.svg 2>&1 | FileCheck %s --check-prefix=INF
// RUN: not test -e %t/inf.svg
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/huge.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=HUGE
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/nan.yaml --emit=trace 2>&1 | FileCheck %s --check-prefix=NAN
// RUN: not flexpipe-compile %t/spec.mlir --model %t/twice.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not flexpipe-compile %t/spec.mlir --model %t/attention.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=ATTENTION
// Flash attention keeps no scores, only a log-sum-exp per query row and
// head: per layer s h 34 + 4 a s bytes (bf16) instead of s h (34 + 5 a s / h),
// 70144 instead of 90112 bytes; the LM head's 49152 and the embedding's 4096
// stay; actor 0 holds 3 micro-batches at its peak. With flash attention a
// layer's weight-gradient state (20 s h values, 81920 bytes) outweighs its
// activations: between the halves of a backward, actor 0 holds
// 2 x 11776 more than the 3 micro-batches (433152), actor 1 3072 more (its
// head's state is 20480 under its logits and softmax).
// RUN: flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/good-cluster.yaml --emit=cpp -o %t/materialized > /dev/null
// RUN: flexpipe-compile %t/spec.mlir --model %t/flash.yaml --cluster %t/good-cluster.yaml --emit=cpp -o %t/flash > /dev/null
// RUN: cat %t/materialized/schedule.txt %t/flash/schedule.txt | FileCheck %s --check-prefix=FLASH
// RUN: not flexpipe-tune --model %t/good-model.yaml --cluster %t/inf.yaml -o %t/tune-inf 2>&1 | FileCheck %s --check-prefix=INF

// Measurements that would price something at no time or a negative one.
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/negative-wgrad.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=NEGW
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/self-message.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=SELF
// RUN: not flexpipe-compile %t/spec.mlir --profile %t/message-twice.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=MSGTWICE
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/layer-twice.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=LAYERTWICE
// Sizes past what a schedule may have, and an empty file (located at its
// start).
// RUN: not flexpipe-compile %t/spec.mlir --model %t/many-layers.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=LAYERS
// RUN: not flexpipe-compile %t/spec.mlir --model %t/huge-hidden.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=HIDDEN
// RUN: not flexpipe-tune --model %t/good-model.yaml --cluster %t/many-devices.yaml -o %t/tune-many 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not flexpipe-compile %t/spec.mlir --model %t/empty.yaml --cluster %t/good-cluster.yaml 2>&1 | FileCheck %s --check-prefix=EMPTYFILE
// Keys and documents that would be ignored without a word, and a memory
// below one byte.
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/two-documents.yaml 2>&1 | FileCheck %s --check-prefix=TWODOCS
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/block-vocab.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=BLOCKVOCAB
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/head-heads.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=HEADHEADS
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/tiny-memory.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=TINYMEM
// A profile's default_message_s of 0 is a figure (free messages), not
// "none given": 1F1B on 4 actors at 1 + 2 ms per stage takes (8 + 3) x 3 ms,
// where the cluster's links priced the messages before (33.058 ms).
// RUN: flexpipe-compile %schedules/1f1b.mlir --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --profile %t/free-messages.yaml --emit=report | FileCheck %s --check-prefix=FREEMSG
// FREEMSG: iteration time 33.000 ms
// A time slice shorter than any OS scheduler's would take an event per
// slice (it hung the simulator at 1e-300); 0 turns taking turns off.
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/short-slice.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=SLICE
// SLICE: short-slice.yaml:10:17: error: key 'time_slice_s' must be 0 (cores shared without turns) or at least 0.0001 s (OS schedulers give milliseconds), got 1e-300
// A contention slowdown under 1 (computing beside others faster than
// alone) is refused as the docs say; it made the optimizer step read 0.
// RUN: sed 's/time_slice_s: 1e-300/contention: [{ranks: 1, slowdown: 1e-18}]/' %t/short-slice.yaml > %t/fast-contention.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/fast-contention.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=SLOWDOWN
// SLOWDOWN: fast-contention.yaml:10:37: error: key 'slowdown' must be at least 1, got 1e-18
// A contention point's shape is held to a model's (hidden 65 over 4 heads,
// and hidden 1e18, were read):
// RUN: sed 's/time_slice_s: 1e-300/contention: [{ranks: 1, slowdown: 2, hidden: 65, heads: 4, seq: 32}]/' %t/short-slice.yaml > %t/shaped-contention.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/shaped-contention.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=SHAPED
// SHAPED: shaped-contention.yaml:10:48: error: a contention point: hidden 65 is not a multiple of heads 4
// RUN: sed 's/1e-300/0/' %t/short-slice.yaml > %t/no-slice.yaml
// RUN: flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/no-slice.yaml --emit=report > /dev/null
// A hand-over as long as the slice: each turn lost what it gained, the
// simulation ended with computations unfinished and reported the rest
// (20x faster for a higher cost, exit 0). Refused where the file says it,
// also where the largest contention slowdown leaves less than the
// hand-over done in a slice (1 ms / 1.2 = 0.83 ms), and by the simulation
// where the layout gives a computation less of the core (2 simulated
// actors of 4 ranks on 1 core: half of it, 0.5 ms a slice).
// RUN: sed 's/1e-300/1e-3/' %t/short-slice.yaml > %t/long-handoff.yaml
// RUN: echo '  handoff_s: 1e-3' >> %t/long-handoff.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/long-handoff.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=HANDOFF
// HANDOFF: long-handoff.yaml:11:14: error: key 'handoff_s' must be below time_slice_s (0.001 s), got 0.001: a computation would lose each slice it gets to the hand-over
// RUN: sed 's/1e-300/1e-3/' %t/short-slice.yaml > %t/slow-handoff.yaml
// RUN: echo '  handoff_s: 0.9e-3' >> %t/slow-handoff.yaml
// RUN: echo '  contention: [{ranks: 1, slowdown: 1}, {ranks: 2, slowdown: 1.2}]' >> %t/slow-handoff.yaml
// RUN: not flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/slow-handoff.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=SLOWHANDOFF
// SLOWHANDOFF: slow-handoff.yaml:11:14: error: key 'handoff_s' must be below time_slice_s over the largest contention slowdown (0.001 s / 1.2 = 0.000833333 s), got 0.0009: a computation would lose each slice it gets to the hand-over
// RUN: sed -e 's/1e-300/1e-3/' -e 's/^devices: 2/devices: 4/' -e 's/^devices_per_node: 2/devices_per_node: 4/' %t/short-slice.yaml > %t/half-core.yaml
// RUN: echo '  handoff_s: 0.6e-3' >> %t/half-core.yaml
// RUN: not flexpipe-compile %t/spec.mlir --dp 2 --model %t/good-model.yaml --cluster %t/half-core.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=HALFCORE
// HALFCORE: error: {{.*}}the cluster's measured handoff_s (0.0006 s) is not below what a computation gets done in a time slice where ranks take turns on a core (time_slice_s 0.001 s at 0.5 of a core: 0.0005 s): such a computation would never finish; measure the cluster again (flexpipe-profile) or give a smaller handoff_s
// RUN: sed 's/0.9e-3/0.8e-3/' %t/slow-handoff.yaml > %t/fast-handoff.yaml
// RUN: flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/fast-handoff.yaml --emit=report | FileCheck %s --check-prefix=FASTHANDOFF
// FASTHANDOFF: iteration time
// Times so long that a slice no longer moves a double (1e13 s against
// 0.1 ms slices) hung the simulation stepping slices that ended where they
// began; there the ranks share the core.
// RUN: sed -e 's/1e-300/1e-4/' -e 's/^peak_flops: .*/peak_flops: 1/' -e 's/^efficiency: .*/efficiency: 1e-5/' %t/short-slice.yaml > %t/far-slices.yaml
// RUN: flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/far-slices.yaml --emit=report | FileCheck %s --check-prefix=FAR
// FAR: iteration time
// TWODOCS: two-documents.yaml:8:1: error: a second YAML document; the file must hold one
// A trailing "---" (an empty second document) is fine.
// RUN: cp %t/good-cluster.yaml %t/trailing.yaml && echo --- >> %t/trailing.yaml
// RUN: flexpipe-compile %t/spec.mlir --model %t/good-model.yaml --cluster %t/trailing.yaml --emit=report > /dev/null
// BLOCKVOCAB: block-vocab.yaml:10:59: error: key 'vocab' is not for a layer of kind block
// HEADHEADS: head-heads.yaml:10:60: error: key 'heads' is not for a layer of kind head
// TINYMEM: tiny-memory.yaml:5:15: error: key 'memory_bytes' must be at least 1, got 1e-300
// LAYERS: many-layers.yaml:4:25: error: key 'layers' must be at most 1048576, got 2000000
// HIDDEN: huge-hidden.yaml:4:36: error: key 'hidden' must be at most 16777216, got 9223372036854775807
// DEVICES: many-devices.yaml:1:10: error: key 'devices' must be at most 65536, got 1048576
// EMPTYFILE: empty.yaml:1:1: error:
// NEGW: negative-wgrad.yaml:2:45: error: igrad_s exceeds bwd_s, and the weight gradient (bwd_s - igrad_s when wgrad_s is not given) would take negative time; give wgrad_s, or an igrad_s within bwd_s
// SELF: self-message.yaml:4:5: error: a message from actor 1 to itself (an actor sends none)
// MSGTWICE: message-twice.yaml:5:5: error: messages from actor 0 to actor 1 are profiled twice
// LAYERTWICE: layer-twice.yaml:11:7: error: this layer is measured twice at micro_batch 1 (same kind and shape)

// MISSING: missing.yaml:2:1: error: missing key 'micro_batch_size' in the model file
// NEGATIVE: negative.yaml:8:13: error: key 'layers' must be at least 1, got -4
// BATCH: batch.yaml:3:20: error: global_batch_size 4294967304 is more than the 1048576 micro-batches a schedule may have
// UNKNOWN: unknown.yaml:9:5: error: unknown key 'hiden' in a module; expected one of: name, layers, hidden, heads, seq, vocab, lm_head
// TYPE: type.yaml:10:12: error: key 'heads' must be an integer, got 'many'
// OCTAL: octal.yaml:10:12: error: key 'heads' is written '010' with a leading 0, which YAML 1.1 reads as octal; write the decimal number without it
// OCTAL8: octal8.yaml:10:12: error: key 'heads' is written '-08' with a leading 0
// SYNTAX: syntax.yaml:5:1: error: invalid YAML: end of map flow not found
// HEADS: heads.yaml:9:13: error: module 'gpt': hidden 100 is not a multiple of heads 3
// A file that opens but cannot be read (a directory, which a pass option
// does not check first): said, where an uncaught std::ios_base::failure
// aborted flexpipe-opt.
// RUN: mkdir -p %t/a-directory && not flexpipe-opt %t/spec.mlir '-flexpipe-spec-to-schedule=model=%t/a-directory cluster=%t/good-cluster.yaml time-model=cost' 2>&1 | FileCheck %s --check-prefix=UNREADABLE
// UNREADABLE: a-directory:0:0: error: -flexpipe-partition: cannot read the file: Is a directory
// OTHER: spec.mlir:2:3: error: module @gpt is not in the model file '{{.*}}other.yaml'; name its modules after the spec's
// EFFICIENCY: efficiency.yaml:4:13: error: key 'efficiency' is a fraction of the peak and must be at most 1
// LINK: link.yaml:8:3: error: missing key 'latency_s' in inter_node
// PROFILE: profile.yaml:2:23: error: key 'fwd_s' must be a number, got 'fast'
// QUOTED: quoted.yaml:2:23: error: key 'fwd_s' must be a number, got the string "0.5"; write it without quotes
// KIND-PROFILE: good-cluster.yaml:1:1: error: unknown key 'devices' in the profile file; expected one of: micro_batch_size, modules, stages, messages, default_message_s, optimizer_s, instruction_s, exec_s; its keys are those of a cluster file
// NUL: nul.yaml:2:1: error: the file holds a control character (byte 0x00), which YAML text cannot hold: is it a binary file?
// UTF16: iteration time
// LISTKEY: list-key.yaml:2:3: error: a key in the model file must be a name, not a list, a mapping or empty
// EMPTYKEY: empty-key.yaml:{{[0-9]+:[0-9]+}}: error: a key in the profile file must be a name
// KIND-MODEL: good-cluster.yaml:1:1: error: unknown key 'devices' in the model file; {{.*}}; its keys are those of a cluster file
// KIND-CLUSTER: profile.yaml:1:1: error: -flexpipe-schedule: unknown key 'stages' in the cluster file; {{.*}}; its keys are those of a profile file
// NOCLUSTER: flexpipe-compile: --model needs --cluster (device throughput, memory and links)
// GOOD: iteration time
// INF: inf.yaml:6:53: error: key 'latency_s' must be a finite number of at most 1e+18, got '.inf'
// HUGE: huge.yaml:3:13: error: key 'peak_flops' must be a finite number of at most 1e+18, got '1e308'
// TWICE: twice.yaml:6:5: error: key 'layers' appears twice in a module
// ATTENTION: attention.yaml:1:12: error: key 'attention' must be materialized or flash, got 'sparse'
// FLASH: predicted peak_activation 552960 229376
// FLASH: predicted peak_activation 456704 192512
// NAN: nan.yaml:2:23: error: key 'fwd_s' must be a finite number of at most 1e+18, got '.nan'

//--- spec.mlir
flexpipe.pipeline @p actors(2) microbatches(4) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
}
//--- good-model.yaml
global_batch_size: 8
micro_batch_size: 1
modules:
  - {name: gpt, layers: 4, hidden: 64, heads: 4, seq: 32, vocab: 256}
//--- good-cluster.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
//--- missing.yaml
# no micro-batch size
global_batch_size: 8
modules:
  - {name: gpt, layers: 4, hidden: 64, heads: 4, seq: 32}
//--- negative.yaml
name: negative
dtype: bf16
global_batch_size: 8
micro_batch_size: 1
modules:
  - name: gpt
    hidden: 64
    layers: -4
    heads: 4
    seq: 32
//--- batch.yaml
name: batch
dtype: bf16
global_batch_size: 4294967304
micro_batch_size: 1
modules:
  - name: gpt
    hidden: 64
    layers: 4
    heads: 4
    seq: 32
//--- unknown.yaml
name: unknown
dtype: bf16
global_batch_size: 8
micro_batch_size: 1
modules:
  - name: gpt
    layers: 4
    heads: 4
    hiden: 64
    seq: 32
//--- type.yaml
name: type
dtype: bf16
global_batch_size: 8
micro_batch_size: 1
modules:
  - name: gpt
    layers: 4
    hidden: 64
    seq: 32
    heads: many
//--- syntax.yaml
global_batch_size: 8
micro_batch_size: 1
modules:
  - {name: gpt, layers: 4
//--- heads.yaml
name: heads
dtype: bf16
global_batch_size: 8
micro_batch_size: 1
modules:
  - name: gpt
    layers: 4
    heads: 3
    hidden: 100
    seq: 32
//--- other.yaml
global_batch_size: 8
micro_batch_size: 1
modules:
  - {name: bert, layers: 4, hidden: 64, heads: 4, seq: 32}
//--- efficiency.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 1.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
//--- link.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node:
  bandwidth_bytes_per_s: 1e8
//--- profile.yaml
stages:
  - {stage: 0, fwd_s: fast, bwd_s: 2}
//--- quoted.yaml
stages:
  - {stage: 0, fwd_s: "0.5", bwd_s: 2}
//--- inf.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: .inf}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
//--- huge.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e308
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
//--- nan.yaml
stages:
  - {stage: 0, fwd_s: .nan, bwd_s: 2}
//--- twice.yaml
global_batch_size: 8
micro_batch_size: 1
modules:
  - name: gpt
    layers: 4
    layers: 40
    hidden: 64
    heads: 4
    seq: 32
    vocab: 256
//--- attention.yaml
attention: sparse
global_batch_size: 8
micro_batch_size: 1
modules:
  - {name: gpt, layers: 4, hidden: 64, heads: 4, seq: 32, vocab: 256}
//--- flash.yaml
attention: flash
global_batch_size: 8
micro_batch_size: 1
modules:
  - {name: gpt, layers: 4, hidden: 64, heads: 4, seq: 32, vocab: 256}
//--- negative-wgrad.yaml
stages:
  - {stage: 0, fwd_s: 1, bwd_s: 1, igrad_s: 5}
  - {stage: 1, fwd_s: 1, bwd_s: 1}
//--- self-message.yaml
stages:
  - {stage: 0, fwd_s: 1, bwd_s: 1}
messages:
  - {from: 1, to: 1, seconds: 1e-3}
//--- message-twice.yaml
stages:
  - {stage: 0, fwd_s: 1, bwd_s: 1}
messages:
  - {from: 0, to: 1, seconds: 1e-3}
  - {from: 0, to: 1, seconds: 2e-3}
//--- layer-twice.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
measured:
  layers:
    - {kind: block, hidden: 64, seq: 32, heads: 4, micro_batch: 1, fwd_s: 1e-3, igrad_s: 1e-3, wgrad_s: 1e-3}
    - {kind: block, hidden: 64, seq: 32, heads: 4, micro_batch: 1, fwd_s: 0.5, igrad_s: 0.5, wgrad_s: 0.5}
//--- free-messages.yaml
stages:
  - {stage: 0, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 1, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 2, fwd_s: 1e-3, bwd_s: 2e-3}
  - {stage: 3, fwd_s: 1e-3, bwd_s: 2e-3}
default_message_s: 0
//--- short-slice.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
measured:
  cores_per_node: 1
  time_slice_s: 1e-300
//--- two-documents.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
---
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
//--- block-vocab.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
measured:
  layers:
    - {kind: block, hidden: 64, seq: 32, heads: 4, vocab: 256, micro_batch: 1, fwd_s: 1e-3, igrad_s: 1e-3, wgrad_s: 1e-3}
//--- head-heads.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
measured:
  layers:
    - {kind: head, hidden: 64, seq: 32, vocab: 256, heads: 4, micro_batch: 1, fwd_s: 1e-3, igrad_s: 1e-3, wgrad_s: 1e-3}
//--- tiny-memory.yaml
devices: 2
devices_per_node: 2
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e-300
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
//--- many-layers.yaml
global_batch_size: 8
micro_batch_size: 1
modules:
  - {name: gpt, layers: 2000000, hidden: 64, heads: 4, seq: 32, vocab: 256}
//--- huge-hidden.yaml
global_batch_size: 8
micro_batch_size: 1
modules:
  - {name: gpt, layers: 2, hidden: 9223372036854775807, heads: 1, seq: 32, vocab: 256}
//--- many-devices.yaml
devices: 1048576
devices_per_node: 8
peak_flops: 1e12
efficiency: 0.5
memory_bytes: 1e9
intra_node: {bandwidth_bytes_per_s: 1e9, latency_s: 1e-6}
inter_node: {bandwidth_bytes_per_s: 1e8, latency_s: 1e-5}
//--- empty.yaml
# nothing but a comment
