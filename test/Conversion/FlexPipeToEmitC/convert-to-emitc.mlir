// The lowering of schedules to EmitC (-flexpipe-convert-to-emitc): one
// module per actor with its actor id and the schedule description as
// attributes, a flexpipe_program function of runtime calls in program order
// (flexpipe.X calls flexpipe_rt_X with the rank state, stage and
// micro-batch, and the peer for transfers; an op that returns a token calls
// flexpipe_rt_X_async and its wait takes the handle), and a main that hands
// the program and the description to flexpipe_rt_main.

// RUN: flexpipe-opt --flexpipe-convert-to-emitc %s | FileCheck %s
// RUN: flexpipe-opt --flexpipe-convert-to-emitc=dp=3 %s | FileCheck %s --check-prefix=DP
// A negative seed was written as its 64-bit wrap (18446744073709551615).
// RUN: not flexpipe-opt --flexpipe-convert-to-emitc=seed=-1 %s 2>&1 | FileCheck %s --check-prefix=SEED
// SEED: error: -flexpipe-convert-to-emitc needs seed >= 0, not -1

// CHECK-NOT:   flexpipe.schedule
// CHECK-LABEL: module @tiny_rank0 attributes {flexpipe.actor = 0 : i64, flexpipe.description = "flexpipe-schedule 1\0Ahash {{[0-9]+}}\0Acheck {{[0-9]+}}\0Aname tiny\0Aactors 2\0Astages 2\0Amicrobatches 1\0Adp 1\0A
// CHECK-SAME:    stage 0 actor 0 blocks 0 1 first_last 1 0\0Astage 1 actor 1 blocks 1 1 first_last 0 1\0Aedge 0 1\0A"}
// CHECK:         emitc.include "flexpipe/Runtime/Runtime.h"
// CHECK:         emitc.func @flexpipe_program(%[[RT:.*]]: !emitc.ptr<!emitc.opaque<"flexpipe_rt">>) {
// CHECK-NEXT:      call_opaque "flexpipe_rt_fwd"(%[[RT]]) {args = [0 : index, 0, 0]}
// CHECK-NEXT:      %[[SEND:.*]] = call_opaque "flexpipe_rt_send_act_async"(%[[RT]]) {args = [0 : index, 0, 0, 1]} : {{.*}} -> i64
// CHECK-NEXT:      %[[RECV:.*]] = call_opaque "flexpipe_rt_recv_grad_async"(%[[RT]]) {args = [0 : index, 0, 0, 1]} : {{.*}} -> i64
// CHECK-NEXT:      call_opaque "flexpipe_rt_wait"(%[[RT]], %[[SEND]])
// CHECK-NEXT:      call_opaque "flexpipe_rt_wait"(%[[RT]], %[[RECV]])
// CHECK-NEXT:      call_opaque "flexpipe_rt_igrad"(%[[RT]]) {args = [0 : index, 0, 0]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_wgrad"(%[[RT]]) {args = [0 : index, 0, 0]}
// CHECK-NEXT:      return
// CHECK:         emitc.func @main(%[[ARGC:.*]]: i32, %[[ARGV:.*]]: !emitc.ptr<!emitc.ptr<!emitc.opaque<"char">>>) -> i32 {
// CHECK-NEXT:      %[[CODE:.*]] = call_opaque "flexpipe_rt_main"(%[[ARGC]], %[[ARGV]]) {args = [0 : index, 1 : index, #emitc.opaque<"\22flexpipe-schedule 1\\nprogram 0\\nhash {{.*}}\22">, #emitc.opaque<"flexpipe_program">]}
// CHECK-NEXT:      return %[[CODE]] : i32
// CHECK-LABEL: module @tiny_rank1 attributes {flexpipe.actor = 1 : i64
// CHECK:           call_opaque "flexpipe_rt_recv_act"(%[[RT:.*]]) {args = [0 : index, 1, 0, 0]} : {{.*}} -> ()
// CHECK-NEXT:      call_opaque "flexpipe_rt_fwd"(%[[RT]]) {args = [0 : index, 1, 0]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_bwd"(%[[RT]]) {args = [0 : index, 1, 0]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_send_grad"(%[[RT]]) {args = [0 : index, 1, 0, 0]} : {{.*}} -> ()
// CHECK-NEXT:      return

// A send and the receive from the same peer, posted one after the other
// on both sides (1F1B's steady state), go between flexpipe_rt_group_start
// and _end (one NCCL group on GPUs); a blocking receive may come second. The
// warm-up's send and the last receive stay alone.
// CHECK-LABEL: module @pairs_rank0
// CHECK:           call_opaque "flexpipe_rt_send_act"(%[[RT:.*]]) {args = [0 : index, 0, 0, 1]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_fwd"(%[[RT]]) {args = [0 : index, 0, 1]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_group_start"(%[[RT]]) {args = [0 : index]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_send_act"(%[[RT]]) {args = [0 : index, 0, 1, 1]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_recv_grad"(%[[RT]]) {args = [0 : index, 0, 0, 1]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_group_end"(%[[RT]]) {args = [0 : index]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_bwd"(%[[RT]]) {args = [0 : index, 0, 0]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_recv_grad"(%[[RT]]) {args = [0 : index, 0, 1, 1]}
// CHECK-LABEL: module @pairs_rank1
// CHECK:           call_opaque "flexpipe_rt_bwd"(%[[RT:.*]]) {args = [0 : index, 1, 0]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_group_start"(%[[RT]]) {args = [0 : index]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_send_grad"(%[[RT]]) {args = [0 : index, 1, 0, 0]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_recv_act"(%[[RT]]) {args = [0 : index, 1, 1, 0]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_group_end"(%[[RT]]) {args = [0 : index]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_fwd"(%[[RT]]) {args = [0 : index, 1, 1]}
// CHECK-NOT:       group_start
// CHECK:           return

// The data-parallel degree goes into the description; the programs are the
// same.
// DP: flexpipe.description = "{{.*}}\0Adp 3\0A

module {
  flexpipe.schedule @tiny actors(2) stages(2) microbatches(1) stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
    flexpipe.actor 0 {
      flexpipe.fwd stage 0 mb 0
      %s = flexpipe.send_act stage 0 mb 0 to 1 : !flexpipe.token
      %r = flexpipe.recv_grad stage 0 mb 0 from 1 : !flexpipe.token
      flexpipe.wait %s
      flexpipe.wait %r
      flexpipe.igrad stage 0 mb 0
      flexpipe.wgrad stage 0 mb 0
    }
    flexpipe.actor 1 {
      flexpipe.recv_act stage 1 mb 0 from 0
      flexpipe.fwd stage 1 mb 0
      flexpipe.bwd stage 1 mb 0
      flexpipe.send_grad stage 1 mb 0 to 0
    }
  }
  flexpipe.schedule @pairs actors(2) stages(2) microbatches(2) stage_info [#flexpipe.stage_info<"gpt", 1, first>, #flexpipe.stage_info<"gpt", 1, last>] {
    flexpipe.actor 0 {
      flexpipe.fwd stage 0 mb 0
      flexpipe.send_act stage 0 mb 0 to 1
      flexpipe.fwd stage 0 mb 1
      flexpipe.send_act stage 0 mb 1 to 1
      flexpipe.recv_grad stage 0 mb 0 from 1
      flexpipe.bwd stage 0 mb 0
      flexpipe.recv_grad stage 0 mb 1 from 1
      flexpipe.bwd stage 0 mb 1
    }
    flexpipe.actor 1 {
      flexpipe.recv_act stage 1 mb 0 from 0
      flexpipe.fwd stage 1 mb 0
      flexpipe.bwd stage 1 mb 0
      flexpipe.send_grad stage 1 mb 0 to 0
      flexpipe.recv_act stage 1 mb 1 from 0
      flexpipe.fwd stage 1 mb 1
      flexpipe.bwd stage 1 mb 1
      flexpipe.send_grad stage 1 mb 1 to 0
    }
  }
}
