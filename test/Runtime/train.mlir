// Every schedule the runtime runs, compiled to rank executables, launched with
// mpirun on the CPU and compared with a single-process run of the same model
// and data: losses within 1e-5 relative, final weights within 1e-4, and the
// loss falls.
// REQUIRES: mpi

// RUN: rm -rf %t && mkdir -p %t
// RUN: %train 1f1b %schedules/1f1b.mlir --microbatches 8 | FileCheck %s
// RUN: %train gpipe %schedules/gpipe.mlir --actors 2 --microbatches 4 | FileCheck %s
// RUN: %train interleaved %schedules/interleaved-1f1b.mlir --microbatches 8 | FileCheck %s
// RUN: %train interleaved-cost %schedules/interleaved-1f1b.mlir --microbatches 8 --time-model=cost | FileCheck %s
// RUN: %train looped-bfs %schedules/looped-bfs.mlir --actors 2 --microbatches 4 | FileCheck %s
// RUN: %train vshape %schedules/vshape.mlir --actors 2 --microbatches 4 | FileCheck %s
// RUN: %train bidirectional %schedules/bidirectional.mlir --microbatches 8 | FileCheck %s
// RUN: %train dp2 %schedules/1f1b.mlir --actors 2 --dp 2 --microbatches 4 | FileCheck %s
// CHECK: training: 4 iterations, loss {{.*}}, worst loss difference {{.*}}, worst weight difference {{.*}}, {{[0-9]+}} parameters

// Measured peak activation memory follows the schedule: 1F1B keeps
// 4, 3, 2, 1 micro-batches on ranks 0-3, so the peaks fall with the rank.
// RUN: python3 -c "import sys; v = [float(x) for x in open(sys.argv[1]).read().split('per rank:')[1].split('KiB')[:-1]]; print('falling' if all(a > b for a, b in zip(v, v[1:])) else v)" %t/1f1b/run.log | FileCheck %s --check-prefix=MEMORY
// MEMORY: falling

// With --model the description carries the cost model's peak per actor, and
// rank 0 prints it under the measured one: both fall with the rank.
// RUN: flexpipe-compile %schedules/1f1b.mlir --microbatches 8 --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=exe -o %t/predicted
// RUN: grep -c "^predicted peak_activation [0-9]* [0-9]* [0-9]* [0-9]*$" %t/predicted/schedule.txt | FileCheck %s --check-prefix=LINE
// LINE: 1
// RUN: %t/predicted/run-mpi.sh --iterations 2 > %t/predicted/run.log
// RUN: python3 -c "import sys; rows = [[float(x) for x in l.split(':')[1].split('KiB')[:-1]] for l in open(sys.argv[1]) if 'per rank:' in l]; print(len(rows), ['falling' if all(a > b for a, b in zip(v, v[1:])) else v for v in rows])" %t/predicted/run.log | FileCheck %s --check-prefix=PREDICTED
// PREDICTED: 2 ['falling', 'falling']

// Split backward: the input gradient frees the activations that only it
// reads and keeps the weight-gradient state, which the cost model prices
// (docs/CostModel.md). ZB-H1 on 3 ranks with 5 micro-batches defers weight
// gradients; every rank measures 0.75-1.05x its prediction (the formula
// counts dropout and 2-byte-precision tensors the fp32 runtime does not
// keep). When the runtime kept every activation to the weight gradient and
// the model did not price that state, the last rank measured 1.35x.
// RUN: flexpipe-compile %schedules/zb-h1.mlir --actors 3 --microbatches 5 --model %S/../../configs/models/tiny.yaml --cluster %S/../../configs/clusters/cpu.yaml --emit=exe -o %t/zb-memory
// RUN: %t/zb-memory/run-mpi.sh --iterations 2 > %t/zb-memory/run.log
// RUN: python3 -c "import sys; rows = [[float(x) for x in l.split(':')[1].split('KiB')[:-1]] for l in open(sys.argv[1]) if 'per rank:' in l]; r = [m / p for m, p in zip(*rows)]; print(len(r), 'within' if all(0.75 <= x <= 1.05 for x in r) else r)" %t/zb-memory/run.log | FileCheck %s --check-prefix=ZBMEMORY
// ZBMEMORY: 3 within

// A sent buffer is released once its send completes: the peak does not grow
// with the micro-batches (every message an iteration sent was kept to its
// end: +8 KiB per micro-batch on every rank of the tiny GPT). 4 and 24
// micro-batches: within 4 messages (32 KiB) on each rank.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 4 -o %t/m4
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 24 -o %t/m24
// RUN: %t/m4/run-mpi.sh --iterations 1 > %t/m4/run.log
// RUN: %t/m24/run-mpi.sh --iterations 1 > %t/m24/run.log
// RUN: python3 -c "import sys; peak = lambda f: [float(x) for x in open(f).read().split('per rank:')[1].split('KiB')[:-1]]; a, b = peak(sys.argv[1]), peak(sys.argv[2]); print('flat' if all(abs(x - y) <= 32 for x, y in zip(a, b)) else (a, b))" %t/m4/run.log %t/m24/run.log | FileCheck %s --check-prefix=FLAT
// FLAT: flat

// --trace writes one Chrome trace of the real run: per iteration, 16
// computations and 16 transfers on 2 actors with 4 micro-batches, the
// wait at the end of each of the 6 transfer groups (1F1B's steady state:
// a send with the receive from the same peer, mirrored there), and on each
// rank the stage copies' exchange, the replicas' all-reduce, Adam's step
// and the loss's all-reduce.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 4 -o %t/traced
// RUN: %t/traced/run-mpi.sh --iterations 2 --trace %t/traced/trace.json
// RUN: python3 -c "import json, sys; d = [e for e in json.load(open(sys.argv[1]))['traceEvents'] if e['ph'] == 'X']; print(len(d), sorted({e['cat'] for e in d}))" %t/traced/trace.json | FileCheck %s --check-prefix=TRACE
// TRACE: 92 ['ALLREDUCE', 'B', 'EXCHANGE', 'F', 'LOSS', 'RECV_B', 'RECV_F', 'SEND_B', 'SEND_F', 'STEP', 'WAIT']

// A model too large for the machine is said and exits 1, where
// std::bad_alloc aborted every rank and the reference with a backtrace.
// Hidden 4M under a 3 GB address-space limit: the first embedding (4 GiB)
// cannot be allocated, and nothing large is touched first. Not under ASan,
// which needs terabytes of address space for its shadow and reports a failed
// allocation itself instead of throwing std::bad_alloc.
// RUN: sed 's/hidden: 64/hidden: 4194304/' %S/../../configs/models/tiny.yaml > %t/huge.yaml
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 2 --model %t/huge.yaml --cluster %S/../../configs/clusters/cpu.yaml -o %t/huge > /dev/null
// RUN: %if !asan %{ (ulimit -v 3000000; not timeout 120 %t/huge/run-mpi.sh --iterations 1) 2>&1 | FileCheck %s --check-prefix=HUGE %}
// RUN: %if !asan %{ (ulimit -v 3000000; not timeout 120 flexpipe-reference %t/huge/schedule.txt --iterations 1) 2>&1 | FileCheck %s --check-prefix=HUGE %}
// HUGE: flexpipe: out of host memory: an allocation failed; the model's weights, optimizer state and activations do not fit this machine

// With replicas, one process per replica (each was named 'replica 0').
// RUN: %t/dp2/run-mpi.sh --iterations 1 --trace %t/dp2/trace.json > /dev/null
// RUN: python3 -c "import json, sys; d = json.load(open(sys.argv[1]))['traceEvents']; print(sorted(e['args']['name'] for e in d if e['name'] == 'process_name'), sorted({e['pid'] for e in d if e['ph'] == 'X'}))" %t/dp2/trace.json | FileCheck %s --check-prefix=REPLICAS
// REPLICAS: ['replica 0', 'replica 1'] [0, 1]

// Ranks compiled from different schedules refuse to start.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 4 --emit=exe -o %t/a
// RUN: flexpipe-compile %schedules/gpipe.mlir --actors 2 --microbatches 4 --emit=exe -o %t/b
// RUN: cp %t/b/rank1 %t/a/rank1
// RUN: not %t/a/run-mpi.sh 2>&1 | FileCheck %s --check-prefix=HASH
// HASH: the ranks were compiled from different schedules
// One rank's executable started as every rank names what is wrong.
// RUN: not env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun --oversubscribe -np 2 %t/a/rank0 2>&1 | FileCheck %s --check-prefix=WRONG
// WRONG: flexpipe: rank 1: this executable is actor 0's program (rank0), started as rank 1 (actor 1's): start rankA as rank A (run-mpi.sh and run-slurm.sh do)
// So do programs that start with a receive (rank1 and rank2 swapped), which
// would otherwise wait for each other until FLEXPIPE_TIMEOUT.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 3 --microbatches 5 --emit=exe -o %t/three
// RUN: not env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun --oversubscribe -np 1 %t/three/rank0 : -np 1 %t/three/rank2 : -np 1 %t/three/rank1 2>&1 | FileCheck %s --check-prefix=SWAPPED
// SWAPPED: this executable is actor {{[12]}}'s program (rank{{[12]}}), started as rank {{[12]}}
// Ranks started with different options (mpirun's colon syntax gives each
// executable its own) refuse to start instead of hanging or training apart.
// RUN: not env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun --oversubscribe -np 1 %t/three/rank0 : -np 1 %t/three/rank1 : -np 1 %t/three/rank2 --iterations 3 2>&1 | FileCheck %s --check-prefix=ITERS
// ITERS: flexpipe: rank 0: the ranks were started with different --iterations (3 and 10); give every rank the same options
// RUN: not env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun --oversubscribe -np 1 %t/three/rank0 --lr 0.05 : -np 1 %t/three/rank1 : -np 1 %t/three/rank2 2>&1 | FileCheck %s --check-prefix=LR
// LR: the ranks were started with different --lr (0.001 and 0.05)
// RUN: not env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun --oversubscribe -np 1 %t/three/rank0 --trace %t/one-trace.json : -np 1 %t/three/rank1 : -np 1 %t/three/rank2 2>&1 | FileCheck %s --check-prefix=ONETRACE
// ONETRACE: the ranks were started with different --trace (not given and a path)
// Two paths: one rank's events were merged, exit 0, and a part file stayed.
// RUN: not env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun --oversubscribe -np 1 %t/three/rank0 --trace %t/a.json : -np 1 %t/three/rank1 --trace %t/b.json : -np 1 %t/three/rank2 --trace %t/a.json 2>&1 | FileCheck %s --check-prefix=TWOTRACES
// TWOTRACES: the ranks were started with different --trace (two paths)
// One path spelled two ways is one (compared absolute and normal).
// RUN: env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun --oversubscribe -np 1 %t/three/rank0 --iterations 1 --trace %t/same.json : -np 1 %t/three/rank1 --iterations 1 --trace %t/./same.json : -np 1 %t/three/rank2 --iterations 1 --trace %t//same.json > /dev/null
// RUN: python3 -c "import json, sys; json.load(open(sys.argv[1]))" %t/same.json
// A ':' argument to the launcher would split mpirun's command line (the
// rank lost the value and the rest started as another program).
// RUN: not %t/three/run-mpi.sh --losses : 2>&1 | FileCheck %s --check-prefix=COLON
// COLON: run-mpi.sh: an argument ':' would end each rank's command line for mpirun (its separator between programs); a file named ':' is ./:
// A rank whose standard output cannot be written says so and fails (the
// iteration lines were lost into a full disk, exit 0). (Under mpirun,
// mpirun writes the ranks' output, and does not say.)
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 1 --microbatches 2 --emit=exe -o %t/one
// RUN: not %t/one/rank0 --iterations 1 2>&1 > /dev/full | FileCheck %s --check-prefix=FULL
// FULL: flexpipe: rank 0: cannot write the standard output (a full disk?); lines of this run are lost
// An option only one rank cannot parse stops every rank at once, and that
// rank says why (it stopped alone before, unheard, and the others waited
// for it until FLEXPIPE_TIMEOUT); so does --help given to one rank only.
// RUN: not env FLEXPIPE_TIMEOUT=120 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun --oversubscribe -np 1 %t/three/rank0 : -np 1 %t/three/rank1 --bogus : -np 1 %t/three/rank2 2>&1 | FileCheck %s --check-prefix=BOGUS
// BOGUS: flexpipe: rank 1: unknown or incomplete option '--bogus'
// RUN: not env FLEXPIPE_TIMEOUT=120 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 60 mpirun --oversubscribe -np 1 %t/three/rank0 : -np 1 %t/three/rank1 : -np 1 %t/three/rank2 --help 2>&1 | FileCheck %s --check-prefix=ONEHELP
// ONEHELP: flexpipe: rank 2: was given --help, the other ranks were not

// A rank that dies stops every other rank with a non-zero exit.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 4 --emit=exe -o %t/a-good
// RUN: python3 %S/kill_rank.py %t/a-good 1 2>&1 | FileCheck %s --check-prefix=KILL
// KILL: exit code {{[1-9][0-9]*}} after
// FLEXPIPE_BIND is checked whatever --threads is (with --threads 2, where
// no rank binds, 'bogus' passed unnoticed, exit 0).
// RUN: not env FLEXPIPE_BIND=bogus timeout 60 %t/a-good/run-mpi.sh --iterations 1 2>&1 | FileCheck %s --check-prefix=BIND
// RUN: not env FLEXPIPE_BIND=bogus timeout 60 %t/a-good/run-mpi.sh --iterations 1 --threads 2 2>&1 | FileCheck %s --check-prefix=BIND
// BIND: flexpipe: rank {{[01]}}: FLEXPIPE_BIND is 'bogus'; expected 'cores' or 'none'
// An empty FLEXPIPE_BIND is the default, as an empty FLEXPIPE_TIMEOUT is
// (it stopped the run).
// RUN: env FLEXPIPE_BIND= timeout 60 %t/a-good/run-mpi.sh --iterations 1 > /dev/null
// Result files are checked before training (a million iterations would
// otherwise run first) and written whole: no temporary is left behind.
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 1000000 --losses %t/missing-dir/losses 2>&1 | FileCheck %s --check-prefix=UNWRITABLE
// UNWRITABLE: flexpipe: rank 0: cannot write '{{.*}}missing-dir/losses': No such file or directory (checked before training)
// RUN: not timeout 60 flexpipe-reference %t/a-good/schedule.txt --iterations 1000000 --weights %t/missing-dir/w 2>&1 | FileCheck %s --check-prefix=REFUNWRITABLE
// REFUNWRITABLE: flexpipe-reference: cannot write '{{.*}}missing-dir/w': No such file or directory (checked before training)
// Two options naming one path: one file would overwrite the other (the
// losses were lost under the profile, exit 0; a checkpoint directory of
// the losses' name was refused only after training).
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 1000000 --losses %t/same --profile %t/same 2>&1 | FileCheck %s --check-prefix=SAME
// SAME: flexpipe: rank {{[01]}}: --profile and --losses both name '{{.*}}same': one would overwrite the other (checked before training)
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 1000000 --losses %t/w.actor1 --weights %t/./w 2>&1 | FileCheck %s --check-prefix=SAMEWEIGHTS
// SAMEWEIGHTS: flexpipe: rank {{[01]}}: --weights (actor 1's file) and --losses both name '{{.*}}w.actor1': one would overwrite the other
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 1000000 --losses %t/ckpt --checkpoint %t/ckpt/. 2>&1 | FileCheck %s --check-prefix=SAMECKPT
// SAMECKPT: flexpipe: rank {{[01]}}: --checkpoint and --losses both name
// Nor a file the checkpoint directory holds: the trace's part of rank 0
// replaced the only generation, which the merge then deleted (exit 0), and
// the losses replaced a rank's checkpoint.
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 2 --checkpoint %t/ck --trace %t/ck/./iter-2 2>&1 | FileCheck %s --check-prefix=CKPTFILE
// CKPTFILE: flexpipe: rank {{[01]}}: --trace (rank 0's part) names '{{.*}}ck/./iter-2.rank0', a file of the --checkpoint directory '{{.*}}ck' (its checkpoints are iter-K.rankR): it would overwrite or lose one; name another path (checked before training)
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 2 --checkpoint %t/ck --losses %t/ck/iter-2.rank1 2>&1 | FileCheck %s --check-prefix=CKPTLOSSES
// CKPTLOSSES: --losses names '{{.*}}ck/iter-2.rank1', a file of the --checkpoint directory
// The checkpoint directory is made before the outputs in it are checked
// (--losses in a directory --checkpoint was to create was refused as
// unwritable).
// RUN: rm -rf %t/ck && timeout 60 %t/a-good/run-mpi.sh --iterations 2 --checkpoint %t/ck --losses %t/ck/losses > /dev/null
// RUN: ls %t/ck | FileCheck %s --check-prefix=CKPTKEPT
// CKPTKEPT: iter-2.rank0
// CKPTKEPT-NEXT: iter-2.rank1
// CKPTKEPT-NEXT: losses
// The same for the --resume directory: the trace's parts replaced the
// checkpoint being resumed and the merge deleted them (exit 0; the next
// resume found no checkpoint), and the losses replaced rank 0's.
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 4 --resume %t/ck --trace %t/ck/iter-2 2>&1 | FileCheck %s --check-prefix=RESUMEFILE
// RESUMEFILE: flexpipe: rank {{[01]}}: --trace (rank 0's part) names '{{.*}}ck/iter-2.rank0', a file of the --resume directory '{{.*}}ck' (its checkpoints are iter-K.rankR): it would overwrite or lose one; name another path (checked before training)
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 4 --resume %t/ck --losses %t/ck/iter-2.rank0 2>&1 | FileCheck %s --check-prefix=RESUMELOSSES
// RESUMELOSSES: --losses names '{{.*}}ck/iter-2.rank0', a file of the --resume directory
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 4 --resume %t/ck --profile %t/ck/iter-2.rank1 2>&1 | FileCheck %s --check-prefix=RESUMEPROFILE
// RESUMEPROFILE: --profile names '{{.*}}ck/iter-2.rank1', a file of the --resume directory
// RUN: ls %t/ck | FileCheck %s --check-prefix=CKPTKEPT
// RUN: timeout 60 %t/a-good/run-mpi.sh --iterations 3 --resume %t/ck 2>&1 | FileCheck %s --check-prefix=RESUMED
// RESUMED: resuming from '{{.*}}ck' after iteration 1
// RUN: not timeout 60 flexpipe-reference %t/a-good/schedule.txt --iterations 1000000 --losses %t/same --weights %t/other/../same 2>&1 | FileCheck %s --check-prefix=REFSAME
// REFSAME: flexpipe-reference: --weights and --losses both name '{{.*}}other/../same': one would overwrite the other (checked before training)
// Every output is checked before the first is written: the initial weights
// replaced a file, and then --losses in a missing directory stopped the run.
// RUN: echo before > %t/initial && not timeout 60 flexpipe-reference %t/a-good/schedule.txt --iterations 1 --initial-weights %t/initial --losses %t/missing-dir/l 2>&1 | FileCheck %s --check-prefix=REFFIRST
// REFFIRST: flexpipe-reference: cannot write '{{.*}}missing-dir/l'
// RUN: FileCheck %s --check-prefix=REFKEPT < %t/initial
// REFKEPT: before
// An interrupt leaves the previous files and no temporaries (the losses'
// and batches' FILE.tmpPID were left behind for good).
// RUN: rm -rf %t/interrupted && mkdir %t/interrupted && echo previous > %t/interrupted/l
// RUN: python3 %S/interrupt_outputs.py %t/interrupted TERM flexpipe-reference %t/a-good/schedule.txt --iterations 1000000 --losses %t/interrupted/l --batches %t/interrupted/b | FileCheck %s --check-prefix=REFINT
// REFINT: signal 15
// REFINT-NEXT: l
// REFINT-NOT: tmp
// RUN: FileCheck %s --check-prefix=PREVIOUS < %t/interrupted/l
// PREVIOUS: previous
// A directory there (the rename at the end would fail), and an empty name
// (it would read as none):
// RUN: mkdir -p %t/a-dir && not timeout 60 %t/a-good/run-mpi.sh --iterations 1000000 --losses %t/a-dir 2>&1 | FileCheck %s --check-prefix=DIRECTORY
// DIRECTORY: flexpipe: rank 0: cannot write '{{.*}}a-dir': it is a directory (checked before training)
// A FIFO is refused before training (its check would wait for a reader); a
// character device is written in place and a symbolic link's target is
// replaced (the temporary renamed over them replaced /dev/null's node and
// the link, as root).
// RUN: rm -f %t/a-fifo && mkfifo %t/a-fifo && not timeout 60 %t/a-good/run-mpi.sh --iterations 1000000 --losses %t/a-fifo 2>&1 | FileCheck %s --check-prefix=FIFO
// FIFO: flexpipe: rank 0: cannot write '{{.*}}a-fifo': it is not a regular file (a FIFO, socket or block device); write to a file (checked before training)
// RUN: rm -rf %t/links && mkdir %t/links && echo old > %t/links/target && ln -s target %t/links/link && ln -s absent %t/links/dangling
// RUN: %t/a-good/run-mpi.sh --iterations 1 --losses %t/links/link > /dev/null
// RUN: test -L %t/links/link && not grep -q old %t/links/target
// RUN: %t/a-good/run-mpi.sh --iterations 1 --losses %t/links/dangling > /dev/null
// RUN: test -L %t/links/dangling && test -s %t/links/absent
// RUN: %t/a-good/run-mpi.sh --iterations 1 --losses /dev/null > /dev/null && test -c /dev/null
// Nothing is made under /dev or /proc: --weights names one file per actor
// (PREFIX.actorA), and as root /dev/null.actor0 became a regular file.
// (Removed before and after: a regression run as root would leave them.)
// RUN: rm -f /dev/null.actor0 /dev/null.actor1
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 1000000 --weights /dev/null > %t/devweights.log 2>&1; rm -f /dev/null.actor0 /dev/null.actor1
// RUN: FileCheck %s --check-prefix=DEVWEIGHTS < %t/devweights.log
// DEVWEIGHTS: cannot write '/dev/null.actor{{[0-9]}}': it does not exist, and no file is made under /dev or /proc (only existing ones are written, in place) (checked before training)
// /dev/shm's files are files: written beside and renamed, not appended to.
// RUN: if [ -d /dev/shm ] && [ -w /dev/shm ]; then d=/dev/shm/flexpipe-test-$$; mkdir -p $d && echo old > $d/l && %t/a-good/run-mpi.sh --iterations 1 --losses $d/l > /dev/null && (! grep -q old $d/l); r=$?; rm -rf $d; exit $r; fi
// /dev/stdout redirected to a file is appended to: the file keeps what it
// held and what the run printed (renaming over its resolved file lost both).
// A trace there puts its parts in TMPDIR (they went into /dev).
// RUN: echo before > %t/links/out.log
// RUN: %t/a-good/run-mpi.sh --iterations 1 --losses /dev/stdout >> %t/links/out.log
// RUN: FileCheck %s --check-prefix=STDOUT < %t/links/out.log
// STDOUT: before
// STDOUT: peak activation memory per rank
// The same through /dev/fd/1, a path in a directory of /dev (only /dev/shm's
// files are files).
// RUN: echo before > %t/links/fd.log
// RUN: %t/a-good/run-mpi.sh --iterations 1 --losses /dev/fd/1 >> %t/links/fd.log
// RUN: FileCheck %s --check-prefix=STDOUT < %t/links/fd.log
// RUN: mkdir -p %t/tmpdir && env TMPDIR=%t/tmpdir %t/a-good/run-mpi.sh --iterations 1 --trace /dev/stdout > %t/links/trace.log
// RUN: python3 -c "import sys; t = open(sys.argv[1]).read(); print(t.count('traceEvents'))" %t/links/trace.log | FileCheck %s --check-prefix=STDTRACE
// STDTRACE: 1
// RUN: ls %t/tmpdir | count 0
// (That the parts were in TMPDIR and not in /dev is not observable after
// the run: rank 0 removes them, and mpirun creates a missing TMPDIR.)
// RUN: not timeout 60 flexpipe-reference %t/a-good/schedule.txt --iterations 1000000 --losses '' 2>&1 | FileCheck %s --check-prefix=REFEMPTY
// REFEMPTY: flexpipe-reference: --losses needs a file name
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 1000000 --weights '' 2>&1 | FileCheck %s --check-prefix=RANKEMPTY
// RANKEMPTY: --weights needs a file name
// An option given twice is refused by the ranks and the reference (the last
// value won without a word).
// RUN: not timeout 60 %t/a-good/run-mpi.sh --iterations 5 --iterations 1000000 2>&1 | FileCheck %s --check-prefix=RANKTWICE
// RANKTWICE: --iterations is given twice; give it once
// RUN: not timeout 60 flexpipe-reference %t/a-good/schedule.txt --losses %t/l1 --iterations 1000000 --losses %t/l2 2>&1 | FileCheck %s --check-prefix=REFTWICE
// REFTWICE: flexpipe-reference: --losses is given twice; give it once
// RUN: rm -rf %t/out && mkdir %t/out && %t/a-good/run-mpi.sh --iterations 2 --losses %t/out/losses --weights %t/out/w --profile %t/out/p.yaml --trace %t/out/t.json > /dev/null
// RUN: ls %t/out | FileCheck %s --check-prefix=OUTPUTS
// The trace's ranks share one clock: no message arrives before it is sent
// (each rank's own start put receives milliseconds before their sends).
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 3 --microbatches 5 --dp 2 --emit=exe -o %t/a-three
// RUN: %t/a-three/run-mpi.sh --iterations 2 --trace %t/out/three.json > /dev/null
// RUN: python3 %S/trace-order.py %t/out/three.json | FileCheck %s --check-prefix=ORDER
// ORDER: 80 receives (0 asynchronous), 0 complete before their send begins
// Asynchronous transfers are traced too: the post as RECV_F (and so on),
// and the WAIT of its token with the transfer's kind ("of"), stage,
// micro-batch and peer (they had no event, and every WAIT said stage -1, so
// the check found 0 receives of ZB-V with async_comm).
// RUN: sed 's/optimize gradient_separation/optimize gradient_separation async_comm/' %schedules/zb-v.mlir > %t/zbv-async.mlir
// RUN: flexpipe-compile %t/zbv-async.mlir --actors 3 --microbatches 7 --emit=exe -o %t/a-async > /dev/null
// RUN: %t/a-async/run-mpi.sh --iterations 2 --trace %t/out/async.json > /dev/null
// RUN: python3 %S/trace-order.py %t/out/async.json | FileCheck %s --check-prefix=ASYNCORDER
// ASYNCORDER: 112 receives (112 asynchronous), 0 complete before their send begins
// RUN: FileCheck %s --check-prefix=ASYNCWAIT < %t/out/async.json
// ASYNCWAIT: "cat": "WAIT", {{.*}}"of": "RECV_F"}
// OUTPUTS-NOT: tmp
// OUTPUTS: losses
// OUTPUTS-NEXT: p.yaml
// OUTPUTS-NEXT: t.json
// OUTPUTS-NEXT: w.actor0
// OUTPUTS-NEXT: w.actor1
// OUTPUTS-NOT: tmp
// A profile leaves the first iteration out: one iteration would give none.
// RUN: not %t/a-good/run-mpi.sh --iterations 1 --profile %t/out/p1.yaml 2>&1 | FileCheck %s --check-prefix=PROFILEONE
// PROFILEONE: --profile needs at least 2 iterations: the first (a warm-up) is left out of the means
// The profile ends with each actor's optimizer step and the runtime's
// overhead per instruction (seconds; a run on a loaded machine may read
// microseconds or more, never a negative time).
// It starts with the micro-batch size and what each stage held, so that it
// prices only the job it measured (here, as compiled, again).
// RUN: FileCheck %s --check-prefix=PROFILEFILE < %t/out/p.yaml
// PROFILEFILE: micro_batch_size: 1
// PROFILEFILE-NEXT: stages:
// PROFILEFILE-NEXT: - {stage: 0, layers: [[LAYERS:[1-9][0-9]*]], first: true, last: false, fwd_s:
// PROFILEFILE-NEXT: - {stage: 1, layers: [[LAYERS]], first: false, last: true, fwd_s:
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 4 --profile %t/out/p.yaml --emit=report | FileCheck %s --check-prefix=PROFILEJOB
// PROFILEJOB: schedule @one_f_one_b: 2 actors, 2 stages, 4 micro-batches
// PROFILEFILE: default_message_s: 0
// PROFILEFILE-NEXT: optimizer_s: [{{[0-9.e-]+}}, {{[0-9.e-]+}}]
// PROFILEFILE-NEXT: instruction_s: {{[0-9][0-9.]*(e-[0-9]+)?$}}

// A rank that stops answering (SIGSTOP) is found by the liveness rule
// (FLEXPIPE_TIMEOUT, 3 s in the script): the other rank names it and stops.
// It may be waiting for a message or for the per-iteration loss all-reduce.
// RUN: python3 %S/kill_rank.py %t/a-good 1 STOP 2>&1 | FileCheck %s --check-prefix=STOP
// STOP: flexpipe: rank 0: no progress for {{[3-9]}} s (FLEXPIPE_TIMEOUT) waiting for {{the message from rank 1|the send to rank 1|an all-reduce of the ranks}}
// STOP: exit code {{[1-9][0-9]*}} after
// Two replicas of one actor meet only in all-reduces; the gradients' is
// MPI's blocking all-reduce, which the watchdog bounds.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 1 --microbatches 2 --dp 2 --emit=exe -o %t/dp2
// RUN: python3 %S/kill_rank.py %t/dp2 0 STOP 2>&1 | FileCheck %s --check-prefix=STOPDP
// STOPDP: flexpipe: rank {{[01]}}: no progress for {{[3-9]}} s {{while in the data-parallel gradient all-reduce|\(FLEXPIPE_TIMEOUT\) waiting for an all-reduce of the ranks}}
// STOPDP: exit code {{[1-9][0-9]*}} after
// The ranks that finish first wait for a slow writer in MPI_Finalize, not
// in a collective FLEXPIPE_TIMEOUT bounds: replica 1 of a GPT whose weights
// file is 95 MB (rank 0 writes it) aborted the run at 1 s, and the weights
// were lost.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 1 --dp 2 --microbatches 2 --model %configs/models/gpt-h256.yaml --cluster %configs/clusters/cpu.yaml --emit=exe -o %t/h256dp
// RUN: env FLEXPIPE_TIMEOUT=1 %t/h256dp/run-mpi.sh --iterations 2 --weights %t/h256dp/w --losses %t/h256dp/l > %t/h256dp/run.log
// RUN: test -s %t/h256dp/w.actor0
// A job stopped as a whole (Ctrl-Z, Slurm's suspend) for longer than
// FLEXPIPE_TIMEOUT trains on when continued: the time it was stopped is no
// peer's lack of progress (the ranks aborted on resuming), in the
// backend's message waits and in the watchdog's blocking all-reduce.
// RUN: python3 %S/kill_rank.py %t/a-good 0 SUSPEND 2>&1 | FileCheck %s --check-prefix=SUSPEND
// RUN: python3 %S/kill_rank.py %t/dp2 0 SUSPEND 2>&1 | FileCheck %s --check-prefix=SUSPEND
// SUSPEND: 2 ranks suspended for 6 s: still training
