// --emit=text draws registered instructions: they take steps, and the
// grid showed those steps idle ('.') while the header counted them.
// RUN: flexpipe-compile %s --emit=text | FileCheck %s
// CHECK:      schedule @p: 3 actors, 3 stages, 5 micro-batches, 19 steps
// A registered instruction's cell names it: two on one stage both read
// 2exec0.
// CHECK-NEXT: (cells: stage, F forward / B backward / I input gradient / W weight gradient / @name a registered instruction, micro-batch; . idle)
// CHECK:      actor 2 | .      .      2F0    2@n0   2B0    2F1    2@n1   2B1
// A schedule without one keeps the short legend.
// RUN: flexpipe-compile %schedules/1f1b.mlir --emit=text | FileCheck %s --check-prefix=PLAIN
// PLAIN: (cells: stage, F forward / B backward / I input gradient / W weight gradient, micro-batch; . idle)
// PLAIN-NOT: not drawn
// Collectives take no step, so they have no cells; the grid says which it
// leaves out (nothing said there was an all-gather at all).
// RUN: printf 'flexpipe.pipeline @c actors(4) microbatches(4) {\n  flexpipe.module @a layers(4) placement(one_to_one)\n  flexpipe.stage @sync actors [0, 3]\n  flexpipe.instruction @ag kind(all_gather) on(@sync)\n  flexpipe.dependency fwd @a[-1] -> @ag @sync\n  flexpipe.dependency @ag @sync -> bwd @a[0]\n}\n' > %t.c.mlir
// RUN: flexpipe-compile %t.c.mlir --emit=text | FileCheck %s --check-prefix=COLL
// COLL: actor 3 |
// COLL-NEXT: not drawn: all_gather of stage 4 on actors [0, 3], 4 instances (collectives take no step)
// RUN: printf 'flexpipe.pipeline @v actors(3) microbatches(3) {\n  flexpipe.module @gpt layers(6) placement(vshape) chunks(2) vocab_parallel\n}\n' > %t.v.mlir
// RUN: flexpipe-compile %t.v.mlir --emit=text | FileCheck %s --check-prefix=VOCAB
// VOCAB: not drawn: all_gather of stage 7 on actors [0, 1, 2], 3 instances
// So do the SVG timeline (a box per instruction, and a legend entry; they
// were gaps, which the legend calls bubbles) and the critical path (it went
// from 2F0 to 2B0, 14 computations for a 19-step iteration).
// RUN: flexpipe-compile %s --emit=svg | FileCheck %s --check-prefix=SVG
// SVG:     >registered</text>
// SVG:     <title>exec @n stage 2 micro-batch 0, 3 steps to 4 steps</title>
// RUN: flexpipe-compile %s --emit=svg | grep -c '<title>exec @n' | FileCheck %s --check-prefix=BOXES
// BOXES: {{^}}5{{$}}
// RUN: flexpipe-compile %schedules/1f1b.mlir --emit=svg | FileCheck %s --check-prefix=SVGPLAIN
// SVGPLAIN-NOT: registered
// RUN: flexpipe-compile %s --emit=report | FileCheck %s --check-prefix=PATH
// PATH: critical path (19 computations): 0F0 -> 1F0 -> 2F0 -> 2@n0 -> 2B0
// The trace names the instruction too.
// RUN: flexpipe-compile %s --emit=trace | FileCheck %s --check-prefix=TRACE
// TRACE: "name": "2@n0"
// RUN: flexpipe-opt %s -flexpipe-spec-to-schedule -flexpipe-simulate | FileCheck %s --check-prefix=ATTR
// ATTR: critical_path = 19

flexpipe.pipeline @p actors(3) microbatches(5) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.instruction @n kind(compute) on(@gpt[-1])
  flexpipe.dependency fwd @gpt[-1] -> @n @gpt[-1]
}
