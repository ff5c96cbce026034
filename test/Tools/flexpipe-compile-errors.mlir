// Bad specs reach the user as located diagnostics with exit code 1.

// RUN: split-file %s %t
// RUN: not flexpipe-compile %t/inflight.mlir 2>&1 | FileCheck %s --check-prefix=INFLIGHT
// RUN: not flexpipe-compile %t/idle.mlir 2>&1 | FileCheck %s --check-prefix=IDLE
// RUN: not flexpipe-compile %t/interval.mlir 2>&1 | FileCheck %s --check-prefix=INTERVAL
// RUN: not flexpipe-compile %t/priority.mlir 2>&1 | FileCheck %s --check-prefix=PRIORITY
// RUN: not flexpipe-compile %t/cycle.mlir 2>&1 | FileCheck %s --check-prefix=CYCLE
// RUN: not flexpipe-compile %t/stuck.mlir 2>&1 | FileCheck %s --check-prefix=STUCK
// RUN: not flexpipe-compile %t/stuck.mlir --microbatches 8 2>&1 | FileCheck %s --check-prefix=STUCKM
// RUN: not flexpipe-compile %t/empty.mlir 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not flexpipe-compile %t/syntax.mlir 2>&1 | FileCheck %s --check-prefix=SYNTAX
// A vocabulary-parallel stage needs a row of the vocabulary per actor in
// the rank programs (it said only that it split 3 rows over 4 actors):
// RUN: sed 's/vocab: 256/vocab: 3/' %S/../../configs/models/tiny.yaml > %t/vocab3.yaml
// RUN: not flexpipe-compile %t/vocab.mlir --model %t/vocab3.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=cpp -o %t/vocab.ranks 2>&1 | FileCheck %s --check-prefix=VOCABROWS
// VOCABROWS: error: 'flexpipe.schedule' op splits a vocabulary of 3 over 4 actors in stage 4, and the rank programs give every actor at least one of its rows: use fewer actors, a larger vocabulary, or no vocab_parallel

// A spec is verified at the sizes it is compiled at: --actors and the model
// file's layers apply first, and an error at what they changed says so.
// RUN: not flexpipe-compile %t/two-layers.mlir --emit=text 2>&1 | FileCheck %s --check-prefix=WRITTEN
// RUN: flexpipe-compile %t/two-layers.mlir --actors 2 --emit=text | FileCheck %s --check-prefix=TWO
// RUN: flexpipe-compile %t/two-layers.mlir --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=report | FileCheck %s --check-prefix=MODEL
// RUN: not flexpipe-compile %schedules/interleaved-1f1b.mlir --actors 5 --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=NOTE
// RUN: not flexpipe-compile %t/two-layers.mlir --actors 4 --emit=text 2>&1 | FileCheck %s --check-prefix=SCALED
// RUN: not flexpipe-compile %schedules/1f1b.mlir --actors 9 --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=SAMELAYERS
// RUN: not flexpipe-compile %t/two-layers.mlir --microbatches 1 --emit=text 2>&1 | FileCheck %s --check-prefix=WRITTEN
// RUN: not flexpipe-compile %t/vocab.mlir --actors 1 --emit=text 2>&1 | FileCheck %s --check-prefix=VOCAB
// Errors at ops inside the pipeline about what --actors replaced get its
// note too (only --microbatches' did).
// RUN: not flexpipe-compile %t/per-actor.mlir --actors 5 --emit=text 2>&1 | FileCheck %s --check-prefix=PERACTOR
// So do errors about the stages that the scaled layers give.
// RUN: not flexpipe-compile %t/share.mlir --actors 2 --emit=text 2>&1 | FileCheck %s --check-prefix=SHARE
// SHARE: share.mlir:3:3: error: 'flexpipe.share' op names stage 3, but module @gpt has 2 stages
// SHARE: share.mlir:3:3: note: --actors 2 replaced actors(4)
// An error about micro-batches at a module gets the --microbatches note too.
// RUN: not flexpipe-compile %schedules/bidirectional.mlir --actors 3 --microbatches 1 --emit=text 2>&1 | FileCheck %s --check-prefix=BIDIMB
// BIDIMB: bidirectional.mlir:5:3: error: 'flexpipe.module' op is bidirectional, which splits micro-batches between two directions and needs at least 2, but the pipeline has 1
// BIDIMB: note: --actors 3 replaced actors(4)
// BIDIMB: note: --microbatches 1 replaced microbatches(8)

// A job needs a device for each rank (actors x dp): the cluster must have them,
// whether the scheduler or the simulator prices it.
// RUN: not flexpipe-compile %schedules/1f1b.mlir --actors 3 --dp 2 --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=CLUSTER
// RUN: not flexpipe-compile %schedules/1f1b.mlir --actors 5 --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --time-model=cost --emit=text 2>&1 | FileCheck %s --check-prefix=CLUSTER5
// CLUSTER: error: 'flexpipe.pipeline' op the job runs on 3 actors x dp 2 = 6 CPU ranks, but cluster 'cpu' has 4; give the cluster file more devices, or use fewer actors or replicas
// CLUSTER5: error: 'flexpipe.pipeline' op the job runs on 5 actors x dp 1 = 5 CPU ranks, but cluster 'cpu' has 4

// A write that fails (a full disk) is an error message, not LLVM's fatal
// "IO failure on output stream".
// RUN: not flexpipe-compile %schedules/1f1b.mlir --emit=report -o /dev/full 2>&1 | FileCheck %s --check-prefix=FULL
// RUN: not flexpipe-compile %schedules/1f1b.mlir --emit=text > /dev/full 2> %t/full.err
// RUN: FileCheck %s --check-prefix=STDOUT --input-file %t/full.err
// RUN: not flexpipe-opt %schedules/1f1b.mlir -o /dev/full 2>&1 | FileCheck %s --check-prefix=OPTFULL
// FULL: flexpipe-compile: cannot write '/dev/full': No space left on device
// FULL-NOT: LLVM ERROR
// STDOUT: flexpipe-compile: cannot write '<stdout>': No space left on device
// OPTFULL: flexpipe-opt: cannot write '/dev/full': No space left on device

// INFLIGHT: inflight.mlir:3:3: error: 'flexpipe.inflight' op gives actor 0 an in-flight limit of 0; every limit must be at least 1
// IDLE: idle.mlir:1:1: error: 'flexpipe.pipeline' op leaves actor 3 without any stage
// INTERVAL: interval.mlir:3:25: error: custom op 'flexpipe.priority' a stage traversal interval must be at least 1, got 0; omit it to take the first item
// PRIORITY: priority.mlir:3:25: error: custom op 'flexpipe.priority' unknown computation-type traversal priority 'depth_first'; expected bwd_first, fwd_first or interleaved
// CYCLE: cycle.mlir:4:3: error: 'flexpipe.dependency' op closes a cycle of extra dependencies, so none of its instructions can ever be scheduled; remove one of them
// CYCLE: cycle.mlir:3:3: note: part of the cycle
// STUCK: stuck.mlir:1:1: error: 'flexpipe.pipeline' op cannot be scheduled: no actor can make progress at step 6
// STUCK: note: actor 0 has 18 computations left: fwd stage 3 mb 0 (actor 0) is ready but the actor's in-flight limit 6 is reached
// The scheduler's errors say where an option changed the size too (only
// the verifier's did).
// STUCKM: stuck.mlir:1:1: error: 'flexpipe.pipeline' op cannot be scheduled
// STUCKM: stuck.mlir:1:1: note: --microbatches 8 replaced microbatches(6)
// EMPTY: empty.mlir:1:1: error: '{{.*}}empty.mlir' holds no flexpipe.pipeline or flexpipe.schedule to compile
// SYNTAX: syntax.mlir:2:3: error: custom op 'flexpipe.modul' is unknown
// WRITTEN: two-layers.mlir:2:3: error: 'flexpipe.module' op cannot split 2 layers over 3 stages
// WRITTEN-NOT: note:
// TWO: schedule @p: 2 actors, 2 stages, 3 micro-batches
// MODEL: schedule @p: 3 actors, 3 stages, 3 micro-batches
// NOTE: interleaved-1f1b.mlir:7:3: error: 'flexpipe.module' op cannot split 8 layers over 10 stages
// NOTE: interleaved-1f1b.mlir:7:3: note: --actors 5 replaced actors(4); the model file '{{.*}}tiny.yaml' gives @gpt 8 layers, in place of the spec's layers(16)
// A model file that gives the spec's own layer count replaces nothing.
// SAMELAYERS: 1f1b.mlir:4:3: note: --actors 9 replaced actors(4){{$}}
// VOCAB: vocab.mlir:2:3: error: 'flexpipe.module' op is vocab_parallel, which splits the token embedding and LM head over its actors and needs at least 2, but it has 1
// VOCAB: vocab.mlir:2:3: note: --actors 1 replaced actors(4) and scaled layers(8) to 2 (layers per actor kept)
// SCALED: two-layers.mlir:2:3: error: 'flexpipe.module' op cannot split 3 layers over 4 stages
// SCALED: two-layers.mlir:2:3: note: --actors 4 replaced actors(3) and scaled layers(2) to 3 (layers per actor kept)
// PERACTOR: per-actor.mlir:5:3: error: 'flexpipe.inflight' op lists 4 limits, but the scope has 5 actors; give one per actor
// PERACTOR: per-actor.mlir:5:3: note: --actors 5 replaced actors(4)
// A dependency on a collective is checked on the program made at the size
// asked for: at 5 actors the last stage moves to actor 4, which the
// registered stage's literal actors [0, 3] do not list and no message
// orders before the all-gather (it compiled, exit 0, and the all-gather did
// not wait for actor 4's forward).
// RUN: flexpipe-compile %t/collective.mlir --emit=text > /dev/null
// RUN: not flexpipe-compile %t/collective.mlir --actors 5 --emit=text 2>&1 | FileCheck %s --check-prefix=COLLECTIVE
// COLLECTIVE: collective.mlir:5:3: error: 'flexpipe.dependency' op is not kept when the schedule runs: at micro-batch 0, fwd of stage 4 (actor 4) happens before no instance of @ag (on actors [0, 3]): actor 4 does not join the collective, and no message orders them; add actor 4 to the registered stage's actors

//--- inflight.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.inflight per_actor 0
}
//--- idle.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one) actors [0, 1, 2]
}
//--- interval.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(circular)
  flexpipe.priority fstp<breadth_first, 0>
}
//--- priority.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<depth_first>
}
//--- cycle.mlir
flexpipe.pipeline @p actors(2) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.dependency fwd @gpt[0] -> fwd @gpt[1]
  flexpipe.dependency fwd @gpt[1] -> fwd @gpt[0]
}
//--- stuck.mlir
flexpipe.pipeline @p actors(3) microbatches(6) {
  flexpipe.module @gpt layers(6) placement(circular)
  flexpipe.priority cttp<fwd_first>
  flexpipe.inflight per_actor [6, 5, 4]
}
//--- empty.mlir
func.func @nothing() {
  return
}
//--- syntax.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.modul @gpt layers(8) placement(one_to_one)
}
//--- two-layers.mlir
flexpipe.pipeline @p actors(3) microbatches(3) {
  flexpipe.module @gpt layers(2) placement(one_to_one)
}
//--- vocab.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one) vocab_parallel
}
//--- per-actor.mlir
flexpipe.pipeline @p actors(4) microbatches(8) {
  flexpipe.module @a layers(4) placement(one_to_one) actors [0, 1]
  flexpipe.module @b layers(4) placement(one_to_one) actors [2, 3]
  flexpipe.priority cttp<bwd_first>
  flexpipe.inflight per_actor [4, 3, 2, 1]
}

// An option with '=' and no value is an error (CLI11 took the next argument
// as its value: '--load-plugin= SPEC' loaded the spec as a plugin and then
// said "spec is required").
// RUN: not flexpipe-compile --load-plugin= %schedules/1f1b.mlir 2>&1 | FileCheck %s --check-prefix=EMPTYVALUE
// RUN: not flexpipe-tune --model= --cluster %configs/clusters/cpu.yaml 2>&1 | FileCheck %s --check-prefix=EMPTYTUNE
// EMPTYVALUE: flexpipe-compile: --load-plugin= gives an empty value; write a value after the '=' or leave the option out
// EMPTYTUNE: flexpipe-tune: --model= gives an empty value; write a value after the '=' or leave the option out

// An option that needs a value followed by another option: '-o --emit=text'
// took '--emit=text' as the output directory and compiled into it. A
// directory named like an option ('-o -x') builds: the compiler read
// '-x/rank0.cpp' as its option.
// RUN: not flexpipe-compile %schedules/1f1b.mlir -o --emit=text 2>&1 | FileCheck %s --check-prefix=OPTIONVALUE
// RUN: not flexpipe-tune --model --cluster %configs/clusters/cpu.yaml 2>&1 | FileCheck %s --check-prefix=OPTIONTUNE
// OPTIONVALUE: flexpipe-compile: -o needs a value, but '--emit=text' after it is an option; give the value first (a path that starts with '-' as ./-name)
// OPTIONTUNE: flexpipe-tune: --model needs a value, but '--cluster' after it is an option
// RUN: rm -rf %t.dash && mkdir -p %t.dash && cd %t.dash && flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 2 -o -x > /dev/null && test -x ./-x/rank1

// An option of one value given twice: CLI11 said "--threads: At Most 1
// required but received 2". Repeatable options (--load-plugin, --pp) stay
// repeatable.
// RUN: not flexpipe-compile %schedules/1f1b.mlir -o %t.twice --output=%t.twice2 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not flexpipe-tune --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --threads 2 --threads=3 2>&1 | FileCheck %s --check-prefix=TWICETUNE
// RUN: not flexpipe-profile --ranks 2 --ranks 2 2>&1 | FileCheck %s --check-prefix=TWICEPROFILE
// RUN: flexpipe-tune --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --pp 2 --pp 4 --mbs 1 --top 1 --threads 1 -o %t.pp 2>&1 | FileCheck %s --check-prefix=TWICEPP
// TWICE: flexpipe-compile: --output is given twice (as -o before); give it once
// TWICETUNE: flexpipe-tune: --threads is given twice; give it once
// TWICEPROFILE: flexpipe-profile: --ranks is given twice; give it once
// TWICEPP: wrote {{.*}}results.csv

//--- share.mlir
flexpipe.pipeline @a actors(4) microbatches(8) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
  flexpipe.share @gpt stage 3 actors [2, 3]
}

//--- collective.mlir
flexpipe.pipeline @p actors(4) microbatches(4) {
  flexpipe.module @a layers(4) placement(one_to_one)
  flexpipe.stage @sync actors [0, 3]
  flexpipe.instruction @ag kind(all_gather) on(@sync)
  flexpipe.dependency fwd @a[-1] -> @ag @sync
  flexpipe.dependency @ag @sync -> bwd @a[-1]
}
