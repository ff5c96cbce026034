// Loop rolling (sched::rollLoops): calls that repeat with arguments on a
// line become an emitc.for over the trips. 1F1B on 3 actors with 9
// micro-batches (pp not a power of two, m odd): actor 0's steady state is
// one loop of 7 trips, forward micro-batch j + 2 and backward j; the
// cool-down's 2 trips stay straight.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 3 --microbatches 9 --emit=schedule | flexpipe-opt --flexpipe-convert-to-emitc | FileCheck %s
// CHECK-LABEL: module @one_f_one_b_rank0
// CHECK:           call_opaque "flexpipe_rt_send_act"(%[[RT:.*]]) {args = [0 : index, 0, 1, 1]}
// CHECK-NEXT:      %[[INC:.*]] = "emitc.constant"() <{value = 1 : i64}>
// CHECK-NEXT:      %[[TRIPS:.*]] = "emitc.constant"() <{value = 7 : i64}>
// CHECK-NEXT:      %[[ZERO:.*]] = "emitc.constant"() <{value = 0 : i64}>
// CHECK-NEXT:      for %[[J:.*]] = %[[ZERO]] to %[[TRIPS]] step %[[INC]] : i64 {
// CHECK-NEXT:        %[[TWO:.*]] = "emitc.constant"() <{value = 2 : i64}>
// CHECK-NEXT:        %[[MB:.*]] = add %[[J]], %[[TWO]]
// CHECK-NEXT:        call_opaque "flexpipe_rt_fwd"(%[[RT]], %[[MB]]) {args = [0 : index, 0, 1 : index]}
// CHECK-NEXT:        call_opaque "flexpipe_rt_group_start"(%[[RT]]) {args = [0 : index]}
// CHECK-NEXT:        call_opaque "flexpipe_rt_send_act"(%[[RT]], %[[MB]]) {args = [0 : index, 0, 1 : index, 1]}
// CHECK-NEXT:        call_opaque "flexpipe_rt_recv_grad"(%[[RT]], %[[J]]) {args = [0 : index, 0, 1 : index, 1]}
// CHECK-NEXT:        call_opaque "flexpipe_rt_group_end"(%[[RT]]) {args = [0 : index]}
// CHECK-NEXT:        call_opaque "flexpipe_rt_bwd"(%[[RT]], %[[J]]) {args = [0 : index, 0, 1 : index]}
// CHECK-NEXT:      }
// CHECK-NEXT:      call_opaque "flexpipe_rt_recv_grad"(%[[RT]]) {args = [0 : index, 0, 7, 1]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_bwd"(%[[RT]]) {args = [0 : index, 0, 7]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_recv_grad"(%[[RT]]) {args = [0 : index, 0, 8, 1]}
// CHECK-NEXT:      call_opaque "flexpipe_rt_bwd"(%[[RT]]) {args = [0 : index, 0, 8]}
// CHECK-NEXT:      return

// Asynchronous receives posted and waited within a trip roll with their
// tokens.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 3 --microbatches 9 --emit=schedule | flexpipe-opt -flexpipe-async-comm --flexpipe-convert-to-emitc | FileCheck %s --check-prefix=ASYNC
// ASYNC-LABEL: module @one_f_one_b_rank1
// ASYNC:         for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} : i64 {
// ASYNC-NEXT:      %[[GRAD:.*]] = call_opaque "flexpipe_rt_recv_grad_async"(%[[RT:.*]], %[[J]]) {args = [0 : index, 1, 1 : index, 2]}
// ASYNC:           call_opaque "flexpipe_rt_wait"(%[[RT]], %[[GRAD]])
// ASYNC:           %[[ACT:.*]] = call_opaque "flexpipe_rt_recv_act_async"
// ASYNC:           call_opaque "flexpipe_rt_wait"(%[[RT]], %[[ACT]])
// ASYNC-NEXT:    }

// A receive waited a trip after its post keeps the calls straight.
// RUN: flexpipe-compile %schedules/1f1b.mlir --actors 3 --microbatches 9 --emit=schedule | flexpipe-opt -flexpipe-async-comm=lookahead=3 --flexpipe-convert-to-emitc | FileCheck %s --check-prefix=CARRIED
// CARRIED-NOT: for
// CARRIED:     flexpipe_rt_wait
// CARRIED-NOT: for

// A step other than 1: interleaved 1F1B takes micro-batches 3 j + 4 and
// 3 j in a trip.
// RUN: flexpipe-compile %schedules/interleaved-1f1b.mlir --actors 3 --microbatches 30 --emit=schedule | flexpipe-opt --flexpipe-convert-to-emitc | FileCheck %s --check-prefix=STEP
// STEP-LABEL: module @interleaved_1f1b_rank0
// STEP:           %[[BASE:.*]] = mul %[[J:arg[0-9]+]], %{{.*}}
// STEP-NEXT:      %[[FOUR:.*]] = "emitc.constant"() <{value = 4 : i64}>
// STEP-NEXT:      %[[MB:.*]] = add %[[BASE]], %[[FOUR]]
// STEP-NEXT:      call_opaque "flexpipe_rt_fwd"(%[[RT:.*]], %[[MB]]) {args = [0 : index, 0, 1 : index]}
// STEP:           call_opaque "flexpipe_rt_bwd"(%[[RT]], %[[BASE]]) {args = [0 : index, 3, 1 : index]}

// The C++ the rank programs become: a counted loop.
// RUN: rm -rf %t.ranks && flexpipe-compile %schedules/1f1b.mlir --actors 3 --microbatches 9 --emit=cpp -o %t.ranks
// RUN: FileCheck %s --check-prefix=CPP < %t.ranks/rank0.cpp
// CPP:      for (int64_t [[J:i[0-9]+]] = v{{[0-9]+}}; [[J]] < v{{[0-9]+}}; [[J]] += v{{[0-9]+}}) {
// CPP:        flexpipe_rt_bwd(v1, 0, [[J]]);
// CPP-NEXT: }
