// PyTorch's schedule CSV (docs/PyTorch.md): both export formats, what they
// refuse, and import of PyTorch's files into FlexPipe's tools.

// compute_comms: a wait after each send (an activation's after its local
// backward, a gradient's at the end) and the gradient reduction after each
// stage's last backward.
// RUN: flexpipe-compile %s --actors 2 --microbatches 2 --emit=torch-csv-comms | FileCheck %s --check-prefix=COMMS
// COMMS:      0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD
// Rank 1 posts RECV_F1 when rank 0 sends F1, before its own SEND_B0: on
// NCCL a pair's transfers run on one stream in the order posted, and rank 0
// posts SEND_F1 before RECV_B0.
// COMMS-NEXT: 1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1WAIT_SEND_B0,1WAIT_SEND_B1

// The V shape: rank 1 posts the receive of micro-batch 6's activation (rank
// 0 sends it first) before the gradient of micro-batch 0 that it needs
// earlier; in program order the gradient's receive would come first.
// RUN: flexpipe-compile %schedules/zb-v.mlir --actors 4 --microbatches 8 --emit=torch-csv-comms -o %t.zbv.csv
// RUN: FileCheck %s --check-prefix=VSHAPE < %t.zbv.csv
// VSHAPE:      0F0,0SEND_F0,0F1,0SEND_F1,0F2,0SEND_F2,0F3,0SEND_F3,0F4,0SEND_F4,0F5,0SEND_F5,7RECV_F0,0F6,0SEND_F6,7F0,
// VSHAPE-NEXT: {{.*}}1RECV_F6,{{.*}}6RECV_B0,6I0,
// The file reads back as the same programs: exporting it again is the same.
// RUN: flexpipe-compile %t.zbv.csv --emit=torch-csv-comms | diff - %t.zbv.csv
// RUN: flexpipe-compile %t.zbv.csv --emit=text | FileCheck %s --check-prefix=IMPORTED
// IMPORTED: schedule @"{{.*}}zbv": 4 actors, 8 stages, 8 micro-batches, 51 steps when every computation takes one step
// RUN: flexpipe-compile %t.zbv.csv --emit=schedule | FileCheck %s --check-prefix=IR
// IR: flexpipe.schedule @"{{.*}}zbv" actors(4) stages(8) microbatches(8) {
// IR: %{{.*}} = flexpipe.recv_act stage 1 mb 6 from 0 : !flexpipe.token
// With a one-module model file, the stages split its layers evenly.
// RUN: flexpipe-compile %t.zbv.csv --model %configs/models/tiny.yaml --cluster %configs/clusters/cpu.yaml --emit=report | FileCheck %s --check-prefix=REPORT
// REPORT: iteration time

// Refused: what PyTorch's format cannot express gets no file.
// RUN: not flexpipe-compile %schedules/bidirectional.mlir --emit=torch-csv-comms -o %t.bi.csv 2>&1 | FileCheck %s --check-prefix=BIDI
// RUN: not test -e %t.bi.csv
// A refused export leaves a file already at -o as it was.
// RUN: echo kept > %t.kept.csv
// RUN: not flexpipe-compile %schedules/bidirectional.mlir --emit=torch-csv-comms -o %t.kept.csv 2>&1 | FileCheck %s --check-prefix=BIDI
// RUN: FileCheck %s --check-prefix=KEPT --input-file %t.kept.csv
// KEPT: kept
// A file named just ".csv" gives a schedule that reads back.
// RUN: rm -rf %t.dot && mkdir %t.dot && cp %S/Inputs/torch-compute-only.csv %t.dot/.csv
// RUN: flexpipe-compile %t.dot/.csv --emit=schedule -o %t.dot/back.mlir
// RUN: flexpipe-compile %t.dot/back.mlir --emit=text | FileCheck %s --check-prefix=DOTNAME
// DOTNAME: schedule @torch_schedule:
// BIDI: bidirectional.mlir:4:1: error: --emit=torch-csv-comms cannot write 'bidirectional': stage 4 starts another pipeline of the model (replicated weights, as in bidirectional pipelines); PyTorch's schedule format runs one chain of stages, each on one rank
// Two towers (modules on their own actors, no edge between them) are
// named as such: the first stage of the second module was taken for the
// start of a bidirectional pipeline's second direction (weights replicated).
// RUN: printf 'flexpipe.pipeline @two actors(4) microbatches(4) {\n  flexpipe.module @a layers(2) placement(one_to_one) actors [0, 1]\n  flexpipe.module @b layers(2) placement(one_to_one) actors [2, 3]\n  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>\n}\n' > %t.towers.mlir
// RUN: not flexpipe-compile %t.towers.mlir --emit=torch-csv 2>&1 | FileCheck %s --check-prefix=TOWERS
// TOWERS: error: --emit=torch-csv cannot write 'two': stage 1 does not feed stage 2 (several pipelines or towers); PyTorch's schedule format runs one chain of stages
// A chain against the stage order is named with the chain the format runs:
// of two stages "0 -> 1" (it said "0 -> 1 -> ... -> 1").
// RUN: printf 'flexpipe.schedule @r actors(2) stages(2) microbatches(1) edges [1 -> 0] {\n  flexpipe.actor 0 {\n    flexpipe.fwd stage 1 mb 0\n    flexpipe.bwd stage 1 mb 0\n  }\n  flexpipe.actor 1 {\n    flexpipe.fwd stage 0 mb 0\n    flexpipe.bwd stage 0 mb 0\n  }\n}\n' > %t.reversed.mlir
// RUN: not flexpipe-compile %t.reversed.mlir --emit=torch-csv 2>&1 | FileCheck %s --check-prefix=REVERSED
// REVERSED: error: --emit=torch-csv cannot write 'r': stage 1 feeds stage 0; PyTorch's schedule format runs one chain of stages 0 -> 1{{$}}
// A registered instruction or collective is refused at its op: in a spec,
// the flexpipe.instruction (it was the pipeline's first line); in a
// schedule, the first such op.
// RUN: not flexpipe-compile %examples/clip-mixed.mlir --emit=torch-csv 2>&1 | FileCheck %s --check-prefix=CLIP
// CLIP: clip-mixed.mlir:8:3: error: --emit=torch-csv cannot write 'clip_mixed': actor 3 runs all_gather on stage 10; PyTorch's schedule format has no registered instructions or collectives
// CLIP-NEXT: flexpipe.instruction @sync_states kind(all_gather) on(@sync)
// RUN: flexpipe-compile %examples/clip-mixed.mlir --emit=schedule -o %t.clip.mlir
// RUN: not flexpipe-compile %t.clip.mlir --emit=torch-csv-comms 2>&1 | FileCheck %s --check-prefix=CLIPSCHED
// CLIPSCHED: clip.mlir:{{[0-9]+}}:7: error: --emit=torch-csv-comms cannot write 'clip_mixed': actor 3 runs all_gather on stage 10
// CLIPSCHED-NEXT: flexpipe.all_gather stage 10 mb 0 group [3, 5]
// An actor that computes nothing would be a blank row, an idle rank, which
// PyTorch cannot run and the reader refuses (it was written):
// RUN: printf 'flexpipe.schedule @idle actors(3) stages(1) microbatches(1) {\n  flexpipe.actor 0 {\n  }\n  flexpipe.actor 1 {\n    flexpipe.fwd stage 0 mb 0\n    flexpipe.bwd stage 0 mb 0\n  }\n  flexpipe.actor 2 {\n  }\n}\n' > %t.idle.mlir
// RUN: not flexpipe-compile %t.idle.mlir --emit=torch-csv 2>&1 | FileCheck %s --check-prefix=IDLE
// RUN: not flexpipe-compile %t.idle.mlir --emit=torch-csv-comms 2>&1 | FileCheck %s --check-prefix=IDLE
// IDLE: error: --emit=torch-csv{{(-comms)?}} cannot write 'idle': actor 0 computes nothing; PyTorch's schedule format has a rank per actor, each with a stage, and cannot run an idle one

// A compute_comms file that writes waits writes one per send and reduction,
// starts a stage's reduction once and waits for one only once started:
// PyTorch 2.15 refuses the others (they were read). PyTorch's own older
// comms orders write no waits at all, and stay readable.
// RUN: printf '0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1WAIT_SEND_B0,1WAIT_SEND_B1\n' > %t.waits.csv
// RUN: flexpipe-compile %t.waits.csv --emit=text | FileCheck %s --check-prefix=WAITS-OK
// WAITS-OK: 2 actors, 2 stages, 2 micro-batches
// RUN: sed '1s/0REDUCE_GRAD,/0REDUCE_GRAD,0REDUCE_GRAD,/' %t.waits.csv > %t.twice.csv
// RUN: not flexpipe-compile %t.twice.csv --emit=text 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: twice.csv:1:94: error: 0REDUCE_GRAD reduces stage 0's gradients a second time (PyTorch refuses it; it would scale them twice)
// RUN: sed '1s/0REDUCE_GRAD,//' %t.waits.csv > %t.noreduce.csv
// RUN: not flexpipe-compile %t.noreduce.csv --emit=text 2>&1 | FileCheck %s --check-prefix=NOREDUCE
// NOREDUCE: noreduce.csv:1:81: error: 0WAIT_REDUCE_GRAD waits for a reduction of stage 0 that this rank has not started (a REDUCE_GRAD comes first)
// RUN: sed '1s/,0WAIT_REDUCE_GRAD//' %t.waits.csv > %t.nowait.csv
// RUN: not flexpipe-compile %t.nowait.csv --emit=text 2>&1 | FileCheck %s --check-prefix=NOWAIT
// NOWAIT: nowait.csv:1:81: error: 0REDUCE_GRAD is never waited for (WAIT_REDUCE_GRAD): PyTorch's runtime refuses such a rank
// RUN: sed '1s/0WAIT_SEND_F1,//' %t.waits.csv > %t.nosendwait.csv
// RUN: not flexpipe-compile %t.nosendwait.csv --emit=text 2>&1 | FileCheck %s --check-prefix=NOSENDWAIT
// NOSENDWAIT: nosendwait.csv:1:18: error: 0SEND_F1 is never waited for (WAIT_SEND_F): PyTorch's runtime refuses such a rank

// Lines may end in a lone CR, as Python's csv module reads them (two rows
// ran into one cell), and errors are located on such lines too.
// RUN: printf '0F0,0F1,0B0,0B1\r1F0,1B0,1F1,1B1\r' > %t.cr.csv
// RUN: flexpipe-compile %t.cr.csv --emit=text | FileCheck %s --check-prefix=CR
// CR: 2 actors, 2 stages, 2 micro-batches
// RUN: printf '0F0,0F1,0B0,0B1\r1F0,1X0\r' > %t.crbad.csv
// RUN: not flexpipe-compile %t.crbad.csv --emit=text 2>&1 | FileCheck %s --check-prefix=CRBAD
// CRBAD: crbad.csv:2:5: error: '1X0' is not a PyTorch action

// A compute_only file whose computation orders cannot run with the
// transfers PyTorch adds: at the computation, saying whose transfers they
// are (it named transfers the file does not write, at no cell).
// RUN: printf '0F0,0B0,0F1,0B1\n1F1,1F0,1B0,1B1\n' > %t.order.csv
// RUN: not flexpipe-compile %t.order.csv --emit=text 2>&1 | FileCheck %s --check-prefix=ORDER
// ORDER: order.csv:2:1: error: recv_act stage 1 mb 1 from 0 on actor 1 would receive the message of send_act stage 0 mb 0 to 1 on actor 0: {{.*}} (a compute_only file: these are the transfers PyTorch's runtime adds, each receive right before the computation that needs it

// Import: compute_only gets the communication PyTorch's runtime adds.
// RUN: flexpipe-compile %S/Inputs/torch-compute-only.csv --emit=text | FileCheck %s --check-prefix=ONLY
// ONLY:      schedule @"torch-compute-only": 2 actors, 2 stages, 2 micro-batches, 6 steps
// ONLY:      actor 0 | 0F0 0F1 .   0B0 .   0B1
// ONLY-NEXT: actor 1 | .   1F0 1B0 1F1 1B1 .
// Rank 1 computes micro-batch 1 first: it posts both receives in rank 0's
// send order, as PyTorch does (receives right before each forward would
// take micro-batch 0's activation for micro-batch 1).
// RUN: flexpipe-compile %S/Inputs/torch-compute-only-swapped.csv --emit=torch-csv-comms | FileCheck %s --check-prefix=SWAPPED
// SWAPPED:      0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,
// SWAPPED-NEXT: 1RECV_F0,1RECV_F1,1F1,1F0,1B0,1SEND_B0,1B1,1SEND_B1,
// From standard input the schedule gets a name of its own (it was @-).
// RUN: flexpipe-compile - --from torch-csv --emit=text < %S/Inputs/torch-compute-only.csv | FileCheck %s --check-prefix=STDIN
// STDIN: schedule @torch_schedule: 2 actors

// PyTorch's own 1F1B generator numbers the last rank's micro-batches from 1.
// RUN: not flexpipe-compile %S/Inputs/torch-1f1b-pp2-m4.csv --emit=text 2>&1 | FileCheck %s --check-prefix=BUG
// BUG: torch-1f1b-pp2-m4.csv:2:5: error: stage 1 micro-batch 0 completes a backward but runs no forward; every backward needs its forward

// A compute_comms file is checked with PyTorch's rule: one FIFO channel per
// rank pair.
// RUN: not flexpipe-compile %S/Inputs/torch-comms-unordered.csv --emit=text 2>&1 | FileCheck %s --check-prefix=FIFO
// FIFO: torch-comms-unordered.csv:2:10: error: recv_act stage 1 mb 0 from 0 on actor 1 would receive the message of send_act stage 0 mb 1 to 1 on actor 0: without tags, the receives an actor posts for a peer must come in the order of that peer's sends
// FIFO: torch-comms-unordered.csv:1:18: note: the send it would match

// ... and the transfers between two ranks must come in one order on both
// (FlexPipe's exports before it ordered them so), said at the first side's
// cell:
// RUN: not flexpipe-compile %S/Inputs/torch-comms-pair-order.csv --emit=text 2>&1 | FileCheck %s --check-prefix=PAIR
// PAIR: torch-comms-pair-order.csv:1:18: error: transfer 2 between actors 0 and 1 is send_act stage 0 mb 1 on actor 0 but send_grad stage 1 mb 0 on actor 1; PyTorch's NCCL point-to-point runs a pair's transfers on one stream in the order posted, so both sides must post them in one order

// Actions besides computations and transfers are checked, not dropped
// unread: a stage's actions stand on its rank, REDUCE_GRAD after the
// stage's last backward, WAIT_SEND after its send; a stage number that is
// computed nowhere is named where it stands.
// RUN: printf '0F0,0B0,1REDUCE_GRAD\n1F0,1B0\n' > %t.other-rank.csv
// RUN: not flexpipe-compile %t.other-rank.csv 2>&1 | FileCheck %s --check-prefix=OTHERRANK
// OTHERRANK: other-rank.csv:1:9: error: 1REDUCE_GRAD stands on rank 0, but stage 1 runs on rank 1
// RUN: printf '0F0,0REDUCE_GRAD,0B0\n1F0,1B0\n' > %t.early.csv
// RUN: not flexpipe-compile %t.early.csv 2>&1 | FileCheck %s --check-prefix=EARLY
// EARLY: early.csv:1:5: error: 0REDUCE_GRAD comes before stage 0's last backward (column 18): PyTorch would reduce and scale gradients that are not complete
// RUN: printf '0F0,0SEND_F0,0RECV_B0,0B0,0WAIT_SEND_F0\n1RECV_F0,1F0,1B0,1SEND_B0,1WAIT_SEND_B5\n' > %t.nosend.csv
// RUN: not flexpipe-compile %t.nosend.csv 2>&1 | FileCheck %s --check-prefix=NOSEND
// NOSEND: nosend.csv:2:27: error: 1WAIT_SEND_B5 waits for 1SEND_B5, which this rank has not sent (or has waited for already)
// NOSEND-NEXT: 1RECV_F0,1F0,1B0,1SEND_B0,1WAIT_SEND_B5
// NOSEND-NEXT: {{^}}                          ^
// A WAIT_SEND returns once the peer has posted the receive (NCCL's
// rendezvous): here rank 0 waits for 3SEND_B0's receive before it sends
// micro-batch 1 on, and rank 2 posts that receive only after computing
// micro-batch 1, which reaches it through rank 1 from that very send. The
// pairs agree on their orders; the cycle is named at its cells. (With the
// WAIT_SEND at the end of rank 0's row the file runs.)
// RUN: not flexpipe-compile %S/Inputs/torch-comms-wait-send-cycle.csv 2>&1 | FileCheck %s --check-prefix=WAITCYCLE
// WAITCYCLE: torch-comms-wait-send-cycle.csv:1:40: error: the programs deadlock: actors 0 2 1 wait for each other in a cycle
// WAITCYCLE: torch-comms-wait-send-cycle.csv:1:40: note: actor 0 waits here for actor 2
// WAITCYCLE: torch-comms-wait-send-cycle.csv:3:23: note: actor 2 waits here for actor 1
// WAITCYCLE: torch-comms-wait-send-cycle.csv:2:23: note: actor 1 waits here for actor 0
// RUN: sed '1s/3WAIT_SEND_B0,//; 1s/$/,3WAIT_SEND_B0/' %S/Inputs/torch-comms-wait-send-cycle.csv > %t.wait-late.csv
// RUN: flexpipe-compile %t.wait-late.csv --emit=text | FileCheck %s --check-prefix=WAITLATE
// WAITLATE: 3 actors, 4 stages, 2 micro-batches
// RUN: printf '0F0,0B0\n1F0,5B0\n' > %t.typo.csv
// RUN: not flexpipe-compile %t.typo.csv 2>&1 | FileCheck %s --check-prefix=TYPO
// TYPO: typo.csv:2:5: error: stage 2 has no computation in the file, which computes stages up to 5 (here: 5B0)

// An upper-case extension is a CSV too; a byte order mark is named.
// RUN: cp %S/Inputs/torch-compute-only.csv %t.upper.CSV && flexpipe-compile %t.upper.CSV --emit=text | FileCheck %s --check-prefix=UPPER
// UPPER: 2 actors, 2 stages, 2 micro-batches
// RUN: printf '\357\273\2770F0,0B0\n' > %t.bom.csv
// RUN: not flexpipe-compile %t.bom.csv 2>&1 | FileCheck %s --check-prefix=BOM
// BOM: bom.csv:1:1: error: the file starts with a byte order mark (U+FEFF), which PyTorch's CSV reader keeps in the first cell; save the file without it

// Reader errors are diagnostics at the cell (or line) with the line shown.
// RUN: printf '0F0,0B0\n\n1F0,1B0\n' > %t.blank.csv
// RUN: not flexpipe-compile %t.blank.csv 2>&1 | FileCheck %s --check-prefix=BLANK
// BLANK: blank.csv:2:1: error: rank 1 has no action (a blank line); row r is rank r
// RUN: not flexpipe-compile %S/Inputs/torch-bad-cell.csv 2>&1 | FileCheck %s --check-prefix=CELL
// CELL: torch-bad-cell.csv:1:9: error: '0X1' is not a PyTorch action
// A binary file's bytes are escaped in the message, and its line is not
// echoed (it held a NUL and bytes 0x01, 0xff, 0xfe for the terminal):
// RUN: printf '\000\001\377\376\n' > %t.binary.csv
// RUN: not flexpipe-compile %t.binary.csv 2>&1 | FileCheck %s --check-prefix=BINARY --implicit-check-not=^
// BINARY: binary.csv:1:1: error: '\00\01\FF\FE' is not a PyTorch action
// UTF-8 text is shown as it is, and its line echoed:
// RUN: printf 'caf\303\251\n' > %t.utf8.csv
// RUN: not flexpipe-compile %t.utf8.csv 2>&1 | FileCheck %s --check-prefix=UTF8
// UTF8: utf8.csv:1:1: error: 'café' is not a PyTorch action
// UTF8-NEXT: café
// RUN: not flexpipe-compile %S/Inputs/torch-compute-only.csv --actors 4 --emit=text 2>&1 | FileCheck %s --check-prefix=SIZES
// SIZES: error: --actors changes specs; '{{.*}}' holds only schedules, whose sizes, stages and order are fixed
// RUN: not flexpipe-compile %S/Inputs/torch-compute-only.csv --balance cost --emit=text 2>&1 | FileCheck %s --check-prefix=BALANCE
// BALANCE: error: --balance changes specs
// RUN: not flexpipe-compile %S/Inputs/torch-compute-only.csv --model %configs/models/clip-tiny.yaml --cluster %configs/clusters/cpu.yaml --emit=report 2>&1 | FileCheck %s --check-prefix=MODULES
// MODULES: torch-compute-only.csv: error: a schedule without stage_info is read as one chain of stages, but the model file '{{.*}}clip-tiny.yaml' has 2 modules; give it one, or the schedule a stage_info
// RUN: not flexpipe-compile %s --from=torch-csv 2>&1 | FileCheck %s --check-prefix=FROM
// FROM: flexpipe-compile-torch.mlir:1:1: error: '// PyTorch's schedule...' is not a PyTorch action

flexpipe.pipeline @small actors(2) microbatches(2) {
  flexpipe.module @gpt layers(4) placement(one_to_one)
  flexpipe.priority cttp<bwd_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
}
