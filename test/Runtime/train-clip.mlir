// The two-tower (CLIP-style) model: two GPT-style towers, each one pipeline
// on its own actors, joined after every micro-batch's last forwards by the
// all-gather of a registered sync stage, and a symmetric contrastive loss
// (docs/Runtime.md). Each run is trained with mpirun and compared with the
// single-process reference like train.mlir (losses within 1e-5 relative,
// final weights within 1e-4, and the loss falls).
// REQUIRES: mpi

// The program below: the image tower's 4 layers on actors 0 and 1, circular
// with 2 chunks (stages 0-3), the text tower's 2 layers on actors 2 and 3,
// one to one (stages 4 and 5), blocking all-gathers of sync stage 6 among the
// towers' last actors 1 and 3.
// RUN: rm -rf %t && mkdir -p %t
// The CUDA backend does not run it: flexpipe-compile says so (the ranks
// were built and each stopped at start-up).
// RUN: not flexpipe-compile %s --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --backend=cuda-emulation --emit=cpp -o %t/cuda 2>&1 | FileCheck %s --check-prefix=CUDA-TOWERS
// CUDA-TOWERS: error: 'flexpipe.schedule' op has the two-tower model (towers joined by a contrastive loss), which the cuda backend does not run; compile it with --backend=cpu
// RUN: %train clip %s --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml | FileCheck %s
// RUN: FileCheck %s --check-prefix=DESC < %t/clip/schedule.txt
// RUN: FileCheck %s --check-prefix=CALLS < %t/clip/rank1.cpp
// Every rank's measured peak memory is within 0.75-1.10x the cost model's
// (a tower's end keeps its final norm's input, and its gradient from the
// input gradient on: unpriced, the towers' last ranks measured 1.09x and
// 1.16x on one micro-batch).
// RUN: python3 -c "import sys; rows = [[float(x) for x in l.split(':')[1].split('KiB')[:-1]] for l in open(sys.argv[1]) if 'per rank:' in l]; r = [m / p for m, p in zip(*rows)]; print(len(r), 'within' if all(0.75 <= x <= 1.10 for x in r) else r)" %t/clip/run.log | FileCheck %s --check-prefix=MEMORY
// MEMORY: 4 within
// DESC: model microbatch=4 seed=1234 embed=32
// DESC-NEXT: tower image vocab=64 seq=8 hidden=32 heads=2 layers=4
// DESC-NEXT: tower text vocab=128 seq=12 hidden=48 heads=4 layers=2
// DESC-NEXT: stage 0 actor 0 blocks 0 1 first_last 1 0 tower 0
// DESC-NEXT: stage 1 actor 1 blocks 1 1 first_last 0 0 tower 0
// DESC-NEXT: stage 2 actor 0 blocks 2 1 first_last 0 0 tower 0
// DESC-NEXT: stage 3 actor 1 blocks 3 1 first_last 0 1 tower 0
// DESC-NEXT: stage 4 actor 2 blocks 0 1 first_last 1 0 tower 1
// DESC-NEXT: stage 5 actor 3 blocks 1 1 first_last 0 1 tower 1
// DESC-NEXT: stage 6 actor 1 blocks 0 0 first_last 0 0 sync 1 3
// DESC-NEXT: edge 0 1
// CALLS: flexpipe_rt_fwd(v1, 3, [[MB:[a-z0-9]+]]);
// CALLS-NEXT: flexpipe_rt_all_gather(v1, 6, [[MB]]);
// CALLS-NEXT: flexpipe_rt_bwd(v1, 3, [[MB]]);

// Each tower's parameters carry its name: actor 1 holds the image tower's
// blocks 1 and 3 and its head (final norm and projection), actor 3 the text
// tower's block 1 and head.
// RUN: cut -d' ' -f1 %t/clip/weights.actor1 | FileCheck %s --check-prefix=IMAGE
// IMAGE: image.block1.ln1.gain
// IMAGE: image.block3.ln1.gain
// IMAGE: image.head.ln.gain
// IMAGE-NEXT: image.head.ln.bias
// IMAGE-NEXT: image.head.projection
// RUN: cut -d' ' -f1 %t/clip/weights.actor3 | FileCheck %s --check-prefix=TEXT
// TEXT: text.block1.ln1.gain
// TEXT: text.head.projection

// The same towers with split backward (the last stages' weight gradients at
// the end of the programs), asynchronous all-gathers and asynchronous
// transfers (clip-schedule.py).
// RUN: python3 %S/clip-schedule.py --tower image 4 0,1 2 --tower text 2 2,3 1 --split-backward --async-gather --async-p2p > %t/clip-async.mlir
// RUN: %train clip-async %t/clip-async.mlir --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml | FileCheck %s
// Actor 3 gathers for each of its 4 micro-batches, and its rank program
// (where loops may hold them) only asynchronously.
// RUN: flexpipe-compile %t/clip-async.mlir --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=schedule | awk '/flexpipe.actor 3 /{f=1} f' | grep -c 'flexpipe.all_gather .*: !flexpipe.token' | FileCheck %s --check-prefix=ASYNC
// RUN: grep -q flexpipe_rt_all_gather_async %t/clip-async/rank3.cpp
// RUN: not grep -q 'flexpipe_rt_all_gather(' %t/clip-async/rank3.cpp
// ASYNC: 4

// Towers numbered against their stages: the text tower (first in the stage
// order, one stage that is first and last, on actor 0) and the image tower
// circular on actors 1 and 2; tower 0 is still the model file's first
// module, the image tower. Six micro-batches.
// RUN: python3 %S/clip-schedule.py --tower text 2 0 1 --tower image 4 1,2 2 --microbatches 6 --split-backward --async-gather > %t/clip-mixed.mlir
// RUN: %train clip-mixed %t/clip-mixed.mlir --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml | FileCheck %s
// RUN: FileCheck %s --check-prefix=MIXED < %t/clip-mixed/schedule.txt
// MIXED: stage 0 actor 0 blocks 0 2 first_last 1 1 tower 1
// MIXED: stage 4 actor 2 blocks 3 1 first_last 0 1 tower 0
// MIXED: stage 5 actor 0 blocks 0 0 first_last 0 0 sync 0 2

// Towers sharing an actor: actor 1 runs the image tower's stages 1 and 3
// (its last) and the text tower's first stage.
// RUN: python3 %S/clip-schedule.py --tower image 4 0,1 2 --tower text 2 1,2 1 > %t/clip-overlap.mlir
// RUN: %train clip-overlap %t/clip-overlap.mlir --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml | FileCheck %s

// Data parallelism: two replicas, each with its own sync group: 8 ranks, on
// the CPU cluster grown to 8 of them.
// RUN: sed 's/^devices: 4/devices: 8/' %S/../../configs/clusters/cpu.yaml > %t/cpu-8.yaml
// RUN: %train clip-dp2 %s --dp 2 --model %S/../../configs/models/clip-tiny.yaml --cluster %t/cpu-8.yaml | FileCheck %s

// CHECK: training: 4 iterations, loss {{.*}}, worst loss difference {{.*}}, worst weight difference {{.*}}, 82 parameters

flexpipe.schedule @clip actors(4) stages(7) microbatches(4)
    edges [0 -> 1, 1 -> 2, 2 -> 3, 4 -> 5]
    stage_info [#flexpipe.stage_info<"image", 1, first>, #flexpipe.stage_info<"image", 1>, #flexpipe.stage_info<"image", 1>, #flexpipe.stage_info<"image", 1, last>, #flexpipe.stage_info<"text", 1, first>, #flexpipe.stage_info<"text", 1, last>, #flexpipe.stage_info<"sync", 0>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.recv_act stage 2 mb 0 from 1
    flexpipe.fwd stage 2 mb 0
    flexpipe.send_act stage 2 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    flexpipe.send_act stage 0 mb 1 to 1
    flexpipe.recv_grad stage 2 mb 0 from 1
    flexpipe.bwd stage 2 mb 0
    flexpipe.send_grad stage 2 mb 0 to 1
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_act stage 2 mb 1 from 1
    flexpipe.fwd stage 2 mb 1
    flexpipe.send_act stage 2 mb 1 to 1
    flexpipe.fwd stage 0 mb 2
    flexpipe.send_act stage 0 mb 2 to 1
    flexpipe.recv_grad stage 2 mb 1 from 1
    flexpipe.bwd stage 2 mb 1
    flexpipe.send_grad stage 2 mb 1 to 1
    flexpipe.recv_grad stage 0 mb 1 from 1
    flexpipe.bwd stage 0 mb 1
    flexpipe.recv_act stage 2 mb 2 from 1
    flexpipe.fwd stage 2 mb 2
    flexpipe.send_act stage 2 mb 2 to 1
    flexpipe.fwd stage 0 mb 3
    flexpipe.send_act stage 0 mb 3 to 1
    flexpipe.recv_grad stage 2 mb 2 from 1
    flexpipe.bwd stage 2 mb 2
    flexpipe.send_grad stage 2 mb 2 to 1
    flexpipe.recv_grad stage 0 mb 2 from 1
    flexpipe.bwd stage 0 mb 2
    flexpipe.recv_act stage 2 mb 3 from 1
    flexpipe.fwd stage 2 mb 3
    flexpipe.send_act stage 2 mb 3 to 1
    flexpipe.recv_grad stage 2 mb 3 from 1
    flexpipe.bwd stage 2 mb 3
    flexpipe.send_grad stage 2 mb 3 to 1
    flexpipe.recv_grad stage 0 mb 3 from 1
    flexpipe.bwd stage 0 mb 3
  }
  flexpipe.actor 1 {
    flexpipe.recv_act stage 1 mb 0 from 0
    flexpipe.fwd stage 1 mb 0
    flexpipe.send_act stage 1 mb 0 to 0
    flexpipe.recv_act stage 3 mb 0 from 0
    flexpipe.fwd stage 3 mb 0
    flexpipe.all_gather stage 6 mb 0 group [1, 3]
    flexpipe.bwd stage 3 mb 0
    flexpipe.send_grad stage 3 mb 0 to 0
    flexpipe.recv_grad stage 1 mb 0 from 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
    flexpipe.recv_act stage 1 mb 1 from 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.send_act stage 1 mb 1 to 0
    flexpipe.recv_act stage 3 mb 1 from 0
    flexpipe.fwd stage 3 mb 1
    flexpipe.all_gather stage 6 mb 1 group [1, 3]
    flexpipe.bwd stage 3 mb 1
    flexpipe.send_grad stage 3 mb 1 to 0
    flexpipe.recv_grad stage 1 mb 1 from 0
    flexpipe.bwd stage 1 mb 1
    flexpipe.send_grad stage 1 mb 1 to 0
    flexpipe.recv_act stage 1 mb 2 from 0
    flexpipe.fwd stage 1 mb 2
    flexpipe.send_act stage 1 mb 2 to 0
    flexpipe.recv_act stage 3 mb 2 from 0
    flexpipe.fwd stage 3 mb 2
    flexpipe.all_gather stage 6 mb 2 group [1, 3]
    flexpipe.bwd stage 3 mb 2
    flexpipe.send_grad stage 3 mb 2 to 0
    flexpipe.recv_grad stage 1 mb 2 from 0
    flexpipe.bwd stage 1 mb 2
    flexpipe.send_grad stage 1 mb 2 to 0
    flexpipe.recv_act stage 1 mb 3 from 0
    flexpipe.fwd stage 1 mb 3
    flexpipe.send_act stage 1 mb 3 to 0
    flexpipe.recv_act stage 3 mb 3 from 0
    flexpipe.fwd stage 3 mb 3
    flexpipe.all_gather stage 6 mb 3 group [1, 3]
    flexpipe.bwd stage 3 mb 3
    flexpipe.send_grad stage 3 mb 3 to 0
    flexpipe.recv_grad stage 1 mb 3 from 0
    flexpipe.bwd stage 1 mb 3
    flexpipe.send_grad stage 1 mb 3 to 0
  }
  flexpipe.actor 2 {
    flexpipe.fwd stage 4 mb 0
    flexpipe.send_act stage 4 mb 0 to 3
    flexpipe.fwd stage 4 mb 1
    flexpipe.send_act stage 4 mb 1 to 3
    flexpipe.recv_grad stage 4 mb 0 from 3
    flexpipe.bwd stage 4 mb 0
    flexpipe.fwd stage 4 mb 2
    flexpipe.send_act stage 4 mb 2 to 3
    flexpipe.recv_grad stage 4 mb 1 from 3
    flexpipe.bwd stage 4 mb 1
    flexpipe.fwd stage 4 mb 3
    flexpipe.send_act stage 4 mb 3 to 3
    flexpipe.recv_grad stage 4 mb 2 from 3
    flexpipe.bwd stage 4 mb 2
    flexpipe.recv_grad stage 4 mb 3 from 3
    flexpipe.bwd stage 4 mb 3
  }
  flexpipe.actor 3 {
    flexpipe.recv_act stage 5 mb 0 from 2
    flexpipe.fwd stage 5 mb 0
    flexpipe.all_gather stage 6 mb 0 group [1, 3]
    flexpipe.bwd stage 5 mb 0
    flexpipe.send_grad stage 5 mb 0 to 2
    flexpipe.recv_act stage 5 mb 1 from 2
    flexpipe.fwd stage 5 mb 1
    flexpipe.all_gather stage 6 mb 1 group [1, 3]
    flexpipe.bwd stage 5 mb 1
    flexpipe.send_grad stage 5 mb 1 to 2
    flexpipe.recv_act stage 5 mb 2 from 2
    flexpipe.fwd stage 5 mb 2
    flexpipe.all_gather stage 6 mb 2 group [1, 3]
    flexpipe.bwd stage 5 mb 2
    flexpipe.send_grad stage 5 mb 2 to 2
    flexpipe.recv_act stage 5 mb 3 from 2
    flexpipe.fwd stage 5 mb 3
    flexpipe.all_gather stage 6 mb 3 group [1, 3]
    flexpipe.bwd stage 5 mb 3
    flexpipe.send_grad stage 5 mb 3 to 2
  }
}
