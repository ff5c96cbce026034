// RUN: flexpipe-opt %s -flexpipe-async-comm=lookahead=4 -flexpipe-verify-schedule | FileCheck %s

// Tests a program that mixes asynchronous and blocking receives (as a
// PyTorch CSV import or a hand-written schedule does): the blocking receive
// of micro-batch 1 is posted early, but not before the receive of
// micro-batch 0 from the same peer, which was posted already; the channel
// keeps its order. (It was posted first, and the verifier refused the
// result: recv_grad mb 1 would receive the message of send_grad mb 0.)
flexpipe.schedule @mixed actors(2) stages(2) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.send_act stage 0 mb 0 to 1
    flexpipe.fwd stage 0 mb 1
    flexpipe.send_act stage 0 mb 1 to 1
    %0 = flexpipe.recv_grad stage 0 mb 0 from 1 : !flexpipe.token
    flexpipe.recv_grad stage 0 mb 1 from 1
    flexpipe.wait %0
    flexpipe.bwd stage 0 mb 0
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

// CHECK-LABEL: flexpipe.actor 0
// CHECK:         flexpipe.send_act stage 0 mb 1 to 1
// CHECK-NEXT:    %[[MB0:.*]] = flexpipe.recv_grad stage 0 mb 0 from 1 : !flexpipe.token
// CHECK-NEXT:    %[[MB1:.*]] = flexpipe.recv_grad stage 0 mb 1 from 1 : !flexpipe.token
// CHECK-NEXT:    flexpipe.wait %[[MB1]]
// CHECK-NEXT:    flexpipe.wait %[[MB0]]
// CHECK-NEXT:    flexpipe.bwd stage 0 mb 0
// CHECK-LABEL: flexpipe.actor 1
// CHECK-NEXT:    %[[ACT0:.*]] = flexpipe.recv_act stage 1 mb 0 from 0 : !flexpipe.token
// CHECK-NEXT:    flexpipe.wait %[[ACT0]]
