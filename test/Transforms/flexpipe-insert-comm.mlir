// RUN: flexpipe-opt %s -split-input-file -flexpipe-insert-comm | FileCheck %s
// RUN: flexpipe-opt %s -split-input-file -flexpipe-insert-comm -flexpipe-verify-schedule -o /dev/null

// 1F1B on 2 actors: activations forward, gradients backward; each receive
// right before the computation that needs it, each send right after the
// producer.
// CHECK-LABEL: flexpipe.schedule @pair
// CHECK-NEXT:    flexpipe.actor 0 {
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 0
// CHECK-NEXT:      flexpipe.send_act stage 0 mb 0 to 1
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 1
// CHECK-NEXT:      flexpipe.send_act stage 0 mb 1 to 1
// CHECK-NEXT:      flexpipe.recv_grad stage 0 mb 0 from 1
// CHECK-NEXT:      flexpipe.bwd stage 0 mb 0
// CHECK-NEXT:      flexpipe.recv_grad stage 0 mb 1 from 1
// CHECK-NEXT:      flexpipe.bwd stage 0 mb 1
// CHECK-NEXT:    }
// CHECK-NEXT:    flexpipe.actor 1 {
// CHECK-NEXT:      flexpipe.recv_act stage 1 mb 0 from 0
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.send_grad stage 1 mb 0 to 0
// CHECK-NEXT:      flexpipe.recv_act stage 1 mb 1 from 0
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 1
// CHECK-NEXT:      flexpipe.bwd stage 1 mb 1
// CHECK-NEXT:      flexpipe.send_grad stage 1 mb 1 to 0
// CHECK-NEXT:    }
flexpipe.schedule @pair actors(2) stages(2) microbatches(2) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.fwd stage 0 mb 1
    flexpipe.bwd stage 0 mb 0
    flexpipe.bwd stage 0 mb 1
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.fwd stage 1 mb 1
    flexpipe.bwd stage 1 mb 1
  }
}

// -----

// A V: stages 1 and 2 share actor 1, so the edge 1 -> 2 needs nothing.
// CHECK-LABEL: flexpipe.schedule @vshape
// CHECK-NEXT:    flexpipe.actor 0 {
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 0
// CHECK-NEXT:      flexpipe.send_act stage 0 mb 0 to 1
// CHECK-NEXT:      flexpipe.recv_act stage 3 mb 0 from 1
// CHECK-NEXT:      flexpipe.fwd stage 3 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 3 mb 0
// CHECK-NEXT:      flexpipe.send_grad stage 3 mb 0 to 1
// CHECK-NEXT:      flexpipe.recv_grad stage 0 mb 0 from 1
// CHECK-NEXT:      flexpipe.bwd stage 0 mb 0
// CHECK-NEXT:    }
// CHECK-NEXT:    flexpipe.actor 1 {
// CHECK-NEXT:      flexpipe.recv_act stage 1 mb 0 from 0
// CHECK-NEXT:      flexpipe.fwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.fwd stage 2 mb 0
// CHECK-NEXT:      flexpipe.send_act stage 2 mb 0 to 0
// CHECK-NEXT:      flexpipe.recv_grad stage 2 mb 0 from 0
// CHECK-NEXT:      flexpipe.bwd stage 2 mb 0
// CHECK-NEXT:      flexpipe.bwd stage 1 mb 0
// CHECK-NEXT:      flexpipe.send_grad stage 1 mb 0 to 0
// CHECK-NEXT:    }
flexpipe.schedule @vshape actors(2) stages(4) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    flexpipe.fwd stage 3 mb 0
    flexpipe.bwd stage 3 mb 0
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    flexpipe.fwd stage 1 mb 0
    flexpipe.fwd stage 2 mb 0
    flexpipe.bwd stage 2 mb 0
    flexpipe.bwd stage 1 mb 0
  }
}

// -----

// A schedule that already communicates is left alone.
// CHECK-LABEL: flexpipe.schedule @done
// CHECK-NEXT:    flexpipe.actor 0 {
// CHECK-NEXT:      flexpipe.fwd stage 0 mb 0
// CHECK-NEXT:      %[[T:.*]] = flexpipe.send_act stage 0 mb 0 to 1 : !flexpipe.token
// CHECK-NEXT:      flexpipe.wait %[[T]]
flexpipe.schedule @done actors(2) stages(2) microbatches(1) {
  flexpipe.actor 0 {
    flexpipe.fwd stage 0 mb 0
    %t = flexpipe.send_act stage 0 mb 0 to 1 : !flexpipe.token
    flexpipe.wait %t
    flexpipe.recv_grad stage 0 mb 0 from 1
    flexpipe.bwd stage 0 mb 0
  }
  flexpipe.actor 1 {
    %r = flexpipe.recv_act stage 1 mb 0 from 0 : !flexpipe.token
    flexpipe.wait %r
    flexpipe.fwd stage 1 mb 0
    flexpipe.bwd stage 1 mb 0
    flexpipe.send_grad stage 1 mb 0 to 0
  }
}
