//===- Partition.cpp - -flexpipe-partition --------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Scheduling/CostModel.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
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
    if (balance != "layers" && balance != "cost") {
      getOperation().emitError()
          << "unknown balance '" << balance.getValue()
          << "' for -flexpipe-partition; expected layers or cost";
      return signalPassFailure();
    }
    sched::ModelConfig fileModel;
    if (!modelFile.empty())
      if (std::string error = sched::loadModel(modelFile, fileModel);
          !error.empty()) {
        getOperation().emitError() << error;
        return signalPassFailure();
      }

    getOperation().walk([&](ModalityOp module) {
      if (module.getPartition())
        return;
      llvm::Expected<sched::ModulePlacement> placed = module.computePlacement();
      if (!placed) {
        module.emitOpError() << llvm::toString(placed.takeError());
        return signalPassFailure();
      }
      const int64_t stages = placed->stagesPerDirection;
      if (balance == "layers") {
        module.setPartition(module.getLayersPerStage(stages));
        return;
      }
      // Cost balance: the module's own sizes, else the model file's.
      sched::ModuleModel sizes;
      if (ModelConfigAttr config = module.getModelAttr()) {
        sizes.hidden = config.getHidden();
        sizes.heads = config.getHeads();
        sizes.seq = config.getSeq();
        sizes.vocab = config.getVocab();
        sizes.lmHead = true;
      } else if (const sched::ModuleModel *m =
                     fileModel.module(module.getSymName().str())) {
        sizes = *m;
      } else {
        module.emitOpError()
            << "has no model<...> sizes for balance=cost; add them or pass a "
               "model file with a module named '"
            << module.getSymName() << "'";
        return signalPassFailure();
      }
      sizes.layers = static_cast<int64_t>(module.getLayers());
      std::vector<int64_t> counts = sched::costBalancedPartition(sizes, stages);
      if (counts.empty()) {
        module.emitOpError() << "cannot give each of its " << stages
                             << " stages a layer: it has only "
                             << sizes.layers;
        return signalPassFailure();
      }
      module.setPartition(counts);
    });
  }
};
} // namespace
