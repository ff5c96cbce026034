//===- Pipelines.cpp - The spec-to-schedule pipeline ----------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

void flexpipe::buildSpecToSchedulePipeline(
    OpPassManager &pm, const SpecToScheduleOptions &options,
    std::shared_ptr<const sched::CostInputs> inputs) {
  if (!inputs) {
    auto read = std::make_shared<sched::CostInputs>();
    // A file that cannot be read is left to the pass that needs it, which
    // reports the error where it applies.
    if (llvm::Error error = sched::loadCostInputs(
            options.modelFile, options.clusterFile, "", *read))
      llvm::consumeError(std::move(error));
    else
      inputs = std::move(read);
  }
  PartitionPassOptions partition;
  partition.balance = options.balance;
  partition.modelFile = options.modelFile;
  pm.addPass(createPartitionPass(partition, inputs));
  pm.addPass(createPlacePass());
  SchedulePassOptions schedule;
  schedule.timeModel = options.timeModel;
  schedule.stepRule = options.stepRule;
  schedule.modelFile = options.modelFile;
  schedule.clusterFile = options.clusterFile;
  schedule.dp = options.dp;
  // The bubble optimizations the specs ask for with flexpipe.optimize, and
  // communication, on the scheduled program before it is written.
  schedule.finish = true;
  pm.addPass(createSchedulePass(schedule, inputs));
  // Schedules handed in as IR (compute-only ones get communication).
  pm.addPass(createInsertCommPass());
  VerifySchedulePassOptions verify;
  verify.channels = options.channels;
  pm.addPass(createVerifySchedulePass(verify));
}

void flexpipe::registerFlexPipePassesAndPipelines() {
  registerFlexPipePasses();
  PassPipelineRegistration<SpecToScheduleOptions>(
      "flexpipe-spec-to-schedule",
      "Turn flexpipe.pipeline specs into verified flexpipe.schedule programs "
      "(partition, place, schedule with finish: the bubble optimizations "
      "each spec asks for with flexpipe.optimize and communication; "
      "insert-comm for compute-only schedules handed in as IR; "
      "verify-schedule)",
      [](OpPassManager &pm, const SpecToScheduleOptions &options) {
        buildSpecToSchedulePipeline(pm, options);
      });
}
