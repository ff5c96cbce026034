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

  // The edges attribute only when the DAG is not the default chain.
  DenseI64ArrayAttr edges;
  bool chain = static_cast<int32_t>(built.stageEdges.size()) ==
               std::max(0, built.numStages - 1);
  for (size_t i = 0; chain && i < built.stageEdges.size(); ++i)
    chain = built.stageEdges[i] ==
            std::pair<int32_t, int32_t>(static_cast<int32_t>(i),
                                        static_cast<int32_t>(i + 1));
  if (!chain) {
    SmallVector<int64_t> flat;
    for (auto [from, to] : built.stageEdges) {
      flat.push_back(from);
      flat.push_back(to);
    }
    edges = b.getDenseI64ArrayAttr(flat);
  }
  DenseI64ArrayAttr shared;
  if (!built.sharedStages.empty())
    shared = b.getDenseI64ArrayAttr(SmallVector<int64_t>(
        built.sharedStages.begin(), built.sharedStages.end()));

  // What each stage holds, for the cost model and the runtime.
  // Modules, then registered stages (named by themselves).
  SmallVector<StringAttr> names;
  for (const std::string &name : built.moduleNames)
    names.push_back(b.getStringAttr(name));
  SmallVector<Attribute> info;
  for (const sched::StageMeta &meta : built.stageMeta)
    info.push_back(StageInfoAttr::get(b.getContext(), names[meta.module],
                                      meta.layers, meta.first, meta.last));

  llvm::StringMap<InstructionOp> instructions;
  for (auto inst : pipeline.getBody().getOps<InstructionOp>())
    instructions[inst.getSymName()] = inst;

  auto schedule = ScheduleOp::create(
      b, loc, pipeline.getSymNameAttr(), b.getI64IntegerAttr(problem.numActors),
      b.getI64IntegerAttr(built.numStages),
      b.getI64IntegerAttr(problem.numMicrobatches), edges, shared,
      b.getArrayAttr(info));
  for (auto optimize : pipeline.getBody().getOps<OptimizeOp>())
    schedule->setAttr("flexpipe.optimize", optimize->getAttrDictionary());
  const sched::Program program = sched::toProgram(
      problem, result, built.numStages, built.stageEdges, built.sharedStages);
  Block &body = schedule.getBody().emplaceBlock();
  for (int32_t a = 0; a < problem.numActors; ++a) {
    b.setInsertionPointToEnd(&body);
    auto actor = ActorOp::create(b, loc, b.getI64IntegerAttr(a));
    b.setInsertionPointToEnd(&actor.getBody().emplaceBlock());
    llvm::DenseMap<int32_t, Value> tokens;
    for (const sched::ProgOp &op : program.actors[a]) {
      Operation *created = createInstruction(b, loc, op, program, &tokens);
      // The runtime operation of a registered computation gets the
      // instruction's attributes and location (for diagnostics about it).
      if (auto exec = dyn_cast_or_null<ExecOp>(created))
        if (InstructionOp inst = instructions.lookup(exec.getInstruction())) {
          exec->setLoc(inst.getLoc());
          if (DictionaryAttr attrs = inst.getRuntimeAttrsAttr())
            exec.setAttrsAttr(attrs);
        }
    }
  }
  pipeline.erase();
}

struct SchedulePass : flexpipe::impl::SchedulePassBase<SchedulePass> {
  using Base::Base;
  void runOnOperation() override {
    sched::TimeModel model;
    if (timeModel == "step")
      model = sched::TimeModel::Step;
    else if (timeModel == "cost")
      model = sched::TimeModel::Cost;
    else {
      getOperation().emitError()
          << "unknown time model '" << timeModel.getValue()
          << "' for -flexpipe-schedule; expected step or cost";
      return signalPassFailure();
    }

    sched::StepRule rule;
    if (stepRule == "next-type")
      rule = sched::StepRule::NextType;
    else if (stepRule == "literal")
      rule = sched::StepRule::Literal;
    else {
      getOperation().emitError()
          << "unknown step rule '" << stepRule.getValue()
          << "' for -flexpipe-schedule; expected next-type or literal";
      return signalPassFailure();
    }

    sched::ModelConfig modelConfig;
    sched::ClusterConfig cluster;
    if (modelFile.empty() != clusterFile.empty()) {
      getOperation().emitError()
          << "-flexpipe-schedule needs both model and cluster files for the "
             "cost model, or neither";
      return signalPassFailure();
    }
    if (!modelFile.empty()) {
      for (const std::string &error :
           {sched::loadModel(modelFile, modelConfig),
            sched::loadCluster(clusterFile, cluster)})
        if (!error.empty()) {
          getOperation().emitError() << error;
          return signalPassFailure();
        }
    }

    for (PipelineOp pipeline :
         llvm::make_early_inc_range(getOperation().getOps<PipelineOp>())) {
      FailureOr<sched::PipelineSpec> spec = readPipelineSpec(pipeline);
      if (failed(spec))
        return signalPassFailure();
      if (!modelFile.empty()) {
        spec->model = &modelConfig;
        spec->cluster = &cluster;
      }
      llvm::Expected<sched::BuiltProblem> built = sched::buildProblem(*spec);
      if (!built) {
        pipeline.emitOpError() << llvm::toString(built.takeError());
        return signalPassFailure();
      }
      built->problem.stepRule = rule;
      sched::ScheduleResult result = sched::schedule(built->problem, model);
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
};
} // namespace
