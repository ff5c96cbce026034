//===- GradientSeparation.cpp - -flexpipe-gradient-separation -------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A thin wrapper: read the schedule, call sched::separateGradients, write the
// new order back and record the outcome.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Scheduling/GradientSeparation.h"

#include "mlir/IR/Builders.h"

namespace flexpipe {
#define GEN_PASS_DEF_GRADIENTSEPARATIONPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

#include <cmath>
#include <sstream>

using namespace mlir;
using namespace flexpipe;

namespace {
struct GradientSeparationPass
    : flexpipe::impl::GradientSeparationPassBase<GradientSeparationPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(checkTopLevel(getOperation(), getArgument())))
      return signalPassFailure();
    if (maxRounds < 0) {
      optionError(&getContext())
          << "-" << getArgument() << " needs max-rounds >= 0, not "
          << static_cast<int64_t>(maxRounds);
      return signalPassFailure();
    }
    if (!(memoryBound >= 0) || !std::isfinite(memoryBound)) {
      std::ostringstream given;
      given << memoryBound.getValue();
      optionError(&getContext()) << "-" << getArgument()
                                 << " needs a finite memory-bound >= 0 (0: the "
                                 << "schedule's own peak), not " << given.str();
      return signalPassFailure();
    }
    std::shared_ptr<const sched::CostInputs> inputs;
    for (ScheduleOp schedule : getOperation().getOps<ScheduleOp>()) {
      if (!shouldOptimize(schedule, "gradient_separation", requestedOnly))
        continue;
      if (!inputs) {
        FailureOr<std::shared_ptr<const sched::CostInputs>> read =
            passCostInputs(&getContext(), getArgument(), nullptr, modelFile,
                           clusterFile, "");
        if (failed(read))
          return signalPassFailure();
        inputs = *read;
      }
      ScheduleProgram read = readSchedule(schedule);
      if (failed(verifyRead(schedule, read, sched::ChannelRule::PerStage,
                            /*replay=*/false)))
        return signalPassFailure();
      if (std::optional<sched::VerifyFailure> failure =
              sched::checkSeparable(read.program)) {
        (void)reportFailure(schedule, read, *failure);
        return signalPassFailure();
      }
      // ... and it runs: replayed as it would be lowered (the communication
      // inserted; checkSeparable refused a program that has some). A wgrad
      // before its igrad was reordered unseen, a collective a member never
      // joins passed.
      sched::Program replayed = read.program;
      sched::insertCommunication(replayed);
      if (std::optional<sched::VerifyFailure> failure =
              sched::verify(replayed, sched::ChannelRule::PerStage)) {
        // At the ops that were read: a transfer made for the replay at the
        // computation it serves.
        for (sched::VerifyFailure::At &at : failure->at)
          if (at.actor >= 0 && at.actor < replayed.numActors && at.index >= 0 &&
              at.index < static_cast<int32_t>(replayed.actors[at.actor].size()))
            at.index = replayed.actors[at.actor][at.index].source;
        failure->message = "-flexpipe-gradient-separation needs a schedule "
                           "that runs: " +
                           failure->message;
        (void)reportFailure(schedule, read, *failure);
        return signalPassFailure();
      }
      sched::Program program = read.program;
      sched::splitBackward(program);
      FailureOr<sched::SimCosts> costs = resolveCosts(
          schedule, getArgument(), program, *inputs, dp, timeModel);
      if (failed(costs))
        return signalPassFailure();
      sched::SeparationOptions options;
      options.memoryBound = memoryBound;
      options.maxRounds = maxRounds;
      // Attempts on the context's threads (the result does not depend on
      // it; --mlir-disable-threading keeps them on this one).
      if (getContext().isMultithreadingEnabled())
        options.pool = &getContext().getThreadPool();
      applySeparationRequest(
          schedule->getAttrOfType<DictionaryAttr>("flexpipe.optimize"),
          options);
      llvm::Expected<sched::SeparationResult> result =
          sched::separateGradients(program, *costs, options);
      if (!result) {
        schedule.emitError() << "gradient separation failed: "
                             << llvm::toString(result.takeError());
        return signalPassFailure();
      }
      rewriteSchedule(schedule, read, result->program);
      setSeparationFigures(schedule, *result, costs->unit);
    }
  }
};
} // namespace
