// 1F1B (PipeDream-Flush / Megatron): one stage per actor, backward first,
// actor a keeps at most pp - a micro-batches in flight.
flexpipe.pipeline @one_f_one_b actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
}
