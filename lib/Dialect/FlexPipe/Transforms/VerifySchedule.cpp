//===- VerifySchedule.cpp - -flexpipe-verify-schedule ---------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"

namespace flexpipe {
#define GEN_PASS_DEF_VERIFYSCHEDULEPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {
struct VerifySchedulePass : flexpipe::impl::VerifySchedulePassBase<VerifySchedulePass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(checkTopLevel(getOperation(), getArgument())))
      return signalPassFailure();
    const sched::ChannelRule rule = channels;
    for (ScheduleOp schedule : getOperation().getOps<ScheduleOp>())
      if (failed(verifyRead(schedule, readSchedule(schedule), rule)))
        signalPassFailure();
  }
};
} // namespace
