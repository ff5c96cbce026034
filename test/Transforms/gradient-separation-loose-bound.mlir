// A memory bound above what the schedule needs buys nothing: 1F1B at pp 4,
// m 8 separates to 27 steps under its own peak (4) and under a bound of 8,
// so the result is the same, at a peak of 4 on every actor. Stashing every
// weight gradient under the loose bound also takes 27 steps, with its
// forwards done sooner, and won the tie: every actor's peak went from 4 to
// 8 for nothing. A tie in time now goes to the lower peak, and stashing
// every weight gradient is tried under the fused schedule's peak too.

// RUN: flexpipe-opt %schedules/1f1b.mlir -flexpipe-schedule -flexpipe-gradient-separation -flexpipe-insert-comm -flexpipe-simulate | FileCheck %s --check-prefix=OWN
// RUN: flexpipe-opt %schedules/1f1b.mlir -flexpipe-schedule -flexpipe-gradient-separation=memory-bound=8 -flexpipe-insert-comm -flexpipe-simulate | FileCheck %s --check-prefix=LOOSE
// The programs are the same under either bound.
// RUN: flexpipe-opt %schedules/1f1b.mlir -flexpipe-schedule -flexpipe-gradient-separation -flexpipe-insert-comm | sed -n '/flexpipe.actor/,$p' > %t.own
// RUN: flexpipe-opt %schedules/1f1b.mlir -flexpipe-schedule -flexpipe-gradient-separation=memory-bound=8 -flexpipe-insert-comm | sed -n '/flexpipe.actor/,$p' | diff %t.own -

// OWN: flexpipe.separation = {memory_bound = 4.000000e+00 : f64, peak = 4.000000e+00 : f64, peak_before = 4.000000e+00 : f64, stashed = 32 : i64, strategy = "stash-all", time = 2.700000e+01 : f64, time_before = 3.000000e+01 : f64, unit = "steps"}
// OWN-SAME: iteration_time = 2.700000e+01 : f64
// OWN-SAME: peak_activation = array<f64: 4.000000e+00, 4.000000e+00, 4.000000e+00, 4.000000e+00>

// LOOSE: flexpipe.separation = {memory_bound = 8.000000e+00 : f64, peak = 4.000000e+00 : f64, peak_before = 4.000000e+00 : f64, stashed = 32 : i64, strategy = "stash-all", time = 2.700000e+01 : f64, time_before = 3.000000e+01 : f64, unit = "steps"}
// LOOSE-SAME: iteration_time = 2.700000e+01 : f64
// LOOSE-SAME: peak_activation = array<f64: 4.000000e+00, 4.000000e+00, 4.000000e+00, 4.000000e+00>
