// Looped BFS (breadth-first pipeline): v = 2 chunks round-robin, every
// micro-batch through a chunk before the next chunk, forwards first.
flexpipe.pipeline @looped_bfs actors(4) microbatches(8) {
  flexpipe.module @gpt layers(16) placement(circular) chunks(2)
  flexpipe.priority cttp<fwd_first> fstp<breadth_first> bstp<depth_first>
}
