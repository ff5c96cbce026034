// The lowering of flexpipe.exec: one flexpipe_rt_exec call per instance with
// the instruction's name, stage, first micro-batch, the number of
// micro-batches it covers and its encoded attributes; an asynchronous exec
// returns a token that flexpipe_rt_wait completes. The schedule description
// lists every instance with the micro-batches whose output it sees (those
// forwarded before it on its actor). --emit=cpp copies the --ops files beside
// the rank sources and writes build.sh.

// RUN: flexpipe-compile --help | FileCheck %s --check-prefix=HELP
// HELP: --ops FILE.cpp:FILE ... C++ source of runtime operations (FLEXPIPE_OPERATION from flexpipe/Runtime/UserOps.h)

// RUN: rm -rf %t && flexpipe-compile %s --emit=cpp --ops %S/Inputs/ProbeOps.cpp -o %t
// RUN: FileCheck %s --check-prefix=RANK0 < %t/rank0.cpp
// RUN: FileCheck %s --check-prefix=RANK1 < %t/rank1.cpp
// RUN: FileCheck %s --check-prefix=DESC < %t/schedule.txt
// RUN: FileCheck %s --check-prefix=BUILD < %t/build.sh
// RUN: diff %S/Inputs/ProbeOps.cpp %t/ProbeOps.cpp
// RUN: FileCheck %s --check-prefix=REFERENCE < %t/reference.cpp

// RANK0:      void flexpipe_program(flexpipe_rt* [[RT:v[0-9]+]]) {
// RANK0-NEXT:   int64_t [[TOKEN:v[0-9]+]] = flexpipe_rt_exec_async([[RT]], "probe", 0, 0, 1, "file=s:early");
// RANK0-NEXT:   flexpipe_rt_fwd([[RT]], 0, 0);
// RANK0-NEXT:   flexpipe_rt_wait([[RT]], [[TOKEN]]);
// RANK0:        flexpipe_rt_fwd([[RT]], 0, 1);
// RANK0-NEXT:   flexpipe_rt_exec([[RT]], "probe", 0, 1, 1, "count=i:7 file=s:late label=s:two%20words%22%25%3F ratio=f:0.5 verbose=b:true");
// RANK1:        flexpipe_rt_fwd([[RT:v[0-9]+]], 1, 1);
// RANK1-NEXT:   flexpipe_rt_exec([[RT]], "probe.grouped", 1, 0, 2, "file=s:grouped quiet=u:");
// RANK1-NEXT:   flexpipe_rt_bwd([[RT]], 1, 0);

// DESC:      edge 0 1
// DESC-NEXT: exec probe stage 0 actor 0 mb 0 count 1 outputs - file=s:early
// DESC-NEXT: exec probe stage 0 actor 0 mb 1 count 1 outputs 1 count=i:7 file=s:late label=s:two%20words%22%25%3F ratio=f:0.5 verbose=b:true
// DESC-NEXT: exec probe.grouped stage 1 actor 1 mb 0 count 2 outputs 0,1 file=s:grouped quiet=u:
// DESC-NOT:  exec

// BUILD:      #!/bin/sh
// BUILD:      # --emit=exe does, with the runtime operations of ProbeOps.cpp compiled in,
// BUILD-NEXT: # and 'reference' (flexpipe-reference with them). Then launch them with run-mpi.sh beside this
// BUILD-NEXT: # script, which passes its arguments (--iterations N, --lr X, ...) on to every
// BUILD-NEXT: # rank.
// BUILD-NEXT: set -e
// BUILD-NEXT: # (Not through CDPATH, and a directory named -x is no option; started through
// BUILD-NEXT: # a symbolic link, the directory is the link's target's.)
// BUILD-NEXT: CDPATH= cd -P -- "$(dirname -- "$(readlink -f -- "$0")")"
// BUILD-NEXT: {{.*}} -std=c++17 -O2 -I{{.*}}runtime/include{{.*}} -I{{.*}}test/Runtime/Inputs -c ProbeOps.cpp -o ProbeOps.o
// BUILD-NEXT: {{.*}} -std=c++17 -O2 -I{{.*}}runtime/include{{.*}} reference.cpp ProbeOps.o -o reference {{.*}}libFlexPipeRuntime.a -lopenblas
// BUILD-NEXT: {{.*}} -std=c++17 -O2 -I{{.*}}runtime/include{{.*}} rank0.cpp ProbeOps.o -o rank0 {{.*}}libflexpipe_rt_cpu.a {{.*}}libFlexPipeRuntime.a -lopenblas
// BUILD-NEXT: {{.*}} -std=c++17 -O2 -I{{.*}}runtime/include{{.*}} rank1.cpp ProbeOps.o -o rank1 {{.*}}libflexpipe_rt_cpu.a {{.*}}libFlexPipeRuntime.a -lopenblas

// REFERENCE: return flexpipe::rt::runReference(argc, argv, /*withOperations=*/true);

module {
  flexpipe.schedule @handwritten actors(2) stages(2) microbatches(2) stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
    flexpipe.actor 0 {
      // Before the forward: the operation sees no output of mb 0.
      %t = flexpipe.exec @probe stage 0 mb 0 attrs {file = "early"} : !flexpipe.token
      flexpipe.fwd stage 0 mb 0
      flexpipe.wait %t
      flexpipe.send_act stage 0 mb 0 to 1
      flexpipe.fwd stage 0 mb 1
      flexpipe.exec @probe stage 0 mb 1 attrs {file = "late", count = 7, ratio = 0.5, verbose = true, label = "two words\"%?"}
      flexpipe.send_act stage 0 mb 1 to 1
      flexpipe.recv_grad stage 0 mb 0 from 1
      flexpipe.bwd stage 0 mb 0
      flexpipe.recv_grad stage 0 mb 1 from 1
      flexpipe.bwd stage 0 mb 1
    }
    flexpipe.actor 1 {
      flexpipe.recv_act stage 1 mb 0 from 0
      flexpipe.fwd stage 1 mb 0
      flexpipe.recv_act stage 1 mb 1 from 0
      flexpipe.fwd stage 1 mb 1
      // The only instance on stage 1 covers both micro-batches.
      flexpipe.exec @probe.grouped stage 1 mb 0 attrs {file = "grouped", quiet}
      flexpipe.bwd stage 1 mb 0
      flexpipe.send_grad stage 1 mb 0 to 0
      flexpipe.bwd stage 1 mb 1
      flexpipe.send_grad stage 1 mb 1 to 0
    }
  }
}
