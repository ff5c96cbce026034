//===- Partition.cpp - -flexpipe-partition --------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Scheduling/Placement.h"

#define DEBUG_TYPE "flexpipe-partition"

namespace flexpipe {
#define GEN_PASS_DEF_PARTITIONPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {
struct PartitionPass : flexpipe::impl::PartitionPassBase<PartitionPass> {
  using Base::Base;
  void runOnOperation() override {
    getOperation().walk([&](ModalityOp module) {
      if (module.getPartition())
        return;
      llvm::Expected<sched::ModulePlacement> placed = module.computePlacement();
      if (!placed) {
        module.emitOpError() << llvm::toString(placed.takeError());
        return signalPassFailure();
      }
      module.setPartition(module.getLayersPerStage(placed->stagesPerDirection));
    });
  }
};
} // namespace
