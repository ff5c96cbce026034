//===- ActivationNorms.cpp - A runtime operation: activation norms --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The operation bound to the registered compute instruction @log_norms
// (log-norms.mlir): for every micro-batch the instance covers whose forward
// has run, it appends one line
//
//   iteration I stage S mb M norm X
//
// with X the L2 norm of the stage's output activation to FILE.rankR, FILE
// from the instruction's `attrs {file = "..."}` and R this rank; with
// `every = N` only every N-th iteration. Build it into the ranks with
//
//   flexpipe-compile examples/ops/log-norms.mlir
//       --ops examples/ops/ActivationNorms.cpp --emit=exe -o run
//
// (one command; a comment line may not end in a backslash, -Wcomment).
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/UserOps.h"

#include <cmath>
#include <cstdio>
#include <string>

FLEXPIPE_OPERATION(log_norms)(flexpipe::rt::OpContext &ctx) {
  const int64_t every = ctx.getInt("every", 1);
  if (every < 1)
    ctx.fail("attribute 'every' must be at least 1, got " +
             std::to_string(every));
  if (ctx.getIteration() % every != 0)
    return;
  const std::string path =
      ctx.getString("file") + ".rank" + std::to_string(ctx.getRank());
  FILE *file = std::fopen(path.c_str(), "a");
  if (!file)
    ctx.fail("cannot append to '" + path + "'");
  const int64_t first = ctx.getMicrobatch();
  for (int64_t mb = first; mb < first + ctx.getNumMicrobatches(); ++mb) {
    const flexpipe::rt::TensorView output = ctx.getOutput(mb);
    if (output.empty())
      continue;
    double squares = 0;
    for (float x : output)
      squares += static_cast<double>(x) * x;
    std::fprintf(file, "iteration %lld stage %lld mb %lld norm %.9g\n",
                 static_cast<long long>(ctx.getIteration()),
                 static_cast<long long>(ctx.getStage()),
                 static_cast<long long>(mb), std::sqrt(squares));
  }
  std::fclose(file);
}
