// Vocabulary parallelism end to end from a spec: the scheduler places the
// embedding and head slices and gang-schedules the head's all_gathers; the
// rank executables train with mpirun and match the single-process reference.
// T-1F1B (1F1B with the MLLM placement) on 4 actors, then the kind of
// schedule flexpipe-tune picks for large vocabularies: interleaved priorities
// over a circular placement with 2 chunks per actor; then T-1F1B with
// gradient separation.
// REQUIRES: mpi
// RUN: rm -rf %t && mkdir -p %t
// RUN: %train t1f1b %s | FileCheck %s
// RUN: sed -e 's/layers(8) placement(one_to_one)/layers(8) placement(circular) chunks(2)/' \
// RUN:     -e 's/cttp<bwd_first> fstp<breadth_first> bstp<depth_first>/cttp<interleaved> fstp<depth_first> bstp<depth_first>/' \
// RUN:     -e 's/(pp - a)/(s + pp - a * 2 - 1)/' %s > %t/circular.mlir
// RUN: %train circular %t/circular.mlir | FileCheck %s
// RUN: grep -c flexpipe_rt_all_gather %t/circular/rank3.cpp | FileCheck %s --check-prefix=GATHERS
// With gradient separation (the slices' weight gradients move too):
// RUN: sed -e 's/^}$/  flexpipe.optimize gradient_separation\n}/' %s > %t/separated.mlir
// RUN: %train separated %t/separated.mlir --time-model=cost | FileCheck %s
// RUN: grep -c 'flexpipe_rt_wgrad(v1, 5,' %t/separated/rank0.cpp | FileCheck %s --check-prefix=GATHERS
// Bidirectional with the vocabulary-parallel embedding and head, as
// flexpipe-tune writes it (the head and embedding stages come after the
// layers' stages; each direction starts again at block 0):
// RUN: sed -e 's/placement(one_to_one) vocab_parallel/placement(one_to_one) bidirectional vocab_parallel/' \
// RUN:     -e 's/per_actor affine_map<(a)\[pp, s, m\] -> (pp - a)>/per_stage affine_map<(i)[pp, s, m] -> (pp - i mod pp)>/' %s > %t/bidirectional.mlir
// RUN: %train bidirectional %t/bidirectional.mlir | FileCheck %s
// RUN: sed -e 's/placement(one_to_one) vocab_parallel/placement(vshape) bidirectional chunks(2) vocab_parallel/' \
// RUN:     -e 's/cttp<bwd_first> fstp<breadth_first> bstp<depth_first>/cttp<interleaved> fstp<depth_first> bstp<depth_first>/' \
// RUN:     -e 's/(pp - a)>/(s floordiv 2)>/' %s > %t/vshape-bidirectional.mlir
// RUN: %train vshape-bidirectional %t/vshape-bidirectional.mlir --actors 2 --microbatches 4 | FileCheck %s --check-prefix=TWO
// Interleaved 1F1B with its round intervals at an odd size (3 actors, 5
// micro-batches): the slices run outside the stage traversal
// (docs/Rationale.md; inside it no m > 1 could be scheduled).
// RUN: sed -e 's/layers(8) placement(one_to_one)/layers(8) placement(circular) chunks(2)/' \
// RUN:     -e 's/cttp<bwd_first> fstp<breadth_first> bstp<depth_first>/cttp<interleaved> fstp<breadth_first, round> bstp<depth_first, round>/' \
// RUN:     -e 's/(a)\[pp, s, m\] -> (pp - a)>/(a)[pp, s, m, round] -> ((s floordiv pp - 1) * round + pp * 2 - a * 2 - 1)>/' %s > %t/interleaved.mlir
// RUN: %train interleaved %t/interleaved.mlir --actors 3 --microbatches 5 | FileCheck %s --check-prefix=THREE
// CHECK: training: 4 iterations, loss {{.*}}, worst loss difference {{.*}}, worst weight difference {{.*}}, 101 parameters
// GATHERS: 8
// (two slices of each vocabulary-parallel stage instead of four)
// THREE: training: 4 iterations, loss {{.*}}, worst loss difference {{.*}}, worst weight difference {{.*}}, {{[0-9]+}} parameters
// TWO: training: 4 iterations, loss {{.*}}, worst loss difference {{.*}}, worst weight difference {{.*}}, 53 parameters
flexpipe.pipeline @t1f1b actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one) vocab_parallel
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<depth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
}
