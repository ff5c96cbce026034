//===- AsyncComm.cpp - -flexpipe-async-comm -------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"

#include "mlir/IR/Builders.h"

namespace flexpipe {
#define GEN_PASS_DEF_ASYNCCOMMPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {
struct AsyncCommPass : flexpipe::impl::AsyncCommPassBase<AsyncCommPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(checkTopLevel(getOperation(), getArgument())))
      return signalPassFailure();
    if (lookahead < 1) {
      optionError(&getContext())
          << "-" << getArgument() << " needs lookahead >= 1, not "
          << static_cast<int64_t>(lookahead);
      return signalPassFailure();
    }
    for (ScheduleOp schedule : getOperation().getOps<ScheduleOp>()) {
      if (!shouldOptimize(schedule, "async_comm", requestedOnly))
        continue;
      ScheduleProgram read = readSchedule(schedule);
      sched::Program program = read.program;
      if (sched::postReceivesEarly(program, lookahead) > 0)
        rewriteSchedule(schedule, read, program);
    }
  }
};
} // namespace
