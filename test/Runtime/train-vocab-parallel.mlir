// Vocabulary parallelism: the token embedding (stage 0) and the LM head +
// loss (stage 3) are shared stages split along the vocabulary over every
// actor; the stage after the embedding sums the actors' parts, the stage
// before the head holds the final LayerNorm and sums the head's partial input
// gradients, and each head slice's all-gather exchanges the softmax
// statistics. Trained with mpirun and compared with the single-process
// reference like train.mlir (losses within 1e-5 relative, final weights,
// joined from their vocabulary slices, within 1e-4).
// REQUIRES: mpi

// The program below, 2 actors, 1F1B: trained, and lowered to calls of the
// all-gather with the actors of each shared stage in the description.
// RUN: rm -rf %t && mkdir -p %t
// The CUDA backend does not run it: flexpipe-compile says so (the ranks
// were built and each stopped at start-up).
// RUN: not flexpipe-compile %s --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --backend=cuda-emulation --emit=cpp -o %t/cuda 2>&1 | FileCheck %s --check-prefix=CUDA-VOCAB
// CUDA-VOCAB: error: 'flexpipe.schedule' op has vocabulary-parallel stages (a shared token embedding or LM head), which the cuda backend does not run; compile it with --backend=cpu
// RUN: %train vp2 %s | FileCheck %s
// RUN: FileCheck %s --check-prefix=DESC < %t/vp2/schedule.txt
// RUN: FileCheck %s --check-prefix=CALLS < %t/vp2/rank1.cpp
// DESC: stage 0 actor 0 blocks 0 0 first_last 1 0 shared 0 1
// DESC: stage 3 actor 0 blocks 8 0 first_last 0 1 shared 0 1
// CALLS: flexpipe_rt_fwd(v1, 3, [[MB:[a-z0-9]+]]);
// CALLS-NEXT: flexpipe_rt_all_gather(v1, 3, [[MB]]);

// The same shape generated for 4 actors (vocab-parallel-schedule.py); split
// backward (igrad and wgrad of every stage, the embedding's and the head's
// weight gradients at the end) with asynchronous all-gathers; a bidirectional
// pipeline (one embedding and head per direction, both slices of each on
// every actor); and data parallelism 2 x pp 2 (each replica's own groups).
// RUN: python3 %S/vocab-parallel-schedule.py 4 8 > %t/vp4.mlir
// RUN: %train vp4 %t/vp4.mlir | FileCheck %s
// RUN: python3 %S/vocab-parallel-schedule.py 4 8 --split-backward --async-gather > %t/vp4-split.mlir
// RUN: %train vp4-split %t/vp4-split.mlir | FileCheck %s
// Actor 2 gathers each of the 8 micro-batches' head statistics, and its
// rank program (where loops hold most of them) only asynchronously.
// RUN: flexpipe-compile %t/vp4-split.mlir --emit=schedule | awk '/flexpipe.actor 2 /{f=1} /flexpipe.actor 3 /{f=0} f' | grep -c 'flexpipe.all_gather .*: !flexpipe.token' | FileCheck %s --check-prefix=ASYNC
// RUN: grep -q flexpipe_rt_all_gather_async %t/vp4-split/rank2.cpp
// RUN: not grep -q 'flexpipe_rt_all_gather(' %t/vp4-split/rank2.cpp
// RUN: python3 %S/vocab-parallel-schedule.py 2 4 --bidirectional --split-backward > %t/vp2-bidirectional.mlir
// RUN: %train vp2-bidirectional %t/vp2-bidirectional.mlir | FileCheck %s
// RUN: %train vp2-dp2 %s --dp 2 | FileCheck %s
// CHECK: training: 4 iterations, loss {{.*}}, worst loss difference {{.*}}, worst weight difference {{.*}}, 101 parameters
// ASYNC: 8

// The weights of a rank are slices: actor 1 holds the second half of the
// vocabulary's embedding rows and LM head columns, and no position embedding.
// RUN: cut -d' ' -f1 %t/vp2/weights.actor1 | FileCheck %s --check-prefix=SLICES
// SLICES: embedding.token[128:256,0:64]/256x64
// SLICES-NOT: embedding.position
// SLICES: head.ln.gain
// SLICES: head.weight[0:64,128:256]/64x256

flexpipe.schedule @vocab_parallel actors(2) stages(4) microbatches(4) edges [0 -> 1, 1 -> 2, 2 -> 3] shared [0, 3]
    stage_info [#flexpipe.stage_info<"gpt", 0, first>, #flexpipe.stage_info<"gpt", 4>, #flexpipe.stage_info<"gpt", 4>, #flexpipe.stage_info<"gpt", 0, last>] {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.recv_act stage 1 mb 0 from 1
    flexpipe.fwd stage 1 mb 0
    flexpipe.send_act stage 1 mb 0 to 1
    flexpipe.recv_act stage 3 mb 0 from 1
    flexpipe.fwd stage 3 mb 0
    flexpipe.all_gather stage 3 mb 0 group [0, 1]
    flexpipe.bwd stage 3 mb 0
    flexpipe.send_grad stage 3 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    flexpipe.recv_act stage 1 mb 1 from 1
    flexpipe.fwd stage 1 mb 1
    flexpipe.send_act stage 1 mb 1 to 1
    flexpipe.recv_grad stage 1 mb 0 from 1
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_act stage 3 mb 1 from 1
    flexpipe.fwd stage 3 mb 1
    flexpipe.all_gather stage 3 mb 1 group [0, 1]
    flexpipe.bwd stage 3 mb 1
    flexpipe.send_grad stage 3 mb 1 to 1
    flexpipe.fwd stage 0 mb 2
    flexpipe.recv_act stage 1 mb 2 from 1
    flexpipe.fwd stage 1 mb 2
    flexpipe.send_act stage 1 mb 2 to 1
    flexpipe.recv_grad stage 1 mb 1 from 1
    flexpipe.bwd stage 1 mb 1
    flexpipe.send_grad stage 1 mb 1 to 1
    flexpipe.bwd stage 0 mb 1
    flexpipe.recv_act stage 3 mb 2 from 1
    flexpipe.fwd stage 3 mb 2
    flexpipe.all_gather stage 3 mb 2 group [0, 1]
    flexpipe.bwd stage 3 mb 2
    flexpipe.send_grad stage 3 mb 2 to 1
    flexpipe.fwd stage 0 mb 3
    flexpipe.recv_act stage 1 mb 3 from 1
    flexpipe.fwd stage 1 mb 3
    flexpipe.send_act stage 1 mb 3 to 1
    flexpipe.recv_grad stage 1 mb 2 from 1
    flexpipe.bwd stage 1 mb 2
    flexpipe.send_grad stage 1 mb 2 to 1
    flexpipe.bwd stage 0 mb 2
    flexpipe.recv_act stage 3 mb 3 from 1
    flexpipe.fwd stage 3 mb 3
    flexpipe.all_gather stage 3 mb 3 group [0, 1]
    flexpipe.bwd stage 3 mb 3
    flexpipe.send_grad stage 3 mb 3 to 1
    flexpipe.recv_grad stage 1 mb 3 from 1
    flexpipe.bwd stage 1 mb 3
    flexpipe.send_grad stage 1 mb 3 to 1
    flexpipe.bwd stage 0 mb 3
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 0
    flexpipe.recv_act stage 2 mb 0 from 0
    flexpipe.fwd stage 2 mb 0
    flexpipe.send_act stage 2 mb 0 to 0
    flexpipe.fwd stage 3 mb 0
    flexpipe.all_gather stage 3 mb 0 group [0, 1]
    flexpipe.bwd stage 3 mb 0
    flexpipe.fwd stage 0 mb 1
    flexpipe.send_act stage 0 mb 1 to 0
    flexpipe.recv_grad stage 2 mb 0 from 0
    flexpipe.bwd stage 2 mb 0
    flexpipe.send_grad stage 2 mb 0 to 0
    flexpipe.recv_grad stage 0 mb 0 from 0
    flexpipe.bwd stage 0 mb 0
    flexpipe.recv_act stage 2 mb 1 from 0
    flexpipe.fwd stage 2 mb 1
    flexpipe.send_act stage 2 mb 1 to 0
    flexpipe.fwd stage 3 mb 1
    flexpipe.all_gather stage 3 mb 1 group [0, 1]
    flexpipe.bwd stage 3 mb 1
    flexpipe.fwd stage 0 mb 2
    flexpipe.send_act stage 0 mb 2 to 0
    flexpipe.recv_grad stage 2 mb 1 from 0
    flexpipe.bwd stage 2 mb 1
    flexpipe.send_grad stage 2 mb 1 to 0
    flexpipe.recv_grad stage 0 mb 1 from 0
    flexpipe.bwd stage 0 mb 1
    flexpipe.recv_act stage 2 mb 2 from 0
    flexpipe.fwd stage 2 mb 2
    flexpipe.send_act stage 2 mb 2 to 0
    flexpipe.fwd stage 3 mb 2
    flexpipe.all_gather stage 3 mb 2 group [0, 1]
    flexpipe.bwd stage 3 mb 2
    flexpipe.fwd stage 0 mb 3
    flexpipe.send_act stage 0 mb 3 to 0
    flexpipe.recv_grad stage 2 mb 2 from 0
    flexpipe.bwd stage 2 mb 2
    flexpipe.send_grad stage 2 mb 2 to 0
    flexpipe.recv_grad stage 0 mb 2 from 0
    flexpipe.bwd stage 0 mb 2
    flexpipe.recv_act stage 2 mb 3 from 0
    flexpipe.fwd stage 2 mb 3
    flexpipe.send_act stage 2 mb 3 to 0
    flexpipe.fwd stage 3 mb 3
    flexpipe.all_gather stage 3 mb 3 group [0, 1]
    flexpipe.bwd stage 3 mb 3
    flexpipe.recv_grad stage 2 mb 3 from 0
    flexpipe.bwd stage 2 mb 3
    flexpipe.send_grad stage 2 mb 3 to 0
    flexpipe.recv_grad stage 0 mb 3 from 0
    flexpipe.bwd stage 0 mb 3
  }
}
