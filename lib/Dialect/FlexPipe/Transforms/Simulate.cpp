//===- Simulate.cpp - -flexpipe-simulate ----------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Scheduling/Simulator.h"

#include "mlir/IR/Builders.h"

namespace flexpipe {
#define GEN_PASS_DEF_SIMULATEPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {
struct SimulatePass : flexpipe::impl::SimulatePassBase<SimulatePass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(checkTopLevel(getOperation(), getArgument())))
      return signalPassFailure();
    ModuleOp root = getOperation();
    // Files read and dp checked where there is a schedule to simulate.
    if (root.getOps<ScheduleOp>().empty())
      return;
    FailureOr<std::shared_ptr<const sched::CostInputs>> inputs =
        passCostInputs(&getContext(), getArgument(), nullptr, modelFile,
                       clusterFile, profileFile);
    if (failed(inputs) ||
        failed(checkReplicas(&getContext(), getArgument(), dp)))
      return signalPassFailure();
    Builder b(&getContext());
    for (ScheduleOp schedule : root.getOps<ScheduleOp>()) {
      ScheduleProgram read = readSchedule(schedule);
      // (An invalid schedule got impossible figures: a backward before its
      // forward, no memory; a compute-only one, no dependencies.)
      if (failed(verifyRead(schedule, read, sched::ChannelRule::PerStage)))
        return signalPassFailure();
      // With dp replicas, the slowest replica's pipeline.
      sched::Simulator simulator;
      sched::Simulator::ReplicaRun run;
      llvm::Error error = simulator.prepare(read.program);
      if (!error)
        error = simulator.runSlowestReplica(read.program, **inputs, dp,
                                            timeModel, run, rendezvous);
      if (error) {
        schedule.emitError() << llvm::toString(std::move(error));
        return signalPassFailure();
      }
      const sched::SimResult &r = run.result;
      SmallVector<int64_t> over;
      for (int32_t a = 0; a < read.program.numActors; ++a)
        if (r.overMemory[a])
          over.push_back(a);
      int64_t computations = 0;
      for (auto [actor, index] : r.criticalPath)
        computations += sched::isWork(read.program.actors[actor][index].kind);
      NamedAttrList fields;
      fields.append("iteration_time", b.getF64FloatAttr(r.iterationTime));
      fields.append("bubble_ratio", b.getF64FloatAttr(r.bubbleRatio()));
      fields.append("unit", b.getStringAttr(run.costs.unit));
      fields.append("busy", b.getDenseF64ArrayAttr(r.busy));
      fields.append("bubble", b.getDenseF64ArrayAttr(r.bubble));
      fields.append("peak_activation",
                    b.getDenseF64ArrayAttr(r.peakActivation));
      fields.append("total_bytes", b.getDenseF64ArrayAttr(r.totalBytes));
      fields.append("over_memory", b.getDenseI64ArrayAttr(over));
      fields.append("critical_path", b.getI64IntegerAttr(computations));
      if (dp > 1)
        fields.append("replica", b.getI64IntegerAttr(run.replica));
      schedule->setAttr("flexpipe.simulation",
                        fields.getDictionary(&getContext()));
    }
  }
};
} // namespace
