// Tests that `custom("one_f_one_b")` gives every actor the example plugin's
// priority: 1F1B with no in-flight limit. Without it the built-in
// backward-first priority runs further ahead.

// RUN: flexpipe-compile --load-plugin %example_plugin %s --emit=text | FileCheck %s
// RUN: flexpipe-compile --load-plugin %example_plugin %s --emit=text --time-model=cost | FileCheck %s
// RUN: sed '/custom/d' %s | flexpipe-compile - --emit=text | FileCheck %s --check-prefix=BUILTIN
// RUN: not flexpipe-compile %s --emit=text 2>&1 | FileCheck %s --check-prefix=UNLOADED
// A second custom priority for the same scope is refused as a second cttp
// is (the last one silently won):
// RUN: sed 's|^  flexpipe.priority custom("one_f_one_b")$|&\n  flexpipe.priority custom("one_f_one_b")|' %s | not flexpipe-compile --load-plugin %example_plugin - --emit=text 2>&1 | FileCheck %s --check-prefix=TWICE

// CHECK:      schedule @plugged_1f1b: 4 actors, 4 stages, 8 micro-batches
// CHECK:      actor 0 | 0F0 0F1 0F2 0F3 .   .   .   0B0 0F4 0B1 0F5 0B2 0F6 0B3 0F7 0B4 .   0B5 .   0B6 .   0B7
// CHECK-NEXT: actor 1 | .   1F0 1F1 1F2 .   .   1B0 1F3 1B1 1F4 1B2 1F5 1B3 1F6 1B4 1F7 1B5 .   1B6 .   1B7 .
// CHECK-NEXT: actor 2 | .   .   2F0 2F1 .   2B0 2F2 2B1 2F3 2B2 2F4 2B3 2F5 2B4 2F6 2B5 2F7 2B6 .   2B7 .   .
// CHECK-NEXT: actor 3 | .   .   .   3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5 3F6 3B6 3F7 3B7 .   .   .

// BUILTIN:      actor 0 | 0F0 0F1 0F2 0F3 0F4 0F5 0F6 0B0 0F7 0B1 .   0B2 .   0B3 .   0B4 .   0B5 .   0B6 .   0B7
// BUILTIN-NEXT: actor 1 | .   1F0 1F1 1F2 1F3 1F4 1B0 1F5 1B1 1F6 1B2 1F7 1B3 .   1B4 .   1B5 .   1B6 .   1B7 .
// BUILTIN-NEXT: actor 2 | .   .   2F0 2F1 2F2 2B0 2F3 2B1 2F4 2B2 2F5 2B3 2F6 2B4 2F7 2B5 .   2B6 .   2B7 .   .
// BUILTIN-NEXT: actor 3 | .   .   .   3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5 3F6 3B6 3F7 3B7 .   .   .

// UNLOADED: error: 'flexpipe.priority' op uses priority "one_f_one_b", which no loaded plugin registers
// TWICE: error: 'flexpipe.priority' op sets a custom priority again for the whole pipeline; set each priority once per scope
// TWICE: note: first set here

flexpipe.pipeline @plugged_1f1b actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.priority custom("one_f_one_b")
}
