// Tests a spec that uses all three hooks of the example plugin, in
// flexpipe-opt and flexpipe-compile: actors 2 and 3 run the plugin's 1F1B
// step function, actors 0 and 1 the built-in backward-first priority under
// the rule's limits 8 and 6, and the check holds every actor to two
// micro-batches in flight.

// RUN: flexpipe-opt --load-plugin %example_plugin %s -flexpipe-spec-to-schedule | flexpipe-compile - --emit=text | FileCheck %s
// RUN: flexpipe-compile %s --load-plugin=%example_plugin --emit=text | FileCheck %s
// RUN: not flexpipe-opt %s -flexpipe-spec-to-schedule 2>&1 | FileCheck %s --check-prefix=UNLOADED

// CHECK:      actor 0 | 0F0 0F1 .   .   .   .   .   0B0 0F2 .   .   .   .   0B1 0F3 .   .   .   .   0B2 0F4 .   .   .   .   0B3 0F5 .   .   .   .   0B4 0F6 .   .   .   .   0B5 0F7 .   .   .   .   0B6 .   0B7
// CHECK-NEXT: actor 1 | .   1F0 1F1 .   .   .   1B0 .   .   1F2 .   .   1B1 .   .   1F3 .   .   1B2 .   .   1F4 .   .   1B3 .   .   1F5 .   .   1B4 .   .   1F6 .   .   1B5 .   .   1F7 .   .   1B6 .   1B7 .
// CHECK-NEXT: actor 2 | .   .   2F0 2F1 .   2B0 .   .   .   .   2F2 2B1 .   .   .   .   2F3 2B2 .   .   .   .   2F4 2B3 .   .   .   .   2F5 2B4 .   .   .   .   2F6 2B5 .   .   .   .   2F7 2B6 .   2B7 .   .
// CHECK-NEXT: actor 3 | .   .   .   3F0 3B0 3F1 3B1 .   .   .   .   3F2 3B2 .   .   .   .   3F3 3B3 .   .   .   .   3F4 3B4 .   .   .   .   3F5 3B5 .   .   .   .   3F6 3B6 .   .   .   .   3F7 3B7 .   .   .

// UNLOADED: error: 'flexpipe.priority' op uses priority "one_f_one_b", which no loaded plugin registers

flexpipe.pipeline @plugged actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.priority actors [2, 3] custom("one_f_one_b")
  flexpipe.inflight per_actor rule("twice_the_stages_after")
  flexpipe.check "max_two_inflight"
}
