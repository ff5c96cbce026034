// Tests that `rule("twice_the_stages_after")` asks the example plugin's
// in-flight rule for each actor's limit, 2 (s - a) = 8, 6, 4, 2: forwards
// first, actors 0 to 3 stop at 8, 6, 4 and 2 forwards where GPipe would run
// all 12, and the affine map with the same values gives the same order.

// RUN: flexpipe-compile --load-plugin %example_plugin %s --emit=text | FileCheck %s
// RUN: sed 's/rule(.*)/affine_map<(a)[pp, s, m] -> ((s - a) * 2)>/' %s | flexpipe-compile - --emit=text | FileCheck %s
// RUN: sed '/flexpipe.inflight/d' %s | flexpipe-compile - --emit=text | FileCheck %s --check-prefix=UNLIMITED
// RUN: not flexpipe-compile %s --emit=text 2>&1 | FileCheck %s --check-prefix=UNLOADED

// CHECK:      schedule @doubled: 4 actors, 4 stages, 12 micro-batches
// CHECK:      actor 0 | 0F0  0F1  0F2  0F3  0F4  0F5  0F6  0F7  0B0  0F8  0B1  0F9  0B2  0F10 0B3  0F11 0B4  .    0B5  .    0B6  .    0B7  .    0B8  .    0B9  .    0B10 0B11
// CHECK-NEXT: actor 1 | .    1F0  1F1  1F2  1F3  1F4  1F5  1B0  1F6  1B1  1F7  1B2  1F8  1B3  1F9  1B4  1F10 1B5  1F11 1B6  .    1B7  .    1B8  .    1B9  .    1B10 1B11 .
// CHECK-NEXT: actor 2 | .    .    2F0  2F1  2F2  2F3  2B0  2F4  2B1  2F5  2B2  2F6  2B3  2F7  2B4  2F8  2B5  2F9  2B6  2F10 2B7  2F11 2B8  .    2B9  .    2B10 2B11 .    .
// CHECK-NEXT: actor 3 | .    .    .    3F0  3F1  3B0  3F2  3B1  3F3  3B2  3F4  3B3  3F5  3B4  3F6  3B5  3F7  3B6  3F8  3B7  3F9  3B8  3F10 3B9  3F11 3B10 3B11 .    .    .

// UNLIMITED:      actor 0 | 0F0  0F1  0F2  0F3  0F4  0F5  0F6  0F7  0F8  0F9  0F10 0F11 .    .    .    .    .    .    0B0  0B1  0B2  0B3  0B4  0B5  0B6  0B7  0B8  0B9  0B10 0B11
// UNLIMITED-NEXT: actor 1 | .    1F0  1F1  1F2  1F3  1F4  1F5  1F6  1F7  1F8  1F9  1F10 1F11 .    .    .    .    1B0  1B1  1B2  1B3  1B4  1B5  1B6  1B7  1B8  1B9  1B10 1B11 .

// UNLOADED: error: {{.*}}"twice_the_stages_after"

flexpipe.pipeline @doubled actors(4) microbatches(12) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<fwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor rule("twice_the_stages_after")
}
