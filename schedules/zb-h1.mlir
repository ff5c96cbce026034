// ZB-H1 (zero-bubble, Qi et al.): 1F1B whose backward is split into input
// and weight gradients; the weight gradients fill the bubbles, never holding
// more activations than 1F1B's peak.
flexpipe.pipeline @zb_h1 actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  flexpipe.optimize gradient_separation
}
