// Interleaved 1F1B (Megatron virtual stages): v = 2 chunks placed round-robin,
// pp micro-batches per chunk at a time, forwards and backwards alternating,
// warm-up of 2(pp - a - 1) + (v - 1)pp forwards on actor a.
flexpipe.pipeline @interleaved_1f1b actors(4) microbatches(8) {
  flexpipe.module @gpt layers(16) placement(circular) chunks(2)
  flexpipe.priority cttp<interleaved> fstp<breadth_first, pp> bstp<depth_first, pp>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (s + pp - a * 2 - 1)>
}
