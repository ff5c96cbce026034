// Runtime operations bound to registered compute instructions
// (flexpipe-compile --ops): compiled into every rank and into 'reference',
// run where the programs run flexpipe.exec, and run by the reference in the
// same places, so that both write the same lines and training still matches.
// REQUIRES: mpi

// The example: @log_norms after every forward of the last stage appends the
// L2 norm of its output to norms.txt.rankR. 2 actors, 4 micro-batches, 4
// iterations: 16 lines on rank 1, each norm positive and bitwise the
// reference's.
// RUN: rm -rf %t && mkdir -p %t/norms/run %t/norms/ref %t/probe/run %t/probe/ref
// RUN: flexpipe-compile %examples/ops/log-norms.mlir --actors 2 --microbatches 4 --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --ops %examples/ops/ActivationNorms.cpp -o %t/norms/exe
// RUN: cd %t/norms/run && %t/norms/exe/run-mpi.sh --iterations 4 --losses %t/norms/losses --weights %t/norms/weights > %t/norms/run.log
// RUN: cd %t/norms/ref && %t/norms/exe/reference %t/norms/exe/schedule.txt --iterations 4 --losses %t/norms/ref-losses --weights %t/norms/ref-weights > %t/norms/ref.log
// RUN: python3 %S/../../scripts/compare-training.py %t/norms/losses %t/norms/ref-losses %t/norms/weights %t/norms/ref-weights | FileCheck %s --check-prefix=TRAIN
// RUN: python3 %S/compare-op-logs.py %t/norms/run %t/norms/ref norms.txt --positive | FileCheck %s --check-prefix=NORMS
// RUN: FileCheck %s --check-prefix=NORM-LINES < %t/norms/run/norms.txt.rank1
// TRAIN: training: 4 iterations, loss {{.*}}, worst loss difference 0.00e+00, worst weight difference 0.00e+00, {{[0-9]+}} parameters
// NORMS:      norms.txt.rank1: 16 lines, same as the reference
// NORMS-NEXT: norms.txt: 1 files, 16 lines, all match
// NORM-LINES:      iteration 0 stage 1 mb 0 norm {{[0-9.]+}}
// NORM-LINES-NEXT: iteration 0 stage 1 mb 1 norm {{[0-9.]+}}
// NORM-LINES:      iteration 3 stage 1 mb 3 norm {{[0-9.]+}}

// A run's profile times its registered operations (exec_s), which a
// report from that profile alone prices instead of one unit (1 s) each.
// RUN: mkdir -p %t/norms/prof && cd %t/norms/prof && %t/norms/exe/run-mpi.sh --iterations 3 --profile %t/norms/p.yaml > /dev/null
// RUN: FileCheck %s --check-prefix=EXECS < %t/norms/p.yaml
// RUN: flexpipe-compile %examples/ops/log-norms.mlir --actors 2 --microbatches 4 --profile %t/norms/p.yaml --emit=report | FileCheck %s --check-prefix=EXECS-REPORT
// EXECS: instruction_s: {{[0-9][0-9.]*(e-[0-9]+)?$}}
// EXECS-NEXT: exec_s: {{[0-9][0-9.]*(e-[0-9]+)?$}}
// EXECS-REPORT: iteration time {{[0-9.]+}} ms

// The directory holds the operations' source, its object and 'reference',
// which lists what the ranks have compiled in.
// RUN: ls %t/norms/exe | FileCheck %s --check-prefix=FILES
// FILES:      ActivationNorms.cpp
// FILES-NEXT: ActivationNorms.o
// FILES-NEXT: rank0
// FILES-NEXT: rank0.cpp
// FILES-NEXT: rank1
// FILES-NEXT: rank1.cpp
// FILES-NEXT: reference
// FILES-NEXT: reference.cpp
// FILES-NEXT: run-mpi.sh
// RUN: %t/norms/exe/reference --list-operations | FileCheck %s --check-prefix=LIST
// LIST: log_norms

// The installed flexpipe-reference, built without the operation, skips it
// and trains the same.
// RUN: cd %t/norms && flexpipe-reference %t/norms/exe/schedule.txt --iterations 4 --losses %t/norms/plain-losses --weights %t/norms/plain-weights 2>&1 > /dev/null | FileCheck %s --check-prefix=SKIP
// RUN: python3 %S/../../scripts/compare-training.py %t/norms/losses %t/norms/plain-losses %t/norms/weights %t/norms/plain-weights | FileCheck %s --check-prefix=TRAIN
// SKIP: flexpipe-reference: note: the schedule runs operation @log_norms, which this program was built without; skipping it (operations only read activations, so training is the same; the 'reference' that flexpipe-compile --ops builds beside the ranks runs it)

// What an operation sees, from test/Runtime/Inputs/ProbeOps.cpp: the spec
// below with dp = 2 (4 ranks). @probe runs after each forward of stage 0 and
// gets every kind of attribute; @probe.grouped covers two micro-batches of
// the last stage at a time (prev(2) next(2)) and sees both outputs. The
// reference writes the same lines for the first iteration (later ones
// differ in the last bits: data parallelism sums gradients in another
// order), and training matches within the usual bounds.
// RUN: flexpipe-compile %s --dp 2 --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --ops %S/Inputs/ProbeOps.cpp -o %t/probe/exe
// RUN: cd %t/probe/run && %t/probe/exe/run-mpi.sh --iterations 3 --losses %t/probe/losses --weights %t/probe/weights > %t/probe/run.log
// RUN: cd %t/probe/ref && %t/probe/exe/reference %t/probe/exe/schedule.txt --iterations 3 --losses %t/probe/ref-losses --weights %t/probe/ref-weights > %t/probe/ref.log
// RUN: python3 %S/../../scripts/compare-training.py %t/probe/losses %t/probe/ref-losses %t/probe/weights %t/probe/ref-weights | FileCheck %s --check-prefix=PROBE-TRAIN
// RUN: python3 %S/compare-op-logs.py %t/probe/run %t/probe/ref probe --iteration 0 | FileCheck %s --check-prefix=PROBE
// RUN: FileCheck %s --check-prefix=PROBE0 < %t/probe/run/probe.rank0
// RUN: FileCheck %s --check-prefix=PROBE1 < %t/probe/run/probe.rank1
// RUN: FileCheck %s --check-prefix=PROBE3 < %t/probe/run/probe.rank3
// PROBE-TRAIN: training: 3 iterations, loss {{.*}}, worst loss difference {{.*}}, worst weight difference {{.*}}, {{[0-9]+}} parameters
// PROBE:      probe.rank0: 4 lines, same as the reference
// PROBE-NEXT: probe.rank1: 4 lines, same as the reference
// PROBE-NEXT: probe.rank2: 2 lines, same as the reference
// PROBE-NEXT: probe.rank3: 2 lines, same as the reference
// PROBE-NEXT: probe: 4 files, 12 lines, all match
// PROBE0:      it 0 probe stage 0 mb 0 count 1 rank 0/4 actor 0 replica 0 attrs count=-3/-3.000000 file='probe' flag=true off=false on=true scale=0.250000 text='a b"%c\d' missing=fallback outputs 0:1x32x64:{{[0-9.]+}}
// PROBE0-NEXT: it 0 probe stage 0 mb 1 count 1 rank 0/4 actor 0 replica 0 {{.*}} outputs 1:1x32x64:{{[0-9.]+}}
// Rank r runs actor r / 2 of replica r mod 2 (the device the cost model
// prices it on): rank 1 is actor 0's second replica.
// PROBE1:      it 0 probe stage 0 mb 0 count 1 rank 1/4 actor 0 replica 1 attrs
// PROBE3:      it 0 probe.grouped stage 1 mb 0 count 2 rank 3/4 actor 1 replica 1 attrs file='probe' missing=fallback outputs 0:1x32x64:{{[0-9.]+}} 1:1x32x64:{{[0-9.]+}}
// PROBE3-NEXT: it 0 probe.grouped stage 1 mb 2 count 2 rank 3/4 actor 1 replica 1 attrs file='probe' missing=fallback outputs 2:1x32x64:{{[0-9.]+}} 3:1x32x64:{{[0-9.]+}}
// The hand-written schedule of exec-lowering.mlir, built by the build.sh
// that --emit=cpp writes and launched by --emit=exe's run-mpi.sh: an
// asynchronous exec before its forward sees no output, the grouped one on
// stage 1 both; the reference agrees bitwise (dp = 1).
// RUN: mkdir -p %t/hand/run %t/hand/ref
// RUN: flexpipe-compile %S/exec-lowering.mlir --emit=cpp --ops %S/Inputs/ProbeOps.cpp -o %t/hand/cpp
// (From a relative path with a CDPATH that names another cpp/: build.sh
// built there.)
// RUN: mkdir -p %t/hand/decoy/cpp && cd %t/hand && env CDPATH=%t/hand/decoy sh cpp/build.sh
// An --ops file named like an option: build.sh named it as one ("g++:
// error: unrecognized command-line option '-probe.cpp'").
// RUN: mkdir -p %t/dash && cp %S/Inputs/ProbeOps.cpp %t/dash/-probe.cpp
// RUN: cd %t/dash && flexpipe-compile %S/exec-lowering.mlir --emit=cpp --ops ./-probe.cpp -o cpp && sh cpp/build.sh && test -x cpp/rank1
// --emit=exe given it as -probe.cpp passed it to the compiler as an
// option too; a stand-in compiler records its arguments (and builds
// nothing, so the compile fails after).
// RUN: printf '#!/bin/sh\necho "$@" >> %t/dash/cxx.log\n' > %t/dash/cxx && chmod +x %t/dash/cxx
// RUN: cd %t/dash && not env FLEXPIPE_CXX=%t/dash/cxx flexpipe-compile %S/exec-lowering.mlir --emit=exe --ops=-probe.cpp -o exe 2> /dev/null
// RUN: FileCheck %s --check-prefix=DASH-EXE < %t/dash/cxx.log
// DASH-EXE: -c ./-probe.cpp -o exe/-probe.o
// The runtime's directories and the compiler given relatively, as
// --emit=exe reads them (from where flexpipe-compile runs): build.sh, which
// runs in its own directory, named nothing ("fatal error:
// flexpipe/Runtime/Runtime.h: No such file or directory").
// RUN: rm -rf %t/rel && mkdir -p %t/rel/bin && ln -s %build_dir/lib %t/rel/lib && ln -s %flexpipe_include/../runtime/include %t/rel/inc
// RUN: printf '#!/bin/sh\nexec mpicxx "$@"\n' > %t/rel/bin/cxx && chmod +x %t/rel/bin/cxx
// RUN: cd %t/rel && env FLEXPIPE_RUNTIME_LIB=lib FLEXPIPE_RUNTIME_INCLUDE=inc FLEXPIPE_CXX=bin/cxx flexpipe-compile %S/exec-lowering.mlir --emit=cpp -o cpp
// RUN: cd / && sh %t/rel/cpp/build.sh && test -x %t/rel/cpp/rank1
// RUN: flexpipe-compile %S/exec-lowering.mlir --emit=exe --ops %S/Inputs/ProbeOps.cpp -o %t/hand/exe
// RUN: cp %t/hand/exe/run-mpi.sh %t/hand/cpp/run-mpi.sh
// RUN: cd %t/hand/run && %t/hand/cpp/run-mpi.sh --iterations 2 --losses %t/hand/losses --weights %t/hand/weights > %t/hand/run.log
// RUN: cd %t/hand/ref && %t/hand/cpp/reference %t/hand/cpp/schedule.txt --iterations 2 --losses %t/hand/ref-losses --weights %t/hand/ref-weights > %t/hand/ref.log
// RUN: python3 %S/../../scripts/compare-training.py %t/hand/losses %t/hand/ref-losses %t/hand/weights %t/hand/ref-weights | FileCheck %s --check-prefix=HAND-TRAIN
// RUN: python3 %S/compare-op-logs.py %t/hand/run %t/hand/ref early | FileCheck %s --check-prefix=EARLY
// RUN: python3 %S/compare-op-logs.py %t/hand/run %t/hand/ref late | FileCheck %s --check-prefix=LATE
// RUN: python3 %S/compare-op-logs.py %t/hand/run %t/hand/ref grouped | FileCheck %s --check-prefix=GROUPED
// RUN: FileCheck %s --check-prefix=EARLY-LINE < %t/hand/run/early.rank0
// RUN: FileCheck %s --check-prefix=GROUPED-LINE < %t/hand/run/grouped.rank1
// HAND-TRAIN: training: 2 iterations, loss {{.*}}, worst loss difference 0.00e+00, worst weight difference 0.00e+00, {{[0-9]+}} parameters
// EARLY: early: 1 files, 2 lines, all match
// LATE: late: 1 files, 2 lines, all match
// GROUPED: grouped: 1 files, 2 lines, all match
// EARLY-LINE: it 0 probe stage 0 mb 0 count 1 rank 0/2 actor 0 replica 0 attrs file='early' missing=fallback outputs 0:-
// GROUPED-LINE: it 0 probe.grouped stage 1 mb 0 count 2 rank 1/2 actor 1 replica 0 attrs file='grouped' quiet=true missing=fallback outputs 0:1x32x64:{{[0-9.]+}} 1:1x32x64:{{[0-9.]+}}

// The two-tower model (train-clip-spec.mlir): the output of a tower's last
// stage is its embeddings (micro-batch size x embed), and the reference cuts
// the image tower after its first stage.
// RUN: mkdir -p %t/clip/run %t/clip/ref
// RUN: sed -e 's|^}$|  flexpipe.instruction @probe kind(compute) on(@text[-1]) attrs {file = "text"}\n  flexpipe.instruction @probe.grouped kind(compute) on(@image[0]) attrs {file = "image"}\n  flexpipe.dependency fwd @text[-1] -> @probe @text[-1]\n  flexpipe.dependency fwd @image[0] -> @probe.grouped @image[0]\n}|' %S/train-clip-spec.mlir > %t/clip/spec.mlir
// RUN: flexpipe-compile %t/clip/spec.mlir --model %S/../../configs/models/clip-tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --ops %S/Inputs/ProbeOps.cpp -o %t/clip/exe
// RUN: cd %t/clip/run && %t/clip/exe/run-mpi.sh --iterations 2 --losses %t/clip/losses --weights %t/clip/weights > %t/clip/run.log
// RUN: cd %t/clip/ref && %t/clip/exe/reference %t/clip/exe/schedule.txt --iterations 2 --losses %t/clip/ref-losses --weights %t/clip/ref-weights > %t/clip/ref.log
// RUN: python3 %S/../../scripts/compare-training.py %t/clip/losses %t/clip/ref-losses %t/clip/weights %t/clip/ref-weights | FileCheck %s --check-prefix=CLIP-TRAIN
// RUN: python3 %S/compare-op-logs.py %t/clip/run %t/clip/ref text | FileCheck %s --check-prefix=CLIP-TEXT
// RUN: python3 %S/compare-op-logs.py %t/clip/run %t/clip/ref image | FileCheck %s --check-prefix=CLIP-IMAGE
// RUN: FileCheck %s --check-prefix=EMBEDDINGS < %t/clip/run/text.rank3
// CLIP-TRAIN: training: 2 iterations, loss {{.*}}, worst loss difference 0.00e+00, worst weight difference 0.00e+00, {{[0-9]+}} parameters
// CLIP-TEXT: text: 1 files, 16 lines, all match
// CLIP-IMAGE: image: 1 files, 16 lines, all match
// EMBEDDINGS: it 0 probe stage 5 mb 0 count 1 rank 3/4 actor 3 replica 0 attrs file='text' missing=fallback outputs 0:4x32:{{[0-9.]+}}

// Vocabulary parallelism (train-vocab-parallel-spec.mlir): @gpt[-1] is the
// last transformer stage, which holds the final LayerNorm in front of the
// split head; its output is normalised (squares sum to about tokens x
// hidden = 2048), and the reference cuts its whole head after the norm. The
// split head rounds differently, so the first iteration is compared.
// RUN: mkdir -p %t/vocab/run %t/vocab/ref
// RUN: sed -e 's|^}$|  flexpipe.instruction @probe kind(compute) on(@gpt[-1]) attrs {file = "normed"}\n  flexpipe.dependency fwd @gpt[-1] -> @probe @gpt[-1]\n}|' %S/train-vocab-parallel-spec.mlir > %t/vocab/spec.mlir
// RUN: flexpipe-compile %t/vocab/spec.mlir --ops %S/Inputs/ProbeOps.cpp -o %t/vocab/exe
// RUN: cd %t/vocab/run && %t/vocab/exe/run-mpi.sh --iterations 2 --losses %t/vocab/losses --weights %t/vocab/weights > %t/vocab/run.log
// RUN: cd %t/vocab/ref && %t/vocab/exe/reference %t/vocab/exe/schedule.txt --iterations 2 --losses %t/vocab/ref-losses --weights %t/vocab/ref-weights > %t/vocab/ref.log
// RUN: python3 %S/../../scripts/compare-training.py %t/vocab/losses %t/vocab/ref-losses %t/vocab/weights %t/vocab/ref-weights | FileCheck %s --check-prefix=VOCAB-TRAIN
// RUN: python3 %S/compare-op-logs.py %t/vocab/run %t/vocab/ref normed --iteration 0 | FileCheck %s --check-prefix=VOCAB
// RUN: FileCheck %s --check-prefix=NORMED < %t/vocab/run/normed.rank3
// VOCAB-TRAIN: training: 2 iterations, loss {{.*}}, worst loss difference {{.*}}, worst weight difference {{.*}}, 101 parameters
// VOCAB: normed: 1 files, 8 lines, all match
// NORMED: it 0 probe stage 3 mb 0 count 1 rank 3/4 actor 3 replica 0 attrs file='normed' missing=fallback outputs 0:1x32x64:204{{[0-9]}}.{{[0-9]+}}

flexpipe.pipeline @probe actors(2) microbatches(4) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor [3, 2]
  flexpipe.instruction @probe kind(compute) on(@gpt[0]) attrs {file = "probe", text = "a b\"%c\\d", count = -3, scale = 0.25, on = true, off = false, flag}
  flexpipe.instruction @probe.grouped kind(compute) on(@gpt[-1]) prev(2) next(2) attrs {file = "probe"}
  flexpipe.dependency fwd @gpt[0] -> @probe @gpt[0]
  flexpipe.dependency fwd @gpt[-1] -> @probe.grouped @gpt[-1]
  flexpipe.dependency @probe.grouped @gpt[-1] -> bwd @gpt[-1]
}
