// A loss that is no longer a number (nan, inf) stops training with an error
// on every rank at once, before a checkpoint of it: the ranks printed
// "loss nan" for every remaining iteration, checkpointed the weights and
// exited 0. Here a run resumes from a checkpoint whose first weight is a
// NaN (poison-checkpoint.py). (flexpipe-reference stops the same way; it
// cannot resume, so no test gives it a NaN.)
// RUN: rm -rf %t && mkdir -p %t/run
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 2 --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml -o %t/exe
// RUN: cd %t/run && env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %t/exe/run-mpi.sh --iterations 2 --checkpoint %t/ckpt > %t/first.log
// RUN: python3 %S/poison-checkpoint.py %t/ckpt/iter-2.rank0
// RUN: cd %t/run && not env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 %t/exe/run-mpi.sh --iterations 4 --resume %t/ckpt --checkpoint %t/after --losses %t/losses --profile %t/profile.yaml > %t/run.log 2> %t/run.err
// RUN: FileCheck %s < %t/run.log
// RUN: FileCheck %s --check-prefix=ERR < %t/run.err
// RUN: FileCheck %s --check-prefix=LOSSES < %t/losses
// RUN: not ls %t/after/iter-3.rank0 %t/after/iter-4.rank0 %t/profile.yaml
// CHECK: resuming from
// CHECK: iteration 2: loss nan
// CHECK-NOT: iteration 3:
// CHECK-NOT: checkpoint after
// CHECK-NOT: mean iteration time
// ERR: flexpipe: iteration 2: the loss is nan, so training stopped (no checkpoint of it, and no --profile, is written)
// LOSSES: {{^[0-9.]+$}}
// LOSSES-NEXT: {{^[0-9.]+$}}
// LOSSES-NEXT: nan
// LOSSES-NOT: {{.}}
