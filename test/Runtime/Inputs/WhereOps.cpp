//===- WhereOps.cpp - Runtime operations that say where they run ----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// For test/Runtime/rank-layout.mlir: @where.0, @where.1 and @where.2 (one
// per stage) append one line to FILE.rankR (FILE from attrs {file = ...})
// for micro-batch 0 of iteration 0: which rank of how many ran it, and the
// actor and replica that rank runs.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/UserOps.h"

#include <cstdio>
#include <string>

using flexpipe::rt::OpContext;

static void where(OpContext &ctx) {
  if (ctx.getIteration() != 0 || ctx.getMicrobatch() != 0)
    return;
  const std::string path =
      ctx.getString("file") + ".rank" + std::to_string(ctx.getRank());
  FILE *file = std::fopen(path.c_str(), "a");
  if (!file)
    ctx.fail("cannot append to '" + path + "'");
  std::fprintf(file, "rank %d of %d: actor %d replica %d stage %lld\n",
               ctx.getRank(), ctx.getNumRanks(), ctx.getActor(),
               ctx.getReplica(), static_cast<long long>(ctx.getStage()));
  std::fclose(file);
}

FLEXPIPE_NAMED_OPERATION(where0, "where.0")(OpContext &ctx) { where(ctx); }
FLEXPIPE_NAMED_OPERATION(where1, "where.1")(OpContext &ctx) { where(ctx); }
FLEXPIPE_NAMED_OPERATION(where2, "where.2")(OpContext &ctx) { where(ctx); }
