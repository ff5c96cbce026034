// RUN: flexpipe-opt %s -split-input-file -flexpipe-partition=balance=cost -verify-diagnostics | FileCheck %s

// Balancing FLOPs: with a 1M-token vocabulary the LM head costs about 31
// layers, so the last of 8 stages keeps one layer.
// CHECK-LABEL: flexpipe.pipeline @large_vocab
// CHECK: partition [9, 9, 9, 9, 9, 9, 9, 1]
flexpipe.pipeline @large_vocab actors(8) microbatches(8) {
  flexpipe.module @gpt layers(64) placement(one_to_one) model<hidden = 2560, heads = 64, seq = 512, vocab = 1000000>
}

// -----

// Vocabulary-parallel: the embedding and the head are stages of their own,
// split over every actor, so the layer stages cost alike and the split is
// even (it charged the head to the last stage: 663 ms against 653 ms for an
// even split of GPT 5B-1M on 4 A800s).
// CHECK-LABEL: flexpipe.pipeline @large_vocab_parallel
// CHECK: partition [8, 8, 8, 8, 8, 8, 8, 8]
flexpipe.pipeline @large_vocab_parallel actors(8) microbatches(8) {
  flexpipe.module @gpt layers(64) placement(one_to_one) model<hidden = 2560, heads = 64, seq = 512, vocab = 1000000> vocab_parallel
}

// -----

// The sizes may come from a model file instead (here the module has none).
// expected-error @+2 {{'flexpipe.module' op has no model<...> sizes for balance=cost; add them or pass a model file with a module named 'gpt'}}
flexpipe.pipeline @no_sizes actors(2) microbatches(2) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
}
