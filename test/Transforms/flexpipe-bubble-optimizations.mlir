// RUN: flexpipe-opt %s -flexpipe-split-backward | FileCheck %s --check-prefix=SPLIT
// RUN: flexpipe-opt %s -flexpipe-gradient-separation=time-model=cost -flexpipe-insert-comm -flexpipe-async-comm -flexpipe-verify-schedule | FileCheck %s --check-prefix=SEP
// RUN: not flexpipe-opt %s -flexpipe-gradient-separation="time-model=cost memory-bound=1" 2>&1 | FileCheck %s --check-prefix=BOUND
// RUN: not flexpipe-opt %s -flexpipe-gradient-separation=time-model=fast 2>&1 | FileCheck %s --check-prefix=MODEL
// RUN: not flexpipe-opt %s -flexpipe-gradient-separation=dp=0 2>&1 | FileCheck %s --check-prefix=DP
// RUN: not flexpipe-opt %s -flexpipe-simulate=dp=0 2>&1 | FileCheck %s --check-prefix=SIMDP
// RUN: not flexpipe-opt %s -flexpipe-schedule=dp=-3 2>&1 | FileCheck %s --check-prefix=SCHEDDP
// RUN: not flexpipe-opt %s -flexpipe-spec-to-schedule=dp=0 2>&1 | FileCheck %s --check-prefix=PIPEDP
// RUN: not flexpipe-opt %s -flexpipe-simulate=dp=9223372036854775807 2>&1 | FileCheck %s --check-prefix=HUGEDP
// RUN: not flexpipe-opt %s -flexpipe-insert-comm -flexpipe-gradient-separation 2>&1 | FileCheck %s --check-prefix=COMM
// RUN: not flexpipe-opt %s -flexpipe-async-comm=lookahead=0 2>&1 | FileCheck %s --check-prefix=LOOKAHEAD
// Option errors are one unlocated line each, without a dump of the module.
// RUN: not flexpipe-opt %s -flexpipe-async-comm=lookahead=0 2>&1 | wc -l | FileCheck %s --check-prefix=ONELINE
// RUN: not flexpipe-opt %s -flexpipe-gradient-separation=max-rounds=-1 2>&1 | FileCheck %s --check-prefix=ROUNDS
// RUN: not flexpipe-opt %s -flexpipe-gradient-separation=max-rounds=-1 2>&1 | wc -l | FileCheck %s --check-prefix=ONELINE
// RUN: not flexpipe-opt %s -flexpipe-gradient-separation=memory-bound=-2 2>&1 | FileCheck %s --check-prefix=NEGBOUND
// RUN: not flexpipe-opt %s -flexpipe-partition=model=%t.missing.yaml 2>&1 | wc -l | FileCheck %s --check-prefix=ONELINE
// Only schedules whose spec asked for it change under requested-only.
// RUN: flexpipe-opt %s -flexpipe-split-backward=requested-only=true | FileCheck %s --check-prefix=UNCHANGED

// 1F1B on two actors with one backward per micro-batch.
flexpipe.schedule @s actors(2) stages(2) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.fwd stage 0 mb 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 1
  }
}

// SPLIT:      flexpipe.actor 0 {
// SPLIT-NEXT:   flexpipe.fwd stage 0 mb 0
// SPLIT-NEXT:   flexpipe.fwd stage 0 mb 1
// SPLIT-NEXT:   flexpipe.igrad stage 0 mb 0
// SPLIT-NEXT:   flexpipe.wgrad stage 0 mb 0
// SPLIT-NEXT:   flexpipe.igrad stage 0 mb 1
// SPLIT-NEXT:   flexpipe.wgrad stage 0 mb 1
// SPLIT-NEXT: }

// Actor 1 stashes the weight gradient of micro-batch 0 (it delayed the input
// gradient actor 0 waits for) and runs it last: 8 -> 7 time units at the
// same peak memory. Receives are posted one computation before their wait.
// SEP:      flexpipe.separation = {memory_bound = 2.000000e+00 : f64, peak = 2.000000e+00 : f64, peak_before = 2.000000e+00 : f64, stashed = 1 : i64, strategy = "stash-and-insert", time = 7.000000e+00 : f64, time_before = 8.000000e+00 : f64, unit = "units"}
// SEP:      flexpipe.actor 0 {
// SEP-NEXT:   flexpipe.fwd stage 0 mb 0
// SEP-NEXT:   flexpipe.send_act stage 0 mb 0 to 1
// SEP-NEXT:   %0 = flexpipe.recv_grad stage 0 mb 0 from 1 : !flexpipe.token
// SEP-NEXT:   flexpipe.fwd stage 0 mb 1
// SEP-NEXT:   flexpipe.send_act stage 0 mb 1 to 1
// SEP-NEXT:   flexpipe.wait %0
// SEP-NEXT:   flexpipe.igrad stage 0 mb 0
// SEP-NEXT:   %1 = flexpipe.recv_grad stage 0 mb 1 from 1 : !flexpipe.token
// SEP-NEXT:   flexpipe.wgrad stage 0 mb 0
// SEP-NEXT:   flexpipe.wait %1
// SEP-NEXT:   flexpipe.igrad stage 0 mb 1
// SEP-NEXT:   flexpipe.wgrad stage 0 mb 1
// SEP-NEXT: }
// SEP-NEXT: flexpipe.actor 1 {
// SEP-NEXT:   %0 = flexpipe.recv_act stage 1 mb 0 from 0 : !flexpipe.token
// SEP-NEXT:   flexpipe.wait %0
// SEP-NEXT:   flexpipe.fwd stage 1 mb 0
// SEP-NEXT:   %1 = flexpipe.recv_act stage 1 mb 1 from 0 : !flexpipe.token
// SEP-NEXT:   flexpipe.igrad stage 1 mb 0
// SEP-NEXT:   flexpipe.send_grad stage 1 mb 0 to 0
// SEP-NEXT:   flexpipe.wait %1
// SEP-NEXT:   flexpipe.fwd stage 1 mb 1
// SEP-NEXT:   flexpipe.igrad stage 1 mb 1
// SEP-NEXT:   flexpipe.send_grad stage 1 mb 1 to 0
// SEP-NEXT:   flexpipe.wgrad stage 1 mb 1
// SEP-NEXT:   flexpipe.wgrad stage 1 mb 0
// SEP-NEXT: }

// BOUND: error: gradient separation failed: the memory bound 1 is below the 2 that actor 0 needs even with every weight gradient right after its input gradient
// MODEL: for the --time-model option: Cannot find option named 'fast'!
// DP: error: -flexpipe-gradient-separation needs dp from 1 to 65536, not 0
// SIMDP: error: -flexpipe-simulate needs dp from 1 to 65536, not 0
// SCHEDDP: error: -flexpipe-schedule needs dp from 1 to 65536, not -3
// PIPEDP: error: -flexpipe-schedule needs dp from 1 to 65536, not 0
// HUGEDP: error: -flexpipe-simulate needs dp from 1 to 65536, not 9223372036854775807
// COMM: flexpipe-bubble-optimizations.mlir:24:5: error: actor 0 has an op of kind 'send_act'; gradient separation works on programs of computations and blocking collectives (run it before communication is inserted; asynchronous collectives and exec are not supported yet)
// LOOKAHEAD: error: -flexpipe-async-comm needs lookahead >= 1, not 0
// ONELINE: {{^ *1$}}
// ROUNDS: error: -flexpipe-gradient-separation needs max-rounds >= 0, not -1
// NEGBOUND: error: -flexpipe-gradient-separation needs a finite memory-bound >= 0 (0: the schedule's own peak), not -2
// RUN: not flexpipe-opt %s -flexpipe-gradient-separation=memory-bound=1e400 2>&1 | FileCheck %s --check-prefix=INFBOUND
// INFBOUND: error: -flexpipe-gradient-separation needs a finite memory-bound >= 0 (0: the schedule's own peak), not inf
// UNCHANGED: flexpipe.bwd stage 0 mb 0
