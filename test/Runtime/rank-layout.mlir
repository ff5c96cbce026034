// The ranks of a data-parallel job run where the cost model prices them
// (flexpipe/Support/Layout.h): replica r's actor a is rank a x dp + r, on
// device a x dp + r, so rank r runs actor r / dp of replica r mod dp and a
// launcher that fills nodes in rank order keeps each actor's replicas, whose
// gradient all-reduce moves the most bytes, on one node. (The ranks ran
// replica r's actor a as rank r x actors + a, which put each replica on its
// own node, and the all-reduce across nodes, while the report priced it
// inside one.) 3 actors at dp 2 and dp 3.
// REQUIRES: mpi

// The operations of Inputs/WhereOps.cpp, one per stage, say which actor and
// replica each rank ran; flexpipe-reference numbers the ranks alike.
// RUN: rm -rf %t && mkdir -p %t/dp2/run %t/dp2/ref %t/dp3/run %t/dp3/ref
// RUN: flexpipe-compile %s --dp 2 --ops %S/Inputs/WhereOps.cpp -o %t/dp2/exe
// RUN: cd %t/dp2/run && %t/dp2/exe/run-mpi.sh --iterations 1 --trace %t/dp2/trace.json > %t/dp2/run.log
// RUN: for r in 0 1 2 3 4 5; do cat %t/dp2/run/where.rank$r; done | FileCheck %s --check-prefix=DP2
// DP2:      rank 0 of 6: actor 0 replica 0 stage 0
// DP2-NEXT: rank 1 of 6: actor 0 replica 1 stage 0
// DP2-NEXT: rank 2 of 6: actor 1 replica 0 stage 1
// DP2-NEXT: rank 3 of 6: actor 1 replica 1 stage 1
// DP2-NEXT: rank 4 of 6: actor 2 replica 0 stage 2
// DP2-NEXT: rank 5 of 6: actor 2 replica 1 stage 2
// RUN: cd %t/dp2/ref && %t/dp2/exe/reference %t/dp2/exe/schedule.txt --iterations 1 > %t/dp2/ref.log
// RUN: python3 %S/compare-op-logs.py %t/dp2/run %t/dp2/ref where | FileCheck %s --check-prefix=REF2
// REF2: where: 6 files, 6 lines, all match

// The merged trace names each rank's replica (pid) and actor (tid), in rank
// order.
// RUN: python3 -c "import json, sys; print(' '.join('%%d/%%d' %% (e['pid'], e['tid']) for e in json.load(open(sys.argv[1]))['traceEvents'] if e['name'] == 'thread_name'))" %t/dp2/trace.json | FileCheck %s --check-prefix=TRACE2
// TRACE2: 0/0 1/0 0/1 1/1 0/2 1/2{{$}}

// RUN: flexpipe-compile %s --dp 3 --ops %S/Inputs/WhereOps.cpp -o %t/dp3/exe
// RUN: cd %t/dp3/run && %t/dp3/exe/run-mpi.sh --iterations 1 > %t/dp3/run.log
// RUN: for r in 0 1 2 3 4 5 6 7 8; do cat %t/dp3/run/where.rank$r; done | FileCheck %s --check-prefix=DP3
// DP3:      rank 0 of 9: actor 0 replica 0 stage 0
// DP3-NEXT: rank 1 of 9: actor 0 replica 1 stage 0
// DP3-NEXT: rank 2 of 9: actor 0 replica 2 stage 0
// DP3-NEXT: rank 3 of 9: actor 1 replica 0 stage 1
// DP3-NEXT: rank 4 of 9: actor 1 replica 1 stage 1
// DP3-NEXT: rank 5 of 9: actor 1 replica 2 stage 1
// DP3-NEXT: rank 6 of 9: actor 2 replica 0 stage 2
// DP3-NEXT: rank 7 of 9: actor 2 replica 1 stage 2
// DP3-NEXT: rank 8 of 9: actor 2 replica 2 stage 2
// RUN: cd %t/dp3/ref && %t/dp3/exe/reference %t/dp3/exe/schedule.txt --iterations 1 > %t/dp3/ref.log
// RUN: python3 %S/compare-op-logs.py %t/dp3/run %t/dp3/ref where | FileCheck %s --check-prefix=REF3
// REF3: where: 9 files, 9 lines, all match

// The launchers start rankA as ranks A x dp to A x dp + dp - 1.
// RUN: FileCheck %s --check-prefix=MPI3 < %t/dp3/exe/run-mpi.sh
// MPI3: -np 1 "$dir/rank0" "$@" : -np 1 "$dir/rank0" "$@" : -np 1 "$dir/rank0" "$@" : -np 1 "$dir/rank1" "$@" : -np 1 "$dir/rank1" "$@" : -np 1 "$dir/rank1" "$@" : -np 1 "$dir/rank2" "$@" : -np 1 "$dir/rank2" "$@" : -np 1 "$dir/rank2" "$@"{{$}}
// RUN: FileCheck %s --check-prefix=SLURM3 < %t/dp3/exe/run-slurm.sh
// SLURM3: exec "$dir/rank$((SLURM_PROCID / 3))" "$@"

// So does a hand-written mpirun line; the replicas' interleaved order that
// the ranks used to take names what is wrong.
// RUN: env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun --oversubscribe -np 2 %t/dp2/exe/rank0 --iterations 1 : -np 2 %t/dp2/exe/rank1 --iterations 1 : -np 2 %t/dp2/exe/rank2 --iterations 1 | FileCheck %s --check-prefix=BLOCKS
// BLOCKS: iteration 0: loss
// RUN: not env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 mpirun --oversubscribe -np 1 %t/dp2/exe/rank0 : -np 1 %t/dp2/exe/rank1 : -np 1 %t/dp2/exe/rank2 : -np 1 %t/dp2/exe/rank0 : -np 1 %t/dp2/exe/rank1 : -np 1 %t/dp2/exe/rank2 2>&1 | FileCheck %s --check-prefix=INTERLEAVED
// INTERLEAVED: this executable is actor {{[0-2]}}'s program (rank{{[0-2]}}), started as rank {{[1-4]}} (actor {{[0-2]}}'s): start rankA as ranks A x 2 to A x 2 + 1 (run-mpi.sh and run-slurm.sh do)

// The cost model's peak per rank, printed under the measured one, is the
// peak of the rank's actor: 1F1B's falls with the actor, the same for the
// dp ranks of one actor.
// RUN: sed -e 's/^devices: 4/devices: 16/' -e 's/^devices_per_node: 4/devices_per_node: 16/' %S/../../configs/clusters/cpu.yaml > %t/cpu-16.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 3 --microbatches 3 --dp 3 --model %S/../../configs/models/tiny.yaml --cluster %t/cpu-16.yaml -o %t/peak > /dev/null
// RUN: %t/peak/run-mpi.sh --iterations 1 > %t/peak/run.log
// RUN: python3 -c "import sys; v = [float(x) for l in open(sys.argv[1]) if l.startswith('predicted by the cost model per rank:') for x in l.split(':')[1].split('KiB')[:-1]]; g = [v[i:i + 3] for i in range(0, len(v), 3)]; print(len(v), all(len(set(x)) == 1 for x in g), all(a[0] > b[0] for a, b in zip(g, g[1:])))" %t/peak/run.log | FileCheck %s --check-prefix=PEAK
// PEAK: 9 True True

flexpipe.pipeline @where actors(3) microbatches(3) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  flexpipe.instruction @where.0 kind(compute) on(@gpt[0]) attrs {file = "where"}
  flexpipe.instruction @where.1 kind(compute) on(@gpt[1]) attrs {file = "where"}
  flexpipe.instruction @where.2 kind(compute) on(@gpt[2]) attrs {file = "where"}
  flexpipe.dependency fwd @gpt[0] -> @where.0 @gpt[0]
  flexpipe.dependency fwd @gpt[1] -> @where.1 @gpt[1]
  flexpipe.dependency fwd @gpt[2] -> @where.2 @gpt[2]
}
