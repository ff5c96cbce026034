// GPipe: one stage per actor, all forwards before any backward.
flexpipe.pipeline @gpipe actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<fwd_first> fstp<breadth_first> bstp<breadth_first>
}
