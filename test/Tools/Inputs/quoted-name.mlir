// A pipeline whose symbol needs quoting: a newline, a tab, quotes and a
// byte outside ASCII (flexpipe-compile.mlir, QUOTED).
flexpipe.pipeline @"two\0Alines\09\22q\22\FF" actors(3) microbatches(3) {
  flexpipe.module @gpt layers(3) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
}
