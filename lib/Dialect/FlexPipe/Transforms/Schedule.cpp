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
#include "flexpipe/Scheduling/Lowering.h"

#include "llvm/ADT/StringMap.h"

namespace flexpipe {
#define GEN_PASS_DEF_SCHEDULEPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {

/// Writes `program`, lowered from `pipeline`, as a flexpipe.schedule in its
/// place.
void writeSchedule(PipelineOp pipeline, const sched::LoweredProgram &lowered,
                   DictionaryAttr requested) {
  // Each instruction is where the statement it comes from is, for
  // diagnostics about it: a registered instruction's (its runtime op or
  // collective) at the flexpipe.instruction, a module's computations and
  // messages at the module; waits and the rest at the pipeline.
  const sched::Program &program = lowered.program;
  llvm::StringMap<InstructionOp> instructions;
  for (auto inst : pipeline.getBody().getOps<InstructionOp>())
    instructions[inst.getSymName()] = inst;
  llvm::StringMap<Location> modules;
  for (auto module : pipeline.getBody().getOps<ModalityOp>())
    modules.try_emplace(module.getSymName(), module.getLoc());
  auto locate = [&](const sched::ProgOp &op) -> Location {
    if (op.inst >= 0 &&
        static_cast<size_t>(op.inst) < program.instructions.size())
      if (InstructionOp inst =
              instructions.lookup(program.instructions[op.inst]))
        return inst.getLoc();
    if (op.kind != sched::OpKind::Wait && op.stage >= 0 &&
        static_cast<size_t>(op.stage) < program.stageMeta.size()) {
      const sched::StageMeta &meta = program.stageMeta[op.stage];
      if (!meta.isRegistered() && meta.module >= 0 &&
          static_cast<size_t>(meta.module) < program.moduleNames.size())
        if (auto it = modules.find(program.moduleNames[meta.module]);
            it != modules.end())
          return it->second;
    }
    return pipeline.getLoc();
  };
  OpBuilder b(pipeline);
  ScheduleOp schedule = createSchedule(
      b, pipeline.getLoc(), pipeline.getSymNameAttr(), program, locate);
  if (requested)
    schedule->setAttr("flexpipe.optimize", requested);
  if (lowered.separation)
    setSeparationFigures(schedule, *lowered.separation, lowered.costs->unit);
  // The runtime operation of a registered computation gets the
  // instruction's attributes.
  schedule.walk([&](ExecOp exec) {
    if (InstructionOp inst = instructions.lookup(exec.getInstruction()))
      if (DictionaryAttr attrs = inst.getRuntimeAttrsAttr())
        exec.setAttrsAttr(attrs);
  });
  pipeline.erase();
}

struct SchedulePass : flexpipe::impl::SchedulePassBase<SchedulePass> {
  using Base::Base;
  SchedulePass(const SchedulePassOptions &options,
               std::shared_ptr<const sched::CostInputs> inputs)
      : Base(options), shared(std::move(inputs)) {}

  void runOnOperation() override {
    if (failed(checkTopLevel(getOperation())))
      return signalPassFailure();
    if (failed(checkReplicas(&getContext(), getArgument(), dp)))
      return signalPassFailure();
    FailureOr<std::shared_ptr<const sched::CostInputs>> inputs = passCostInputs(
        &getContext(), getArgument(), shared, modelFile, clusterFile, "");
    if (failed(inputs))
      return signalPassFailure();
    const bool priced = (*inputs)->hasModel();
    sched::ClusterConfig cluster;
    llvm::ThreadPoolInterface *pool = getContext().isMultithreadingEnabled()
                                          ? &getContext().getThreadPool()
                                          : nullptr;

    for (PipelineOp pipeline :
         llvm::make_early_inc_range(getOperation().getOps<PipelineOp>())) {
      FailureOr<sched::PipelineSpec> spec = readPipelineSpec(pipeline);
      if (failed(spec))
        return signalPassFailure();
      if (priced) {
        // The job's ranks (pp x dp share the nodes' cores), for the
        // scheduler's durations as for the judge's and separation's.
        llvm::Expected<sched::ClusterConfig> job =
            sched::clusterForJob(*(*inputs)->cluster, spec->actors, dp);
        if (!job) {
          pipeline.emitOpError() << llvm::toString(job.takeError());
          return signalPassFailure();
        }
        cluster = std::move(*job);
        spec->model = &*(*inputs)->model;
        spec->cluster = &cluster;
      }
      llvm::Expected<sched::BuiltProblem> built = sched::buildProblem(*spec);
      if (!built) {
        emitSpecError(pipeline, built.takeError());
        return signalPassFailure();
      }
      built->problem.stepRule = stepRule;
      // Each order judged as the rest of the pipeline will run it, and
      // finished that way when asked.
      // (Its five properties, not the op's whole dictionary: an attribute
      // written in the op's attr-dict made the schedule fail verification.)
      DictionaryAttr requested;
      for (auto optimize : pipeline.getBody().getOps<OptimizeOp>()) {
        NamedAttrList request;
        for (auto [name, attr] :
             {std::pair<StringRef, Attribute>{"split_backward",
                                              optimize.getSplitBackwardAttr()},
              {"gradient_separation", optimize.getGradientSeparationAttr()},
              {"async_comm", optimize.getAsyncCommAttr()},
              {"memory_bound", optimize.getMemoryBoundAttr()},
              {"max_rounds", optimize.getMaxRoundsAttr()}})
          if (attr)
            request.append(name, attr);
        requested = request.getDictionary(optimize.getContext());
      }
      sched::LoweringOptions lowering;
      lowering.timeModel = timeModel;
      if (priced) {
        lowering.model = &*(*inputs)->model;
        lowering.cluster = &cluster;
      }
      lowering.profile = (*inputs)->profileOrNull();
      lowering.dp = dp;
      lowering.finish = finish;
      lowering.bubbles = requestedOptimizations(requested, pool);
      sched::LoweredProgram lowered;
      if (llvm::Error error = sched::lowerProblem(*built, lowering, lowered)) {
        emitSpecError(pipeline, std::move(error));
        return signalPassFailure();
      }
      SmallVector<DependencyOp> deps(pipeline.getBody().getOps<DependencyOp>());
      if (!lowered.schedule.ok && lowered.schedule.cycleDependency >= 0) {
        deps[lowered.schedule.cycleDependency].emitOpError()
            << lowered.schedule.error;
        return signalPassFailure();
      }
      if (!lowered.schedule.ok) {
        InFlightDiagnostic diag = pipeline.emitOpError()
                                  << "cannot be scheduled: "
                                  << lowered.schedule.error;
        for (const std::string &wait : lowered.schedule.waits)
          diag.attachNote(pipeline.getLoc()) << wait;
        return signalPassFailure();
      }
      // The spec's dependency op a broken dependency names, else the
      // pipeline.
      auto at = [&](const sched::BrokenDependency &broken) -> Operation * {
        const int32_t index = broken.dependency;
        if (index >= 0 && index < static_cast<int32_t>(deps.size()))
          return deps[index];
        return pipeline;
      };
      if (lowered.broken) {
        Operation *op = at(*lowered.broken);
        op->emitOpError() << (isa<PipelineOp>(op) ? "has a dependency that "
                                                  : "")
                          << lowered.broken->message;
        return signalPassFailure();
      }
      if (lowered.brokenByDefaults)
        at(*lowered.brokenByDefaults)->emitWarning()
            << (isa<PipelineOp>(at(*lowered.brokenByDefaults))
                    ? "has a dependency that "
                    : "this dependency ")
            << lowered.brokenByDefaults->message
            << " (in the program -flexpipe-gradient-separation makes with "
               "its default costs, the step model: give it this pass's "
               "time-model, model, cluster and dp, as "
               "-flexpipe-spec-to-schedule does)";
      if (lowered.loose) {
        SmallVector<InflightOp> limits(pipeline.getBody().getOps<InflightOp>());
        const int32_t index = lowered.loose->inflight;
        if (index >= 0 && index < static_cast<int32_t>(limits.size()))
          limits[index].emitWarning() << lowered.loose->message;
        else
          pipeline.emitWarning()
              << "has a global in-flight limit that " << lowered.loose->message;
      }
      writeSchedule(pipeline, lowered, requested);
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
