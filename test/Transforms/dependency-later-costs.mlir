// Without finish, -flexpipe-schedule checks the spec's dependencies on the
// program the later passes will make (the schedule IR does not record
// them). Gradient separation makes another program with its pass's default
// costs (the step model) than with the schedule's (the cost model on a
// measured cluster): one that keeps this dependency, one that does not.
// The schedule's costs decide, as -flexpipe-spec-to-schedule finishes the
// program with them; the default costs' program gets a warning (it was
// checked on neither, and the passes one by one gave a program that broke
// it with exit 0).
// RUN: flexpipe-opt %s "-flexpipe-spec-to-schedule=time-model=cost model=%configs/models/tiny.yaml cluster=%S/../Tools/Inputs/measured-cpu.yaml" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONCE --allow-empty
// ONCE-NOT: dependency
// RUN: flexpipe-opt %s -flexpipe-partition=model=%configs/models/tiny.yaml -flexpipe-place "-flexpipe-schedule=time-model=cost model=%configs/models/tiny.yaml cluster=%S/../Tools/Inputs/measured-cpu.yaml" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEFAULTS
// DEFAULTS: dependency-later-costs.mlir:[[@LINE+9]]:3: warning: this dependency is not kept when the schedule runs: at micro-batch 4, bwd of stage 4 (actor 3) does not happen before wgrad of stage 0 (actor 0): {{.*}} (in the program -flexpipe-gradient-separation makes with its default costs, the step model: give it this pass's time-model, model, cluster and dp, as -flexpipe-spec-to-schedule does)
// With the step model throughout, the one program breaks it: an error.
// RUN: not flexpipe-opt %s -flexpipe-partition -flexpipe-place -flexpipe-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=STEP
// STEP: error: 'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 4, bwd of stage 4 (actor 3)

flexpipe.pipeline @zb_v actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(vshape) chunks(2)
  flexpipe.priority cttp<fwd_first> fstp<depth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (s)>
  flexpipe.dependency bwd @gpt[4] -> wgrad @gpt[0]
  flexpipe.optimize gradient_separation
}
