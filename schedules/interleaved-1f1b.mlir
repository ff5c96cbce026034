// Interleaved 1F1B (Megatron virtual stages): v = 2 chunks placed round-robin,
// a round of micro-batches per chunk at a time (pp when pp divides m, as
// PyTorch and Megatron-LM take them; otherwise m split into the most rounds
// whose last still holds pp), forwards and backwards alternating, warm-up of
// (v - 1) round + 2 (pp - a - 1) forwards on actor a.
flexpipe.pipeline @interleaved_1f1b actors(4) microbatches(8) {
  flexpipe.module @gpt layers(16) placement(circular) chunks(2)
  flexpipe.priority cttp<interleaved> fstp<breadth_first, round> bstp<depth_first, round>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m, round] -> ((s floordiv pp - 1) * round + pp * 2 - a * 2 - 1)>
}
