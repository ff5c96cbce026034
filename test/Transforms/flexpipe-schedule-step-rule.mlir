// Algorithm 1 as the paper writes it (step-rule=literal) against FlexPipe's
// default (next-type): the first instruction type whose reorder queue holds
// an item decides, and a fetch that finds nothing schedulable there (here the
// in-flight limit) is a bubble. With forwards first and 1F1B's limits the
// literal rule leaves actor 0 idle with a forward held back and never takes
// the backward that would free it; the default moves on to the backward and
// gives 1F1B.

// RUN: flexpipe-opt %s -flexpipe-schedule | FileCheck %s
// RUN: not flexpipe-opt %s -flexpipe-schedule=step-rule=literal 2>&1 | FileCheck %s --check-prefix=LITERAL
// RUN: not flexpipe-opt %s -flexpipe-schedule=step-rule=paper 2>&1 | FileCheck %s --check-prefix=BAD
// The driver takes the rule too.
// RUN: not flexpipe-compile %s --step-rule literal --emit=text 2>&1 | FileCheck %s --check-prefix=LITERAL
// RUN: flexpipe-compile %s --step-rule next-type --emit=text | FileCheck %s --check-prefix=DRIVER
// DRIVER: actor 0 | 0F0 0F1 0F2 .   .   0B0 0F3 0B1

// CHECK:      flexpipe.actor 0 {
// CHECK-NEXT:   flexpipe.fwd stage 0 mb 0
// CHECK-NEXT:   flexpipe.fwd stage 0 mb 1
// CHECK-NEXT:   flexpipe.fwd stage 0 mb 2
// CHECK-NEXT:   flexpipe.bwd stage 0 mb 0
// CHECK-NEXT:   flexpipe.fwd stage 0 mb 3

// LITERAL: error: 'flexpipe.pipeline' op cannot be scheduled: no actor can make progress at step 3 with 6 of 24 computations scheduled; the priorities and in-flight limits admit no further step (with the literal step rule an actor whose preferred instruction type is held back stays idle; the default next-type rule would try the next type)
// LITERAL: note: actor 0 has 5 computations left: fwd stage 0 mb 3 (actor 0) is ready but the actor's in-flight limit 3 is reached

// BAD: for the --step-rule option: Cannot find option named 'paper'!

// Where no fetch fails in a non-empty queue the two rules agree: the
// library's 1F1B, interleaved 1F1B and GPipe are the same either way.
// RUN: flexpipe-opt %schedules/1f1b.mlir -flexpipe-spec-to-schedule > %t.next
// RUN: flexpipe-opt %schedules/1f1b.mlir -flexpipe-spec-to-schedule=step-rule=literal | diff - %t.next
// RUN: flexpipe-opt %schedules/interleaved-1f1b.mlir -flexpipe-spec-to-schedule > %t.next
// RUN: flexpipe-opt %schedules/interleaved-1f1b.mlir -flexpipe-spec-to-schedule=step-rule=literal | diff - %t.next
// RUN: flexpipe-opt %schedules/gpipe.mlir -flexpipe-spec-to-schedule > %t.next
// RUN: flexpipe-opt %schedules/gpipe.mlir -flexpipe-spec-to-schedule=step-rule=literal | diff - %t.next

flexpipe.pipeline @fwd_first_limited actors(3) microbatches(4) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.priority cttp<fwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
}
