// V-shape (Hanayo wave with one wave): chunk 0 runs down the actors, chunk 1
// back up, so the last forward and the first backward sit on actor 0.
flexpipe.pipeline @vshape actors(4) microbatches(8) {
  flexpipe.module @gpt layers(16) placement(vshape) chunks(2)
  flexpipe.priority cttp<bwd_first> fstp<depth_first> bstp<depth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (s)>
}
