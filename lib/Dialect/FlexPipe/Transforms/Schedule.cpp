//===- Schedule.cpp - -flexpipe-schedule ----------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Loads each pipeline into the scheduling library, runs CSSR + Algorithm 1
// (lib/Scheduling/Scheduler.cpp) and writes the per-actor programs back as a
// flexpipe.schedule.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Scheduling/CostModelYAML.h"

#include "llvm/ADT/StringMap.h"

#define DEBUG_TYPE "flexpipe-schedule"

namespace flexpipe {
#define GEN_PASS_DEF_SCHEDULEPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {

/// Writes the computations of `result` as a flexpipe.schedule in place of
/// `pipeline`.
void writeSchedule(PipelineOp pipeline, const sched::BuiltProblem &built,
                   const sched::ScheduleResult &result) {
  OpBuilder b(pipeline);
  Location loc = pipeline.getLoc();
  const sched::Problem &problem = built.problem;

  sched::Program program = sched::toProgram(
      problem, result, built.numStages, built.stageEdges, built.sharedStages);
  // What each stage holds, for the cost model and the runtime: modules,
  // then registered stages (named by themselves).
  program.stageMeta = built.stageMeta;
  program.moduleNames = built.moduleNames;
  ScheduleOp schedule =
      createSchedule(b, loc, pipeline.getSymNameAttr(), program);
  for (auto optimize : pipeline.getBody().getOps<OptimizeOp>())
    schedule->setAttr("flexpipe.optimize", optimize->getAttrDictionary());
  // The runtime operation of a registered computation gets the
  // instruction's attributes and location (for diagnostics about it).
  llvm::StringMap<InstructionOp> instructions;
  for (auto inst : pipeline.getBody().getOps<InstructionOp>())
    instructions[inst.getSymName()] = inst;
  schedule.walk([&](ExecOp exec) {
    if (InstructionOp inst = instructions.lookup(exec.getInstruction())) {
      exec->setLoc(inst.getLoc());
      if (DictionaryAttr attrs = inst.getRuntimeAttrsAttr())
        exec.setAttrsAttr(attrs);
    }
  });
  pipeline.erase();
}

struct SchedulePass : flexpipe::impl::SchedulePassBase<SchedulePass> {
  using Base::Base;
  SchedulePass(const SchedulePassOptions &options,
               std::shared_ptr<const sched::CostInputs> inputs)
      : Base(options), shared(std::move(inputs)) {}

  void runOnOperation() override {
    if (dp < 1) {
      getOperation().emitError()
          << "-" << getArgument() << " needs dp >= 1, not " << dp;
      return signalPassFailure();
    }
    FailureOr<std::shared_ptr<const sched::CostInputs>> inputs = passCostInputs(
        getOperation(), getArgument(), shared, modelFile, clusterFile, "");
    if (failed(inputs))
      return signalPassFailure();
    const bool priced = (*inputs)->hasModel();
    sched::ClusterConfig cluster;
    if (priced)
      cluster = *(*inputs)->cluster;

    for (PipelineOp pipeline :
         llvm::make_early_inc_range(getOperation().getOps<PipelineOp>())) {
      FailureOr<sched::PipelineSpec> spec = readPipelineSpec(pipeline);
      if (failed(spec))
        return signalPassFailure();
      if (priced) {
        spec->model = &*(*inputs)->model;
        spec->cluster = &cluster;
      }
      llvm::Expected<sched::BuiltProblem> built = sched::buildProblem(*spec);
      if (!built) {
        pipeline.emitOpError() << llvm::toString(built.takeError());
        return signalPassFailure();
      }
      built->problem.stepRule = stepRule;
      sched::ScheduleJudge judge;
      std::vector<int64_t> devices;
      if (priced) {
        cluster.jobDevices = built->problem.numActors * dp;
        devices = sched::replicaDevices(built->problem.numActors, dp);
        // Each order judged as the rest of the pipeline will run it.
        DictionaryAttr requested;
        for (auto optimize : pipeline.getBody().getOps<OptimizeOp>())
          requested = optimize->getAttrDictionary();
        sched::BubbleOptimizations bubbles = requestedOptimizations(
            requested, getContext().isMultithreadingEnabled()
                           ? &getContext().getThreadPool()
                           : nullptr);
        judge = sched::sharedCoresJudge(
            *built, *(*inputs)->model, cluster, /*profile=*/nullptr, devices,
            [bubbles](sched::Program &program, const sched::SimCosts &costs) {
              return sched::finishProgram(program, costs, bubbles);
            });
      }
      sched::ScheduleResult result =
          sched::schedule(built->problem, timeModel, judge);
      if (!result.ok) {
        InFlightDiagnostic diag = pipeline.emitOpError()
                                  << "cannot be scheduled: " << result.error;
        for (const std::string &wait : result.waits)
          diag.attachNote(pipeline.getLoc()) << wait;
        return signalPassFailure();
      }
      writeSchedule(pipeline, *built, result);
    }
  }

  /// Cost files read once by the pipeline's creator; null: the options'.
  std::shared_ptr<const sched::CostInputs> shared;
};
} // namespace

std::unique_ptr<Pass>
flexpipe::createSchedulePass(const SchedulePassOptions &options,
                             std::shared_ptr<const sched::CostInputs> inputs) {
  return std::make_unique<SchedulePass>(options, std::move(inputs));
}
