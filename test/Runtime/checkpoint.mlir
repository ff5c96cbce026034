// Checkpoint and resume: a run stopped after some iterations and resumed
// from its checkpoint computes bitwise the losses and final weights of an
// uninterrupted run; a checkpoint of another schedule, model, rank count or
// rank, a damaged file and a missing one are refused with a message that
// names the file and what differs, and a non-zero exit.
// REQUIRES: mpi

// RUN: rm -rf %t && mkdir -p %t
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --microbatches 4 --emit=exe -o %t/a
// RUN: %t/a/run-mpi.sh --iterations 6 --losses %t/a/straight.losses --weights %t/a/straight.w > %t/a/straight.log

// Stopped after 3 iterations (a checkpoint after the second and at the end;
// only the newest generation stays), resumed to 6: bitwise the same.
// RUN: %t/a/run-mpi.sh --iterations 3 --checkpoint %t/a/ckpt --checkpoint-every 2 | FileCheck %s --check-prefix=FIRST
// FIRST: iteration 1: loss
// FIRST-NEXT: checkpoint after iteration 1 in '{{.*}}ckpt'
// FIRST-NEXT: iteration 2: loss
// FIRST-NEXT: checkpoint after iteration 2 in '{{.*}}ckpt'
// RUN: ls %t/a/ckpt | FileCheck %s --check-prefix=FILES
// FILES-NOT: tmp
// FILES: iter-3.rank0
// FILES-NEXT: iter-3.rank1
// FILES-NOT: {{.}}
// RUN: cp -r %t/a/ckpt %t/a/ckpt3
// RUN: %t/a/run-mpi.sh --iterations 6 --resume %t/a/ckpt --checkpoint %t/a/ckpt --checkpoint-every 2 --losses %t/a/resumed.losses --weights %t/a/resumed.w | FileCheck %s --check-prefix=RESUME
// RESUME: resuming from '{{.*}}ckpt' after iteration 2
// RESUME-NOT: iteration 2:
// RESUME: iteration 3: loss
// RUN: cmp %t/a/straight.losses %t/a/resumed.losses
// RUN: cmp %t/a/straight.w.actor0 %t/a/resumed.w.actor0
// RUN: cmp %t/a/straight.w.actor1 %t/a/resumed.w.actor1
// RUN: ls %t/a/ckpt | FileCheck %s --check-prefix=FILES6
// FILES6: iter-6.rank0
// FILES6-NEXT: iter-6.rank1
// FILES6-NOT: {{.}}

// A run killed while it wrote generation 4 (rank 0's file renamed in place,
// rank 1's still a temporary) resumes from generation 3, which both ranks
// have, and still matches.
// RUN: %t/a/run-mpi.sh --iterations 4 --checkpoint %t/a/ckpt4 > /dev/null
// RUN: cp -r %t/a/ckpt3 %t/a/crashed && cp %t/a/ckpt4/iter-4.rank0 %t/a/crashed/
// RUN: head -c 100 %t/a/ckpt4/iter-4.rank1 > %t/a/crashed/iter-4.rank1.tmp123
// RUN: %t/a/run-mpi.sh --iterations 6 --resume %t/a/crashed --checkpoint %t/a/crashed --losses %t/a/crashed.losses --weights %t/a/crashed.w | FileCheck %s --check-prefix=CRASHED
// CRASHED: resuming from '{{.*}}crashed' after iteration 2
// RUN: cmp %t/a/straight.losses %t/a/crashed.losses
// RUN: cmp %t/a/straight.w.actor0 %t/a/crashed.w.actor0
// RUN: cmp %t/a/straight.w.actor1 %t/a/crashed.w.actor1
// RUN: ls %t/a/crashed | FileCheck %s --check-prefix=FILES6

// A run really killed (SIGKILL to every rank, whenever it is) resumes from
// its newest complete generation and matches an uninterrupted run.
// RUN: python3 %S/interrupt_resume.py %t/a %t/a/killed 200 | FileCheck %s --check-prefix=KILLED
// KILLED: killed at generation {{[1-9][0-9]*}}; resumed losses and weights are bitwise equal
// With replicas too (ZB-V on 3 actors x dp 2: a generation is whole with
// the files of all 6 ranks; the script counted the 3 actors before).
// RUN: flexpipe-compile %schedules/zb-v.mlir --actors 3 --microbatches 3 --dp 2 -o %t/zbv-dp2 > /dev/null
// RUN: python3 %S/interrupt_resume.py %t/zbv-dp2 %t/zbv-dp2/killed 40 | FileCheck %s --check-prefix=KILLED

// Resuming where the checkpoint ends trains nothing and writes the outputs;
// --iterations below it is refused.
// RUN: %t/a/run-mpi.sh --iterations 6 --resume %t/a/ckpt --losses %t/a/again.losses | FileCheck %s --check-prefix=DONE
// DONE: nothing to train
// DONE-NOT: peak activation memory
// RUN: cmp %t/a/straight.losses %t/a/again.losses
// RUN: not %t/a/run-mpi.sh --iterations 5 --resume %t/a/ckpt 2>&1 | FileCheck %s --check-prefix=BEYOND
// BEYOND: flexpipe: rank {{[01]}}: --resume: checkpoint '{{.*}}ckpt/iter-6.rank{{[01]}}' has completed 6 iterations, more than --iterations 5

// Data parallelism and a zero-bubble schedule (split backward, two stages
// per actor): 4 ranks, stopped after 2 of 5 iterations.
// RUN: flexpipe-compile %schedules/zb-v.mlir --actors 2 --dp 2 --microbatches 4 --emit=exe -o %t/zb
// RUN: %t/zb/run-mpi.sh --iterations 5 --losses %t/zb/straight.losses --weights %t/zb/straight.w > /dev/null
// RUN: %t/zb/run-mpi.sh --iterations 2 --checkpoint %t/zb/ckpt --checkpoint-every 1 > /dev/null
// RUN: %t/zb/run-mpi.sh --iterations 5 --resume %t/zb/ckpt --losses %t/zb/resumed.losses --weights %t/zb/resumed.w > /dev/null
// RUN: cmp %t/zb/straight.losses %t/zb/resumed.losses
// RUN: cmp %t/zb/straight.w.actor0 %t/zb/resumed.w.actor0
// RUN: cmp %t/zb/straight.w.actor1 %t/zb/resumed.w.actor1

// Another schedule of the same model and ranks.
// RUN: flexpipe-compile %schedules/gpipe.mlir --actors 2 --microbatches 4 --emit=exe -o %t/gpipe
// RUN: not %t/gpipe/run-mpi.sh --iterations 6 --resume %t/a/ckpt3 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// SCHEDULE: flexpipe: rank {{[01]}}: --resume: checkpoint '{{.*}}ckpt3/iter-3.rank{{[01]}}' was written by another schedule (one_f_one_b, hash {{[0-9]+}}); this program runs gpipe, hash {{[0-9]+}}: resume with executables compiled from the same spec and options

// Another model (8 layers instead of 4) on the same ranks.
// RUN: sed 's/layers(8)/layers(16)/' %schedules/1f1b.mlir > %t/deeper.mlir
// RUN: flexpipe-compile %t/deeper.mlir --actors 2 --microbatches 4 --emit=exe -o %t/deeper
// RUN: not %t/deeper/run-mpi.sh --iterations 6 --resume %t/a/ckpt3 2>&1 | FileCheck %s --check-prefix=MODEL
// MODEL: flexpipe: rank {{[01]}}: --resume: checkpoint '{{.*}}ckpt3/iter-3.rank{{[01]}}' is of another model (vocab=256 seq=32 hidden=64 heads=4 layers=4 microbatch=1 seed=1234); this program trains vocab=256 seq=32 hidden=64 heads=4 layers=8 microbatch=1 seed=1234

// Another rank count: the 4 ranks of dp 2 and a checkpoint of 2 ranks.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 2 --dp 2 --microbatches 4 --emit=exe -o %t/dp2
// RUN: not %t/dp2/run-mpi.sh --iterations 6 --resume %t/a/ckpt3 2>&1 | FileCheck %s --check-prefix=RANKS
// RANKS: flexpipe: rank {{[0-3]}}: --resume: {{.*}}checkpoint '{{.*}}ckpt3/iter-3.rank{{[01]}}' was written by 2 ranks (2 actors x dp 1); this run has 4 ranks (2 actors x dp 2): resume with the ranks that wrote it

// Another rank's file.
// RUN: cp -r %t/a/ckpt3 %t/a/swapped && cp %t/a/ckpt3/iter-3.rank1 %t/a/swapped/iter-3.rank0
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/swapped 2>&1 | FileCheck %s --check-prefix=RANK
// RANK: flexpipe: rank 0: --resume: checkpoint '{{.*}}swapped/iter-3.rank0' holds rank 1's state, not rank 0's: every rank resumes from its own file

// A truncated file, a flipped bit, not a checkpoint at all.
// RUN: cp -r %t/a/ckpt3 %t/a/truncated && head -c 5000 %t/a/ckpt3/iter-3.rank1 > %t/a/truncated/iter-3.rank1
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/truncated 2>&1 | FileCheck %s --check-prefix=TRUNCATED
// TRUNCATED: flexpipe: rank 1: --resume: checkpoint '{{.*}}truncated/iter-3.rank1' is truncated or corrupt (5000 bytes, ending inside its parameters)
// Cut inside its checksum (3 of its 8 bytes gone): named so, where it said
// "ending inside its parameters".
// RUN: cp -r %t/a/ckpt3 %t/a/cut-checksum && python3 -c "import sys; b = open(sys.argv[1], 'rb').read(); open(sys.argv[2], 'wb').write(b[:-3])" %t/a/ckpt3/iter-3.rank1 %t/a/cut-checksum/iter-3.rank1
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/cut-checksum 2>&1 | FileCheck %s --check-prefix=CUTSUM
// CUTSUM: flexpipe: rank 1: --resume: checkpoint '{{.*}}cut-checksum/iter-3.rank1' is truncated ({{[0-9]+}} bytes, ending inside its checksum)
// RUN: cp -r %t/a/ckpt3 %t/a/flipped
// RUN: python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 1; open(p, 'wb').write(b)" %t/a/flipped/iter-3.rank0
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/flipped 2>&1 | FileCheck %s --check-prefix=FLIPPED
// FLIPPED: flexpipe: rank 0: --resume: checkpoint '{{.*}}flipped/iter-3.rank0' is corrupt: its checksum does not match its contents
// A FIFO in a checkpoint's place is refused (rank 1 waited to open it
// until the other rank's FLEXPIPE_TIMEOUT, which named no file).
// RUN: cp -r %t/a/ckpt3 %t/a/fifo && rm %t/a/fifo/iter-3.rank1 && mkfifo %t/a/fifo/iter-3.rank1
// RUN: not env FLEXPIPE_TIMEOUT=60 timeout 120 %t/a/run-mpi.sh --iterations 6 --resume %t/a/fifo 2>&1 | FileCheck %s --check-prefix=FIFO
// FIFO: flexpipe: rank 1: --resume: cannot read checkpoint '{{.*}}fifo/iter-3.rank1': it is not a regular file (a FIFO, socket or device)
// RUN: cp -r %t/a/ckpt3 %t/a/garbage && echo hello > %t/a/garbage/iter-3.rank0
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/garbage 2>&1 | FileCheck %s --check-prefix=GARBAGE
// GARBAGE: flexpipe: rank 0: --resume: '{{.*}}garbage/iter-3.rank0' is not a FlexPipe checkpoint
// The checksum is FNV-1a with its own offset basis (a digit was missing:
// tools written from the docs could not check a file).
// RUN: python3 -c "import sys, struct; b = open(sys.argv[1], 'rb').read(); h = 0xcbf29ce484222325; exec('for c in b[:-8]: h = ((h ^ c) * 0x100000001b3) % 2**64'); assert struct.unpack('<Q', b[-8:])[0] == h, 'checksum'" %t/a/ckpt3/iter-3.rank0
// Without its checksum, a file says so (it read "ending inside its
// parameters"); a damaged version field is not taken for another format.
// RUN: cp -r %t/a/ckpt3 %t/a/nosum && python3 -c "import sys; p = sys.argv[1]; b = open(p, 'rb').read(); open(p, 'wb').write(b[:-8])" %t/a/nosum/iter-3.rank1
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/nosum 2>&1 | FileCheck %s --check-prefix=NOSUM
// NOSUM: flexpipe: rank 1: --resume: checkpoint '{{.*}}nosum/iter-3.rank1' is truncated ({{[0-9]+}} bytes, ending before its checksum)
// RUN: cp -r %t/a/ckpt3 %t/a/version && python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[8] = 0xAA; open(p, 'wb').write(b)" %t/a/version/iter-3.rank0
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/version 2>&1 | FileCheck %s --check-prefix=VERSION
// VERSION: flexpipe: rank 0: --resume: checkpoint '{{.*}}version/iter-3.rank0' is corrupt or has format version 170; this runtime reads versions 2 and 3
// A file of the earlier format (version 1, summed from the mistyped basis)
// is said to be one, not corrupt.
// RUN: cp -r %t/a/ckpt3 %t/a/v1 && python3 -c "import sys, struct; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()[:-8]); b[8:12] = struct.pack('<I', 1); h = 1469598103934665603; exec('for c in b: h = ((h ^ c) * 0x100000001b3) % 2**64'); open(p, 'wb').write(bytes(b) + struct.pack('<Q', h))" %t/a/v1/iter-3.rank0
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/v1 2>&1 | FileCheck %s --check-prefix=V1
// V1: checkpoint '{{.*}}v1/iter-3.rank0' has format version 1; this runtime reads versions 2 and 3 (an earlier FlexPipe's: train again, or resume with the FlexPipe that wrote it)
// Names are written without leading zeros: iter-03 is not a checkpoint
// (it was listed, then looked for as iter-3).
// RUN: mkdir -p %t/a/zeros && cp %t/a/ckpt3/iter-3.rank0 %t/a/zeros/iter-03.rank0 && cp %t/a/ckpt3/iter-3.rank1 %t/a/zeros/iter-03.rank1
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/zeros 2>&1 | FileCheck %s --check-prefix=ZEROS
// ZEROS: --resume: '{{.*}}zeros' holds no checkpoint of rank {{[01]}}
// One generation's files of two runs (a run stopped while it replaced
// another's): refused, where it resumed a model stitched from both.
// RUN: %t/a/run-mpi.sh --iterations 3 --lr 0.1 --checkpoint %t/a/other-run > /dev/null
// RUN: mkdir -p %t/a/stitched && cp %t/a/ckpt3/iter-3.rank0 %t/a/stitched/ && cp %t/a/other-run/iter-3.rank1 %t/a/stitched/
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/stitched 2>&1 | FileCheck %s --check-prefix=STITCHED
// STITCHED: --resume: the files of iteration 3 in '{{.*}}stitched' were written by different runs (rank {{[01]}}'s by run {{[0-9]+}}): a run was stopped while it replaced another's checkpoint; resume from a directory of one run
// STITCHED-NOT: resuming from
// Each launch has its own id, a resumed one too: two runs resumed from one
// checkpoint (another --lr) are told apart in one generation.
// RUN: %t/a/run-mpi.sh --iterations 4 --resume %t/a/ckpt3 --checkpoint %t/a/ckpt4b > /dev/null
// RUN: %t/a/run-mpi.sh --iterations 4 --lr 0.1 --resume %t/a/ckpt3 --checkpoint %t/a/ckpt4c > /dev/null
// RUN: mkdir -p %t/a/two-resumes && cp %t/a/ckpt4b/iter-4.rank0 %t/a/ckpt4c/iter-4.rank1 %t/a/two-resumes/
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/two-resumes 2>&1 | FileCheck %s --check-prefix=TWORESUMES
// TWORESUMES: the files of iteration 4 in '{{.*}}two-resumes' were written by different runs
// With a whole older generation beside them (two runs each stopped while
// they wrote generation 4), that one is resumed from, with a note, and the
// run matches an uninterrupted one (it was refused).
// RUN: cp -r %t/a/ckpt3 %t/a/mixed4 && cp %t/a/ckpt4b/iter-4.rank0 %t/a/ckpt4c/iter-4.rank1 %t/a/mixed4/
// RUN: %t/a/run-mpi.sh --iterations 6 --resume %t/a/mixed4 --losses %t/a/mixed4.losses --weights %t/a/mixed4.w | FileCheck %s --check-prefix=MIXED4
// MIXED4: note: the files of iteration 4 in '{{.*}}mixed4' were written by different runs (rank 0's by run {{[0-9]+}}): a run was stopped while it replaced another's checkpoint; looking for an older generation
// MIXED4: resuming from '{{.*}}mixed4' after iteration 2
// RUN: cmp %t/a/straight.losses %t/a/mixed4.losses
// RUN: cmp %t/a/straight.w.actor0 %t/a/mixed4.w.actor0
// RUN: cmp %t/a/straight.w.actor1 %t/a/mixed4.w.actor1
// Nothing left to train still writes --checkpoint's state (it left the
// directory empty).
// RUN: %t/a/run-mpi.sh --iterations 4 --resume %t/a/ckpt4b --checkpoint %t/a/ckpt4-again | FileCheck %s --check-prefix=AGAIN
// AGAIN: nothing to train
// AGAIN: checkpoint after iteration 3 in '{{.*}}ckpt4-again'
// The same state, written by another launch (its own run id, bytes 12 to
// 19, and so its own checksum).
// RUN: python3 -c "import sys; a, b = (open(p, 'rb').read() for p in sys.argv[1:]); assert a[12:20] != b[12:20] and a[20:-8] == b[20:-8]" %t/a/ckpt4b/iter-4.rank0 %t/a/ckpt4-again/iter-4.rank0
// Into the directory resumed from, the generation is kept as it is (it was
// rewritten under the new run's id: a kill midway left it of two runs, and
// no older one to resume).
// RUN: cp -r %t/a/ckpt4b %t/a/ckpt4-same
// RUN: %t/a/run-mpi.sh --iterations 4 --resume %t/a/ckpt4-same --checkpoint %t/a/ckpt4-same/ | FileCheck %s --check-prefix=SAME
// SAME: nothing to train
// SAME: checkpoint after iteration 3 in '{{.*}}ckpt4-same/' kept as it is
// RUN: cmp %t/a/ckpt4b/iter-4.rank0 %t/a/ckpt4-same/iter-4.rank0
// RUN: cmp %t/a/ckpt4b/iter-4.rank1 %t/a/ckpt4-same/iter-4.rank1

// A file of format version 2 (no precision) resumes as before.
// RUN: cp -r %t/a/ckpt3 %t/a/v2 && python3 %S/checkpoint-as-v2.py %t/a/v2/iter-3.rank0 && python3 %S/checkpoint-as-v2.py %t/a/v2/iter-3.rank1
// RUN: %t/a/run-mpi.sh --iterations 6 --resume %t/a/v2 --losses %t/a/v2.losses | FileCheck %s --check-prefix=V2
// V2: resuming from '{{.*}}v2' after iteration 2
// V2-NOT: note:
// RUN: cmp %t/a/straight.losses %t/a/v2.losses
// A directory under a checkpoint's name says so (it read "not a regular
// file (a FIFO, socket or device)").
// RUN: mkdir -p %t/a/dirs/iter-3.rank0 %t/a/dirs/iter-3.rank1
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/a/dirs 2>&1 | FileCheck %s --check-prefix=DIRS
// DIRS: --resume: cannot read checkpoint '{{.*}}dirs/iter-3.rank{{[01]}}': it is a directory

// An empty directory, a missing one.
// RUN: mkdir -p %t/empty
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/empty 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: flexpipe: rank {{[01]}}: --resume: '{{.*}}empty' holds no checkpoint of rank {{[01]}} (a file iter-K.rank{{[01]}})
// RUN: not %t/a/run-mpi.sh --iterations 6 --resume %t/missing 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: flexpipe: rank {{[01]}}: --resume: cannot read directory '{{.*}}missing': No such file or directory

// The checkpoint directory is created, or found unwritable before training;
// the options are checked.
// RUN: %t/a/run-mpi.sh --iterations 1 --checkpoint %t/new/deeper/dir > /dev/null
// RUN: ls %t/new/deeper/dir | FileCheck %s --check-prefix=CREATED
// CREATED: iter-1.rank0
// RUN: touch %t/a-file
// RUN: not timeout 60 %t/a/run-mpi.sh --iterations 1000000 --checkpoint %t/a-file/ckpt 2>&1 | FileCheck %s --check-prefix=UNWRITABLE
// UNWRITABLE: flexpipe: rank {{[01]}}: --checkpoint: cannot create directory '{{.*}}a-file/ckpt': Not a directory (checked before training)
// RUN: not %t/a/run-mpi.sh --checkpoint-every 2 2>&1 | FileCheck %s --check-prefix=EVERY
// EVERY: --checkpoint-every needs --checkpoint DIR
// RUN: not %t/a/run-mpi.sh --checkpoint %t/x --checkpoint-every 0 2>&1 | FileCheck %s --check-prefix=EVERY0
// EVERY0: --checkpoint-every must be an integer from 1 to 1099511627776 (2^40), got '0'
// RUN: not %t/a/run-mpi.sh --resume "" 2>&1 | FileCheck %s --check-prefix=EMPTYDIR
// EMPTYDIR: --resume needs a directory

// Option values are whole numbers in range (atoll/atof used to take "3x" as
// 3 and "abc" as 0), in the rank programs and in flexpipe-reference alike.
// RUN: not %t/a/run-mpi.sh --iterations 3x 2>&1 | FileCheck %s --check-prefix=ITERS
// ITERS: --iterations must be an integer from 1 to 1099511627776 (2^40), got '3x'
// RUN: not %t/a/run-mpi.sh --lr abc 2>&1 | FileCheck %s --check-prefix=LR
// LR: --lr must be a decimal number, 0 or from 1.2e-38 (a float's smallest normal) to 1e6, got 'abc'
// A rate a float cannot hold trained as 0, and hexadecimal was taken:
// RUN: not %t/a/run-mpi.sh --lr 1e-50 2>&1 | FileCheck %s --check-prefix=LRTINY
// LRTINY: --lr must be a decimal number, 0 or from 1.2e-38 (a float's smallest normal) to 1e6, got '1e-50'
// RUN: not %t/a/run-mpi.sh --lr 0x10 2>&1 | FileCheck %s --check-prefix=LRHEX
// LRHEX: got '0x10'
// RUN: not flexpipe-reference %t/a/schedule.txt --iterations 99999999999999999999 2>&1 | FileCheck %s --check-prefix=REFITERS
// REFITERS: flexpipe-reference: --iterations must be an integer from 1 to 1099511627776 (2^40), got '99999999999999999999'
// Leading spaces, which strtoll skips, are refused as --lr refuses them:
// RUN: not flexpipe-reference %t/a/schedule.txt --iterations ' 2' 2>&1 | FileCheck %s --check-prefix=REFSPACE
// REFSPACE: --iterations must be an integer from 1 to 1099511627776 (2^40), got ' 2'
// --help after the schedule, and a standard output that cannot be written
// (the loss lines were lost, and the tool exited 0):
// RUN: flexpipe-reference %t/a/schedule.txt --help | FileCheck %s --check-prefix=REFHELPLATE
// REFHELPLATE: usage: flexpipe-reference SCHEDULE.txt
// RUN: not flexpipe-reference %t/a/schedule.txt --iterations 1 > /dev/full 2> %t/ref-full.err
// RUN: FileCheck %s --check-prefix=REFFULL < %t/ref-full.err
// REFFULL: flexpipe-reference: cannot write the standard output (a full disk?); lines of this run are lost
// RUN: not flexpipe-reference %t/a/schedule.txt --lr nan 2>&1 | FileCheck %s --check-prefix=REFLR
// REFLR: flexpipe-reference: --lr must be a decimal number, 0 or from 1.2e-38 (a float's smallest normal) to 1e6, got 'nan'
// RUN: not flexpipe-reference %t/a/schedule.txt --lr 1e-40 2>&1 | FileCheck %s --check-prefix=REFLRTINY
// REFLRTINY: got '1e-40'
// RUN: not flexpipe-reference %t/a/schedule.txt --lr 1e-400 2>&1 | FileCheck %s --check-prefix=REFLRZERO
// REFLRZERO: got '1e-400'
// The description's numbers round-trip: the seed is unsigned (seeds from
// 2^63 up all read as 2^63 - 1) and a size out of range is refused as
// written (it was reported clamped).
// RUN: grep -v '^hash\|^check' %t/a/schedule.txt | sed 's/seed=[0-9]*/seed=18446744073709551615/' > %t/seed-top.txt
// RUN: grep -v '^hash\|^check' %t/a/schedule.txt | sed 's/seed=[0-9]*/seed=9223372036854775807/' > %t/seed-half.txt
// RUN: flexpipe-reference %t/seed-top.txt --iterations 1 --losses %t/seed-top.losses
// RUN: flexpipe-reference %t/seed-half.txt --iterations 1 --losses %t/seed-half.losses
// RUN: not cmp -s %t/seed-top.losses %t/seed-half.losses
// RUN: grep -v '^hash\|^check' %t/a/schedule.txt | sed 's/seed=[0-9]*/seed=99999999999999999999/' > %t/seed-range.txt
// RUN: not flexpipe-reference %t/seed-range.txt --iterations 1 2>&1 | FileCheck %s --check-prefix=SEEDRANGE
// SEEDRANGE: 'seed=99999999999999999999' is out of range for a 64-bit integer
// A description summed from the mistyped FNV-1a basis is an earlier
// FlexPipe's, not an edited one.
// RUN: python3 -c "import sys; t = open(sys.argv[1]).read().split('\n'); i = next(n for n, l in enumerate(t) if l.startswith('check ')); body = '\n'.join(t[i + 1:]).encode(); h = 1469598103934665603; exec('for c in body: h = ((h ^ c) * 0x100000001b3) % 2**64'); t[i] = 'check %%d' %% h; open(sys.argv[2], 'w').write('\n'.join(t))" %t/a/schedule.txt %t/old-check.txt
// RUN: not flexpipe-reference %t/old-check.txt --iterations 1 2>&1 | FileCheck %s --check-prefix=OLDCHECK
// OLDCHECK: the description was written by an earlier FlexPipe (its check sum starts from FNV-1a's mistyped offset basis); compile the spec again
// RUN: grep -v '^hash\|^check' %t/a/schedule.txt | sed 's/layers=[0-9]*/layers=99999999999999999999/' > %t/layers-range.txt
// RUN: not flexpipe-reference %t/layers-range.txt --iterations 1 2>&1 | FileCheck %s --check-prefix=LAYERSRANGE
// LAYERSRANGE: 'layers=99999999999999999999' is out of range for a 64-bit integer
// The schedule left out: said so (it read '--iterations' as the schedule
// and reported "'1' needs a value").
// RUN: not flexpipe-reference --iterations 1 2>&1 | FileCheck %s --check-prefix=REFNOSCHED
// REFNOSCHED: flexpipe-reference: the first argument is the schedule description (SCHEDULE.txt, or ./--iterations for a file of that name), not the option '--iterations'
// An unknown option, a second schedule and a directory are said as such
// (they read "'--bogus' needs a value", "'...' needs a value" and
// "schedule description: empty"); -h and --help print the usage on stdout.
// RUN: not flexpipe-reference %t/a/schedule.txt --bogus 2>&1 | FileCheck %s --check-prefix=REFUNKNOWN
// REFUNKNOWN: flexpipe-reference: unknown option '--bogus'
// RUN: not flexpipe-reference %t/a/schedule.txt %t/a/schedule.txt 2>&1 | FileCheck %s --check-prefix=REFSECOND
// REFSECOND: flexpipe-reference: unexpected argument '{{.*}}schedule.txt' (the schedule is the first, and only, argument that is not an option)
// RUN: not flexpipe-reference %t/a 2>&1 | FileCheck %s --check-prefix=REFDIR
// REFDIR: flexpipe-reference: cannot read '{{.*}}': it is a directory
// RUN: flexpipe-reference -h 2>/dev/null | FileCheck %s --check-prefix=REFHELP
// REFHELP: usage: flexpipe-reference SCHEDULE.txt
