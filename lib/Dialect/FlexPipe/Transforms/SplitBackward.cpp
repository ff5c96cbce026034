//===- SplitBackward.cpp - -flexpipe-split-backward -----------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Scheduling/GradientSeparation.h"

namespace flexpipe {
#define GEN_PASS_DEF_SPLITBACKWARDPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {
struct SplitBackwardPass
    : flexpipe::impl::SplitBackwardPassBase<SplitBackwardPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(checkTopLevel(getOperation(), getArgument())))
      return signalPassFailure();
    for (ScheduleOp schedule : getOperation().getOps<ScheduleOp>()) {
      if (!shouldOptimize(schedule, "split_backward", requestedOnly) &&
          !shouldOptimize(schedule, "gradient_separation", requestedOnly))
        continue;
      ScheduleProgram read = readSchedule(schedule);
      sched::Program program = read.program;
      if (sched::splitBackward(program) > 0)
        rewriteSchedule(schedule, read, program);
    }
  }
};
} // namespace
