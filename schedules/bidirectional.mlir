// Bidirectional (Chimera): a down and an up pipeline over the same actors with
// replicated weights; micro-batches are split between the two directions, and
// each direction's stage i keeps at most pp - i micro-batches in flight.
flexpipe.pipeline @bidirectional actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one) bidirectional
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_stage affine_map<(i)[pp, s, m] -> (pp - i mod pp)>
}
