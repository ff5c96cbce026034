flexpipe.schedule @hand_1f1b actors(2) stages(2) microbatches(2) {
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
