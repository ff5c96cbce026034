// 1F1B with a registered computation: after every forward of the last stage,
// each of its actors runs @log_norms, bound at run time to the operation of
// that name in ActivationNorms.cpp, which appends the L2 norm of the stage's
// output (the hidden state entering the LM head) to norms.txt.rankR.
//
//   flexpipe-compile examples/ops/log-norms.mlir \
//       --model configs/models/tiny.yaml --cluster configs/clusters/cpu.yaml \
//       --ops examples/ops/ActivationNorms.cpp --emit=exe -o run
//   run/run-mpi.sh --iterations 10
//   mkdir ref && cd ref && ../run/reference ../run/schedule.txt --iterations 10
//   (the same training and norms in one process, in another directory: it
//   appends to files of the same names)
flexpipe.pipeline @log_norms actors(4) microbatches(8) {
  flexpipe.module @gpt layers(8) placement(one_to_one)
  flexpipe.priority cttp<bwd_first> fstp<breadth_first> bstp<breadth_first>
  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (pp - a)>
  flexpipe.instruction @log_norms kind(compute) on(@gpt[-1]) attrs {file = "norms.txt"}
  flexpipe.dependency fwd @gpt[-1] -> @log_norms @gpt[-1]
}
