flexpipe.pipeline @deep8 actors(2) microbatches(4) {
  flexpipe.module @gpt layers(8) placement(circular) chunks(4)
  flexpipe.priority cttp<interleaved> fstp<breadth_first, round> bstp<depth_first, round>
}
