// --emit=text draws registered instructions: they take steps, and the
// grid showed those steps idle ('.') while the header counted them.
// RUN: flexpipe-compile %s --emit=text | FileCheck %s
// CHECK:      schedule @p: 3 actors, 3 stages, 5 micro-batches, 19 steps
// CHECK-NEXT: (cells: stage, F forward / B backward / I input gradient / W weight gradient / exec a registered instruction, micro-batch; . idle)
// CHECK:      actor 2 | .      .      2F0    2exec0 2B0    2F1    2exec1 2B1
// A schedule without one keeps the short legend.
// RUN: flexpipe-compile %schedules/1f1b.mlir --emit=text | FileCheck %s --check-prefix=PLAIN
// PLAIN: (cells: stage, F forward / B backward / I input gradient / W weight gradient, micro-batch; . idle)

flexpipe.pipeline @p actors(3) microbatches(5) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.instruction @n kind(compute) on(@gpt[-1])
  flexpipe.dependency fwd @gpt[-1] -> @n @gpt[-1]
}
