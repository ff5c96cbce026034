// ZB-V: a V-shape (chunk 0 down the actors, chunk 1 back up) that starts
// forwards as soon as they arrive, deepest chunk first, and takes backwards
// breadth-first; each actor keeps up to one micro-batch per stage in flight
// (2 pp stage activations, half a stage's worth each: pp units, as 1F1B).
// Gradient separation then moves weight gradients into the bubbles.
flexpipe.pipeline @zb_v actors(4) microbatches(8) {
  flexpipe.module @gpt layers(16) placement(vshape) chunks(2)
  flexpipe.priority cttp<fwd_first> fstp<depth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (s)>
  flexpipe.optimize gradient_separation
}
