//===- InsertComm.cpp - -flexpipe-insert-comm -----------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"

namespace flexpipe {
#define GEN_PASS_DEF_INSERTCOMMPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {
struct InsertCommPass : flexpipe::impl::InsertCommPassBase<InsertCommPass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(checkTopLevel(getOperation(), getArgument())))
      return signalPassFailure();
    for (ScheduleOp schedule : getOperation().getOps<ScheduleOp>()) {
      // Schedules that have transfers (those -flexpipe-schedule{finish}
      // wrote, complete hand-written ones) are left as they are, unread.
      if (schedule
              .walk([](Operation *op) {
                return isa<SendActOp, RecvActOp, SendGradOp, RecvGradOp>(op)
                           ? WalkResult::interrupt()
                           : WalkResult::advance();
              })
              .wasInterrupted())
        continue;
      ScheduleProgram read = readSchedule(schedule);
      // What no transfers can serve (two stages whose messages to a third
      // would share a name) is reported at the computations, before any
      // transfer is made.
      if (failed(verifyRead(schedule, read, sched::ChannelRule::PerStage,
                            /*replay=*/false)))
        return signalPassFailure();
      // A copy: rewriteSchedule compares the result with what was read.
      sched::Program program = read.program;
      sched::insertCommunication(program);
      rewriteSchedule(schedule, read, program);
      // Computation orders that no transfers can serve (one actor computes
      // micro-batch 1 first, its peer sends 0 first) are reported here, at
      // the transfer where the replay stops, not left to a later pass.
      if (failed(verifyRead(schedule, readSchedule(schedule),
                            sched::ChannelRule::PerStage)))
        signalPassFailure();
    }
  }
};
} // namespace
