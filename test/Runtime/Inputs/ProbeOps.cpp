//===- ProbeOps.cpp - Runtime operations that report what they see --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// For test/Runtime/exec-ops.mlir: @probe and @probe.grouped append one line
// per instance to FILE.rankR (FILE from attrs {file = ...}): where it runs,
// its attributes through each typed accessor, and for every micro-batch it
// covers the output's shape and sum of squares ('-' when it sees none).
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/UserOps.h"

#include <cstdio>
#include <string>

using flexpipe::rt::OpAttribute;
using flexpipe::rt::OpContext;

static void probe(OpContext &ctx) {
  std::string line =
      "it " + std::to_string(ctx.getIteration()) + " " + ctx.getName() +
      " stage " + std::to_string(ctx.getStage()) + " mb " +
      std::to_string(ctx.getMicrobatch()) + " count " +
      std::to_string(ctx.getNumMicrobatches()) + " rank " +
      std::to_string(ctx.getRank()) + "/" + std::to_string(ctx.getNumRanks()) +
      " actor " + std::to_string(ctx.getActor()) + " replica " +
      std::to_string(ctx.getReplica()) + " attrs";
  for (const auto &[key, attribute] : ctx.getAttributes()) {
    line += " " + key + "=";
    switch (attribute.kind) {
    case OpAttribute::Kind::String:
      line += "'" + ctx.getString(key) + "'";
      break;
    case OpAttribute::Kind::Integer:
      line += std::to_string(ctx.getInt(key)) + "/" +
              std::to_string(ctx.getFloat(key));
      break;
    case OpAttribute::Kind::Float:
      line += std::to_string(ctx.getFloat(key));
      break;
    case OpAttribute::Kind::Bool:
    case OpAttribute::Kind::Unit:
      line += ctx.getBool(key) ? "true" : "false";
      break;
    }
  }
  line += " missing=" + ctx.getString("missing", "fallback");
  line += " outputs";
  for (int64_t mb = ctx.getMicrobatch();
       mb < ctx.getMicrobatch() + ctx.getNumMicrobatches(); ++mb) {
    const flexpipe::rt::TensorView output = ctx.getOutput(mb);
    line += " " + std::to_string(mb) + ":";
    if (output.empty()) {
      line += "-";
      continue;
    }
    for (size_t i = 0; i < output.shape.size(); ++i)
      line += (i ? "x" : "") + std::to_string(output.shape[i]);
    double squares = 0;
    for (float x : output)
      squares += static_cast<double>(x) * x;
    char sum[32];
    std::snprintf(sum, sizeof(sum), ":%.9g", squares);
    line += sum;
  }
  const std::string path =
      ctx.getString("file") + ".rank" + std::to_string(ctx.getRank());
  FILE *file = std::fopen(path.c_str(), "a");
  if (!file)
    ctx.fail("cannot append to '" + path + "'");
  std::fprintf(file, "%s\n", line.c_str());
  std::fclose(file);
}

FLEXPIPE_OPERATION(probe)(OpContext &ctx) { probe(ctx); }
FLEXPIPE_NAMED_OPERATION(probe_grouped, "probe.grouped")(OpContext &ctx) {
  probe(ctx);
}
