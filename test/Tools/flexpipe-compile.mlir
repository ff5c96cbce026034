// The driver: options, output forms and errors (always exit code 1).

// RUN: flexpipe-compile --help | FileCheck %s --check-prefix=HELP
// HELP: Usage: flexpipe-compile [OPTIONS] spec
// HELP: --from TEXT:{mlir,torch-csv}
// HELP: --actors N
// HELP: --microbatches M
// HELP: --time-model TEXT:{step,cost}=step
// HELP: --step-rule TEXT:{next-type,literal}=next-type
// HELP: --emit TEXT:{schedule,text,torch-csv,torch-csv-comms,report,svg,trace,cpp,exe}=exe
// HELP: --balance TEXT:{layers,cost}=layers
// HELP: --backend TEXT:{cpu,cuda,cuda-emulation}=cpu
// HELP: --dp INT:POSITIVE=1
// HELP: --model TEXT:FILE
// HELP: --cluster TEXT:FILE
// HELP: --profile TEXT:FILE
// HELP: -o,--output TEXT=-

// Sizes from the command line override the spec's.
// RUN: flexpipe-compile %s --actors 2 --microbatches 3 --emit=text | FileCheck %s --check-prefix=GRID
// GRID:      schedule @small: 2 actors, 2 stages, 3 micro-batches, 8 steps when every computation takes one step
// GRID-NEXT: (cells: stage, F forward / B backward / I input gradient / W weight gradient, micro-batch; . idle)
// GRID-NEXT: actor 0 | 0F0 0F1 0F2 .   .   0B0 0B1 0B2
// GRID-NEXT: actor 1 | .   1F0 1F1 1F2 1B0 1B1 1B2 .

// PyTorch's formats: flexpipe-compile-torch.mlir.
// RUN: flexpipe-compile %s --actors 2 --microbatches 2 --emit=torch-csv -o %t.csv
// RUN: FileCheck %s --check-prefix=CSV < %t.csv
// CSV:      0F0,0F1,,,0B0,0B1
// CSV-NEXT: ,1F0,1F1,1B0,1B1

// The verified schedule IR is valid input again.
// RUN: flexpipe-compile %s --emit=schedule -o %t.mlir
// RUN: flexpipe-compile %t.mlir --emit=text | FileCheck %s --check-prefix=AGAIN
// AGAIN: schedule @small: 4 actors, 4 stages, 4 micro-batches

// An output directory holds one schedule's ranks: a rerun replaces an
// earlier output (its extra ranks go), a directory of other files is refused.
// RUN: rm -rf %t.ranks && flexpipe-compile %s --actors 4 --emit=cpp -o %t.ranks
// RUN: flexpipe-compile %s --actors 2 --emit=cpp -o %t.ranks
// RUN: ls %t.ranks | FileCheck %s --check-prefix=REDO
// REDO: build.sh
// REDO-NEXT: rank0.cpp
// REDO-NEXT: rank1.cpp
// REDO-NEXT: run-mpi.sh
// REDO-NEXT: run-slurm.sh
// REDO-NEXT: schedule.txt
// A rerun without a toolchain writes no build.sh, and the earlier one goes
// (it built the four ranks that are gone).
// RUN: env FLEXPIPE_CXX=no-such-cxx flexpipe-compile %s --actors 2 --emit=cpp -o %t.ranks 2>&1 | FileCheck %s --check-prefix=NOTOOL
// NOTOOL: note: no build.sh written
// RUN: not test -e %t.ranks/build.sh
// The generated scripts follow the umask, as the sources do (they were
// 0755 under umask 077).
// RUN: rm -rf %t.private && (umask 077 && flexpipe-compile %s --emit=cpp -o %t.private) && ls -l %t.private | FileCheck %s --check-prefix=UMASK
// UMASK-NOT: r-x
// UMASK: -rwx------ {{.*}} run-mpi.sh
// -o naming a symbolic link to nothing (it said "cannot open output file
// '.../rank0.cpp'").
// RUN: rm -f %t.dangling && ln -s %t.nowhere %t.dangling
// RUN: not flexpipe-compile %s --emit=cpp -o %t.dangling 2>&1 | FileCheck %s --check-prefix=DANGLING
// DANGLING: flexpipe-compile: -o '{{.*}}dangling' is a symbolic link to a directory that does not exist
// RUN: rm -rf %t.other && mkdir %t.other && touch %t.other/notes.txt
// RUN: not flexpipe-compile %s --emit=cpp -o %t.other 2>&1 | FileCheck %s --check-prefix=OTHER
// OTHER: flexpipe-compile: -o '{{.*}}other' holds files but no earlier output of flexpipe-compile (schedule.txt); give a new or empty directory
// A schedule.txt that is no schedule description is no earlier output
// either (the user's rank files beside it were removed).
// RUN: echo user > %t.other/schedule.txt && echo user > %t.other/rank0.cpp
// RUN: not flexpipe-compile %s --emit=cpp -o %t.other 2>&1 | FileCheck %s --check-prefix=OTHER
// RUN: grep user %t.other/rank0.cpp
// The executables of an earlier compile go: an --emit=cpp beside them let
// run-mpi.sh launch the old programs with the new sources' schedule.txt.
// RUN: rm -rf %t.stale && mkdir %t.stale && touch %t.stale/rank0 %t.stale/rank1 %t.stale/reference && printf 'flexpipe-schedule 1\n' > %t.stale/schedule.txt
// RUN: flexpipe-compile %s --actors 2 --emit=cpp -o %t.stale
// RUN: ls %t.stale | FileCheck %s --check-prefix=REDO
// Rank programs are of one schedule: two in a file wrote the second's
// rank sources beside the first's description, and exited 0.
// RUN: cat %schedules/1f1b.mlir %schedules/gpipe.mlir > %t.two.mlir
// RUN: rm -rf %t.two && not flexpipe-compile %t.two.mlir --emit=cpp -o %t.two 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not test -e %t.two
// RUN: not flexpipe-compile %t.two.mlir --emit=exe -o %t.two 2>&1 | FileCheck %s --check-prefix=TWO
// TWO: two.mlir:{{[1-9][0-9]*}}:1: error: --emit={{cpp|exe}} writes one schedule, but '{{.*}}two.mlir' holds 2; keep one pipeline per file
// Explicit edges that spell the default chain are that chain: the model
// file splits its layers over the stages as without them (they read "its
// stages are not one chain").
// RUN: printf 'flexpipe.schedule @s actors(1) stages(2) microbatches(1) edges [0 -> 1] {\n flexpipe.actor 0 {\n flexpipe.fwd stage 0 mb 0\n flexpipe.fwd stage 1 mb 0\n flexpipe.bwd stage 1 mb 0\n flexpipe.bwd stage 0 mb 0\n }\n}\n' > %t.chain.mlir
// RUN: flexpipe-compile %t.chain.mlir --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --emit=report | FileCheck %s --check-prefix=CHAIN
// CHAIN: schedule @s: 1 actor, 2 stages, 1 micro-batch
// RUN: sed 's/edges \[0 -> 1\]/edges [1 -> 0]/' %t.chain.mlir > %t.back.mlir
// RUN: not flexpipe-compile %t.back.mlir --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=NOTCHAIN
// NOTCHAIN: its stages are not one chain

// Errors.
// RUN: not flexpipe-compile %s --emit=png 2>&1 | FileCheck %s --check-prefix=BADEMIT
// BADEMIT: --emit: png not in {schedule,text,torch-csv,torch-csv-comms,report,svg,trace,cpp,exe}
// RUN: not flexpipe-compile %s --microbatches 0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: --microbatches: must be a positive integer, got 0
// RUN: not flexpipe-compile %t.missing.mlir 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: flexpipe-compile: cannot open input file
// Without --model the layer count scales with --actors (layers per stage
// kept); with --model the model's layers count.
// RUN: flexpipe-compile %s --actors 9 --emit=schedule | FileCheck %s --check-prefix=SCALED
// SCALED: stage_info [#flexpipe.stage_info<"gpt", 2, first>, #flexpipe.stage_info<"gpt", 2>,
// RUN: not flexpipe-compile %s --actors 9 --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml 2>&1 | FileCheck %s --check-prefix=TOOMANY
// TOOMANY: error: 'flexpipe.module' op cannot split 8 layers over 9 stages with at least one layer each; add layers, use fewer stages, or give `partition [...]`
// RUN: not flexpipe-compile %t.mlir --actors 2 --emit=text 2>&1 | FileCheck %s --check-prefix=FIXED
// FIXED: error: --actors changes specs; '{{.*}}' holds only schedules, whose sizes, stages and order are fixed
// So do --balance and --step-rule, which were taken and changed nothing:
// RUN: not flexpipe-compile %t.mlir --microbatches 3 --balance=cost --step-rule literal --emit=text 2>&1 | FileCheck %s --check-prefix=FIXED-ALL
// FIXED-ALL: error: --microbatches, --balance, --step-rule change specs; '{{.*}}' holds only schedules
// RUN: not flexpipe-compile %t.mlir --step-rule next-type --emit=text 2>&1 | FileCheck %s --check-prefix=FIXED-RULE
// FIXED-RULE: error: --step-rule changes specs
// An actor's own priority counts from the last actor with a negative id,
// and so follows --actors; one named by number warns (at 6 actors, the
// override of the last of 5 ran on a middle actor, plain GPipe):
// RUN: sed -e 's/^flexpipe.pipeline @one_f_one_b actors(4)/flexpipe.pipeline @early actors(5)/' -e 's/cttp<bwd_first>/cttp<fwd_first>/' -e '/inflight/d' -e 's/^}$/  flexpipe.priority actors [4] cttp<bwd_first>\n}/' %schedules/1f1b.mlir > %t.early.mlir
// RUN: flexpipe-compile %t.early.mlir --actors 6 --microbatches 3 --emit=text 2>&1 | FileCheck %s --check-prefix=BYNUMBER
// BYNUMBER: early.mlir:{{[0-9]+}}:3: warning: names actors by number, and --actors 6 replaced actors(5): they are the same numbers, not the same places in the pipeline; count from the last actor (-1, -2, ...) to follow the size
// BYNUMBER: actor 4 | {{[ .]*}}4F0 4F1 4F2 {{[ .]*}}4B0
// RUN: sed 's/actors \[4\]/actors [-1]/' %t.early.mlir > %t.early-last.mlir
// RUN: flexpipe-compile %t.early-last.mlir --actors 6 --microbatches 3 --emit=text 2>&1 | FileCheck %s --check-prefix=FROMEND
// FROMEND-NOT: warning
// FROMEND: actor 5 | {{[ .]*}}5F0 5B0 5F1 5B1 5F2 5B2
// A name that MLIR quotes is written as MLIR writes it, one line each (a
// newline in it split the report's and the grid's first line in two):
// RUN: flexpipe-compile %S/Inputs/quoted-name.mlir --emit=report | FileCheck %s --check-prefix=QUOTED
// RUN: flexpipe-compile %S/Inputs/quoted-name.mlir --emit=text | FileCheck %s --check-prefix=QUOTED
// QUOTED: {{^}}schedule @"two\0Alines\09\22q\22\FF": 3 actors, 3 stages, 3 micro-batches
// Rank sources go to a directory: from standard input, or with an explicit
// `-o -` (taken as no -o: it wrote FILE.ranks), one must be named.
// RUN: not flexpipe-compile - --emit=cpp < %s 2>&1 | FileCheck %s --check-prefix=RANKSDIR-STDIN
// RANKSDIR-STDIN: flexpipe-compile: --emit=cpp writes a directory; give it with -o DIR
// RUN: not flexpipe-compile %s --emit=exe -o - 2>&1 | FileCheck %s --check-prefix=RANKSDIR
// RANKSDIR: flexpipe-compile: --emit=exe writes a directory, and '-o -' names standard output; give it with -o DIR
// --backend chooses what rank programs link; with another --emit it was
// taken and did nothing:
// RUN: not flexpipe-compile %s --backend cuda --emit=report 2>&1 | FileCheck %s --check-prefix=BACKEND
// BACKEND: flexpipe-compile: --backend shapes the rank programs; it needs --emit=cpp or --emit=exe, not --emit=report
// RUN: not flexpipe-compile %s --ops %S/../../examples/ops/ActivationNorms.cpp --backend cpu --emit=svg 2>&1 | FileCheck %s --check-prefix=BACKEND-OPS
// BACKEND-OPS: flexpipe-compile: --ops, --backend shape the rank programs; they need --emit=cpp or --emit=exe, not --emit=svg
// At the schedule where the file has no `module {` (it said line 0):
// RUN: sed '1d;$d' %t.mlir > %t-bare.mlir
// RUN: not flexpipe-compile %t-bare.mlir --actors 2 --emit=text 2>&1 | FileCheck %s --check-prefix=FIXED-BARE
// FIXED-BARE: -bare.mlir:1:3: error: --actors changes specs
// RUN: not flexpipe-compile %s --time-model fast 2>&1 | FileCheck %s --check-prefix=MODEL
// MODEL: --time-model: fast not in {step,cost}

flexpipe.pipeline @small actors(4) microbatches(4) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<fwd_first>
}

// The default: rank executables in SPEC_STEM.ranks/.
// RUN: rm -rf %t.dir && mkdir -p %t.dir && cd %t.dir && flexpipe-compile %s --actors 2 --microbatches 2 | FileCheck %s --check-prefix=EXE
// EXE: flexpipe-compile: wrote 2 rank executables and launchers to flexpipe-compile.ranks/ (run flexpipe-compile.ranks/run-mpi.sh)
// RUN: ls %t.dir/flexpipe-compile.ranks | FileCheck %s --check-prefix=FILES
// FILES: rank0
// FILES: rank0.cpp
// FILES: rank1
// FILES: rank1.cpp
// FILES: run-mpi.sh
// FILES: run-slurm.sh
// FILES: schedule.txt
