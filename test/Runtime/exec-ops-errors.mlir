// Runtime operations that are missing, do not compile or fail: every case
// stops with a message that says what is wrong.
// REQUIRES: mpi
// RUN: rm -rf %t && mkdir -p %t

// Without --ops the ranks build (flexpipe-compile warns) but stop at
// start-up, before any training.
// RUN: flexpipe-compile %s --actors 2 --microbatches 2 -o %t/none 2>&1 | FileCheck %s --check-prefix=WARN
// RUN: not %t/none/run-mpi.sh --iterations 1 > %t/none.log 2>&1
// RUN: FileCheck %s --check-prefix=STARTUP < %t/none.log
// WARN: warning: the program runs @log_norms, but no --ops file was given: the ranks will stop at start-up; pass the source that defines it with --ops FILE.cpp
// STARTUP: flexpipe: the program runs @log_norms but no operation of that name was compiled in; pass its source with flexpipe-compile --ops
// STARTUP-NOT: iteration 0

// --ops files that do not define it: flexpipe-compile asks 'reference' what
// they register and stops at the exec.
// RUN: not flexpipe-compile %s --actors 2 --microbatches 2 --ops %S/Inputs/ProbeOps.cpp -o %t/other 2>&1 | FileCheck %s --check-prefix=OTHER
// OTHER: error: the program runs @log_norms, but no --ops file registers an operation of that name (they register @probe, @probe.grouped); define it with FLEXPIPE_OPERATION(log_norms) from flexpipe/Runtime/UserOps.h
// RUN: not ls %t/other/rank0
// --emit=cpp does not ask; its 'reference', built with those files, stops
// where the ranks stop (it skipped @log_norms with a note to use itself).
// RUN: flexpipe-compile %s --actors 2 --microbatches 2 --ops %S/Inputs/ProbeOps.cpp --emit=cpp -o %t/other-cpp
// RUN: sh %t/other-cpp/build.sh
// RUN: not %t/other-cpp/reference %t/other-cpp/schedule.txt --iterations 1 2>&1 | FileCheck %s --check-prefix=OTHER-REF
// OTHER-REF: reference: the schedule runs operation @log_norms, which none of the --ops files built into this program defines (flexpipe-reference --list-operations lists them)
// OTHER-REF-NOT: iteration 0

// A compile error in the user's file: the compiler's message, then which
// file.
// RUN: not flexpipe-compile %s --actors 2 --microbatches 2 --ops %S/Inputs/BrokenOps.cpp -o %t/broken 2>&1 | FileCheck %s --check-prefix=BROKEN
// BROKEN: BrokenOps.cpp:6:{{[0-9]+}}: error: {{.*}}no_such_member
// BROKEN: flexpipe-compile: cannot compile --ops {{.*}}Inputs/BrokenOps.cpp; the compiler's messages are above

// The same operation defined twice.
// RUN: not flexpipe-compile %s --actors 2 --microbatches 2 --ops %examples/ops/ActivationNorms.cpp --ops %S/Inputs/TwiceOps.cpp -o %t/twice 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: operation @log_norms is registered twice, at {{.*}}ActivationNorms.cpp:{{[0-9]+}} and at {{.*}}TwiceOps.cpp:5
// TWICE: flexpipe-compile: the --ops files' operations cannot be registered; the errors are above

// --ops builds rank programs only, from C++ sources with distinct names.
// RUN: not flexpipe-compile %s --ops %examples/ops/ActivationNorms.cpp --emit=text 2>&1 | FileCheck %s --check-prefix=EMIT
// EMIT: flexpipe-compile: --ops shapes the rank programs; it needs --emit=cpp or --emit=exe, not --emit=text
// RUN: not flexpipe-compile %s --actors 2 --ops %s -o %t/ext 2>&1 | FileCheck %s --check-prefix=EXT
// EXT: flexpipe-compile: --ops {{.*}}exec-ops-errors.mlir: expected a C++ source (.cpp, .cc, .cxx or .C)
// RUN: not flexpipe-compile %s --actors 2 --ops %examples/ops/ActivationNorms.cpp --ops %examples/ops/ActivationNorms.cpp -o %t/same 2>&1 | FileCheck %s --check-prefix=SAME
// SAME: flexpipe-compile: --ops {{.*}}ActivationNorms.cpp: the output directory has another file named 'ActivationNorms' (rank<N>, reference or another --ops file); rename it
// A source named like a rank the compile does not have is refused too (a
// compile removes the rank<N>.cpp beyond its own ranks), and stays as it was.
// RUN: rm -rf %t/keep && mkdir -p %t/keep && cp %examples/ops/ActivationNorms.cpp %t/keep/rank5.cpp
// RUN: not flexpipe-compile %s --actors 2 --ops %t/keep/rank5.cpp -o %t/keep 2>&1 | FileCheck %s --check-prefix=RANK
// RANK: flexpipe-compile: --ops {{.*}}keep/rank5.cpp: the output directory has another file named 'rank5' (rank<N>, reference or another --ops file); rename it
// RUN: cmp %examples/ops/ActivationNorms.cpp %t/keep/rank5.cpp
// The clash is found before anything is written (the rank sources were
// already there).
// RUN: not test -e %t/same
// RUN: not flexpipe-compile %s --actors 2 --ops %t/missing.cpp -o %t/missing 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: --ops: File does not exist: {{.*}}missing.cpp

// An operation that fails stops every rank with what it said, the instance
// and the rank: here @log_norms without its 'file' attribute.
// RUN: sed -e 's/ attrs {file = "norms.txt"}//' %s > %t/nofile.mlir
// RUN: flexpipe-compile %t/nofile.mlir --actors 2 --microbatches 2 --ops %examples/ops/ActivationNorms.cpp -o %t/nofile
// RUN: not %t/nofile/run-mpi.sh --iterations 1 > %t/nofile.log 2>&1
// RUN: FileCheck %s --check-prefix=FAILS < %t/nofile.log
// FAILS: flexpipe: rank 1: operation @log_norms on stage 1 mb 0 (rank 1, iteration 0): needs the string attribute 'file' (attrs {file = ...} on its flexpipe.instruction)
// RUN: cd %t && not %t/nofile/reference %t/nofile/schedule.txt --iterations 1 2>&1 | FileCheck %s --check-prefix=REF-FAILS
// REF-FAILS: flexpipe-reference: operation @log_norms on stage 1 mb 0 (rank 1, iteration 0): needs the string attribute 'file' (attrs {file = ...} on its flexpipe.instruction)
flexpipe.pipeline @log_norms actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.instruction @log_norms kind(compute) on(@gpt[-1]) attrs {file = "norms.txt"}
  flexpipe.dependency fwd @gpt[-1] -> @log_norms @gpt[-1]
}
