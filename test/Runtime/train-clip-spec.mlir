// The two-tower model end to end from a spec (the paper's multimodal
// schedule): mixed schedules (interleaved 1F1B for the image tower, 1F1B for
// the text tower) on disjoint actors, joined by a registered asynchronous
// all-gather after each last-stage forward of both towers. The scheduler
// places the posts and waits; the rank executables train with mpirun and
// match the single-process reference. Then a blocking variant: 1F1B for both
// towers and a blocking all-gather per micro-batch. (DistMM-Pipe's grouped
// sync, prev(2) next(2), is scheduled and simulated but the runtime does not
// run an all-gather that covers several micro-batches yet.)
// REQUIRES: mpi
// RUN: rm -rf %t && mkdir -p %t
// RUN: %train mixed %s --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml | FileCheck %s
// Actor 3 gathers once per micro-batch, asynchronously (counted in the
// schedule: its rank program holds most of them in loops).
// RUN: flexpipe-compile %s --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=schedule | awk '/flexpipe.actor 3 /{f=1} f' | grep -c 'flexpipe.all_gather .*: !flexpipe.token' | FileCheck %s --check-prefix=GATHERS
// RUN: grep -q flexpipe_rt_all_gather_async %t/mixed/rank3.cpp
// RUN: not grep -q 'flexpipe_rt_all_gather(' %t/mixed/rank3.cpp
// RUN: sed -e 's/placement(circular) chunks(2)/placement(one_to_one)/' \
// RUN:     -e 's/cttp<interleaved> fstp<breadth_first, 2> bstp<depth_first, 2>/cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>/' \
// RUN:     -e 's/on(@sync) async/on(@sync)/' \
// RUN:     -e 's/(s + pp - a \* 2 - 1)/(pp - a)/' %s > %t/blocking.mlir
// RUN: %train blocking %t/blocking.mlir --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml | FileCheck %s
// RUN: flexpipe-compile %t/blocking.mlir --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=schedule | awk '/flexpipe.actor 3 /{f=1} f' | grep 'flexpipe.all_gather ' | grep -vc token | FileCheck %s --check-prefix=GATHERS
// RUN: grep -q 'flexpipe_rt_all_gather(' %t/blocking/rank3.cpp
// RUN: not grep -q flexpipe_rt_all_gather_async %t/blocking/rank3.cpp
// CHECK: training: 4 iterations, loss {{.*}}, worst loss difference {{.*}}, worst weight difference {{.*}}
// GATHERS: 8
flexpipe.pipeline @clip_mixed actors(4) microbatches(8) {
  flexpipe.module @image layers(4) placement(circular) chunks(2) actors [0, 1]
  flexpipe.module @text layers(2) placement(one_to_one) actors [2, 3]
  flexpipe.stage @sync actors [1, 3]
  flexpipe.instruction @sync_states kind(all_gather) on(@sync) async
  flexpipe.dependency fwd @image[-1] -> @sync_states @sync
  flexpipe.dependency fwd @text[-1] -> @sync_states @sync
  flexpipe.dependency @sync_states @sync -> bwd @image[-1]
  flexpipe.dependency @sync_states @sync -> bwd @text[-1]
  flexpipe.priority @image cttp<interleaved> fstp<breadth_first, 2> bstp<depth_first, 2>
  flexpipe.inflight @image per_actor affine_map<(a)[pp, s, m] -> (s + pp - a * 2 - 1)>
  flexpipe.priority @text cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight @text per_actor affine_map<(a)[pp, s, m] -> (pp - a + 2)>
}
