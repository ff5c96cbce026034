// Tests that `flexpipe.check "max_two_inflight"` vetoes a forward while an
// actor holds two micro-batches: 1F1B's limits pp - a become 2, 2, 2, 1.

// RUN: flexpipe-compile --load-plugin %example_plugin %s --emit=text | FileCheck %s
// The same as limits 2, 2, 2, 1 without the check:
// RUN: sed -e '/flexpipe.check/d' -e 's/affine_map.*/[2, 2, 2, 1]/' %s | flexpipe-compile - --emit=text | FileCheck %s
// RUN: sed '/flexpipe.check/d' %s | flexpipe-compile - --emit=text | FileCheck %s --check-prefix=UNCHECKED
// RUN: not flexpipe-compile %s --emit=text 2>&1 | FileCheck %s --check-prefix=UNLOADED

// CHECK:      schedule @capped: 4 actors, 4 stages, 8 micro-batches, 34 steps
// CHECK:      actor 0 | 0F0 0F1 .   .   .   .   .   0B0 0F2 0B1 0F3 .   .   .   .   0B2 0F4 0B3 0F5 .   .   .   .   0B4 0F6 0B5 0F7 .   .   .   .   0B6 .   0B7
// CHECK-NEXT: actor 1 | .   1F0 1F1 .   .   .   1B0 .   1B1 1F2 .   1F3 .   .   1B2 .   1B3 1F4 .   1F5 .   .   1B4 .   1B5 1F6 .   1F7 .   .   1B6 .   1B7 .
// CHECK-NEXT: actor 2 | .   .   2F0 2F1 .   2B0 .   2B1 .   .   2F2 .   2F3 2B2 .   2B3 .   .   2F4 .   2F5 2B4 .   2B5 .   .   2F6 .   2F7 2B6 .   2B7 .   .
// CHECK-NEXT: actor 3 | .   .   .   3F0 3B0 3F1 3B1 .   .   .   .   3F2 3B2 3F3 3B3 .   .   .   .   3F4 3B4 3F5 3B5 .   .   .   .   3F6 3B6 3F7 3B7 .   .   .

// Without the check: 1F1B.
// UNCHECKED:      actor 0 | 0F0 0F1 0F2 0F3 .   .   .   0B0 0F4 0B1 0F5 0B2 0F6 0B3 0F7 0B4 .   0B5 .   0B6 .   0B7
// UNCHECKED-NEXT: actor 1 | .   1F0 1F1 1F2 .   .   1B0 1F3 1B1 1F4 1B2 1F5 1B3 1F6 1B4 1F7 1B5 .   1B6 .   1B7 .

// UNLOADED: error: {{.*}}"max_two_inflight"

// With vocabulary-parallel slices, which in-flight limits leave out, the
// check leaves them out too (it vetoed the head slices' forwards, and no
// actor could go on): still the same as the limits.
// RUN: sed 's/placement(one_to_one)/& vocab_parallel/' %s | flexpipe-compile --load-plugin %example_plugin - --emit=text > %t.vp-checked
// RUN: sed -e 's/placement(one_to_one)/& vocab_parallel/' -e '/flexpipe.check/d' -e 's/affine_map.*/[2, 2, 2, 1]/' %s | flexpipe-compile - --emit=text > %t.vp-limits
// RUN: diff %t.vp-checked %t.vp-limits
// RUN: FileCheck %s --check-prefix=VOCAB < %t.vp-checked
// VOCAB: schedule @capped: 4 actors, 6 stages, 8 micro-batches

flexpipe.pipeline @capped actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  flexpipe.check "max_two_inflight"
}
