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
    const sched::ChannelRule rule = channels;
    for (ScheduleOp schedule : getOperation().getOps<ScheduleOp>()) {
      ScheduleProgram read = readSchedule(schedule);
      std::optional<sched::VerifyFailure> failure =
          sched::verify(read.program, rule);
      if (!failure)
        continue;
      auto locate = [&](const sched::VerifyFailure::At &at) -> Operation * {
        if (at.actor < 0 || at.actor >= static_cast<int32_t>(read.ops.size()) ||
            at.index < 0 ||
            at.index >= static_cast<int32_t>(read.ops[at.actor].size()))
          return schedule;
        return read.ops[at.actor][at.index];
      };
      Operation *primary =
          failure->at.empty() ? schedule.getOperation() : locate(failure->at[0]);
      InFlightDiagnostic diag = primary->emitError() << failure->message;
      for (const sched::VerifyFailure::At &at : failure->at) {
        if (at.note.empty())
          continue;
        diag.attachNote(locate(at)->getLoc()) << at.note;
      }
      signalPassFailure();
    }
  }
};
} // namespace
