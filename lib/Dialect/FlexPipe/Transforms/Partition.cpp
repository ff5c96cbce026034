//===- Partition.cpp - -flexpipe-partition --------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Scheduling/CostModel.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Scheduling/Placement.h"

namespace flexpipe {
#define GEN_PASS_DEF_PARTITIONPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {
struct PartitionPass : flexpipe::impl::PartitionPassBase<PartitionPass> {
  using Base::Base;
  PartitionPass(const PartitionPassOptions &options,
                std::shared_ptr<const sched::CostInputs> inputs)
      : Base(options), shared(std::move(inputs)) {}

  void runOnOperation() override {
    if (failed(checkTopLevel(getOperation())))
      return signalPassFailure();
    // The model file's sizes: read once by the pipeline's creator, or here.
    FailureOr<std::optional<sched::ModelConfig>> read = passModel(
        &getContext(), getArgument(),
        shared && shared->model ? &*shared->model : nullptr, modelFile);
    if (failed(read))
      return signalPassFailure();
    const sched::ModelConfig fileModel = read->value_or(sched::ModelConfig{});

    getOperation().walk([&](ModalityOp module) {
      // The spec says how to schedule, the model file how big the model is
      // (docs/CostModel.md): flexpipe-compile writes the file's layer
      // counts into the spec; a spec handed to the passes with other counts
      // was scheduled for a model of another size, and only a later
      // optimization or the simulator refused it.
      if (const sched::ModuleModel *m =
              fileModel.module(module.getSymName().str());
          m && m->layers != static_cast<int64_t>(module.getLayers())) {
        module.emitOpError()
            << "has layers(" << module.getLayers() << "), but the model "
            << "file's module '" << module.getSymName() << "' has " << m->layers
            << "; write the file's count (flexpipe-compile "
            << "--model does) or use the file the spec was written for";
        return signalPassFailure();
      }
      if (module.getPartition())
        return;
      llvm::Expected<sched::ModulePlacement> placed = module.computePlacement();
      if (!placed) {
        module.emitOpError() << llvm::toString(placed.takeError());
        return signalPassFailure();
      }
      const int64_t stages = placed->stagesPerDirection;
      if (balance == sched::Balance::Layers) {
        module.setPartition(module.getLayersPerStage(stages));
        return;
      }
      // Cost balance: the model file's sizes, which price the stages too
      // (the spec's model<...> balanced them for another model), else the
      // module's own.
      sched::ModuleModel sizes;
      if (const sched::ModuleModel *m =
              fileModel.module(module.getSymName().str())) {
        sizes = *m;
      } else if (ModelConfigAttr config = module.getModelAttr()) {
        sizes.hidden = config.getHidden();
        sizes.heads = config.getHeads();
        sizes.seq = config.getSeq();
        sizes.vocab = config.getVocab();
        sizes.lmHead = true;
      } else {
        module.emitOpError()
            << "has no model<...> sizes for balance=cost; add them or pass a "
               "model file with a module named '"
            << module.getSymName() << "'";
        return signalPassFailure();
      }
      sizes.layers = static_cast<int64_t>(module.getLayers());
      // Vocabulary-parallel embedding and head are stages of their own.
      std::vector<int64_t> counts = sched::costBalancedPartition(
          sizes, stages, static_cast<bool>(module.getVocabParallel()));
      if (counts.empty()) {
        module.emitOpError() << "cannot give each of its " << stages
                             << " stages a layer: it has only "
                             << sizes.layers;
        return signalPassFailure();
      }
      module.setPartition(counts);
    });
  }

  /// Cost files read once by the pipeline's creator; null: the options'.
  std::shared_ptr<const sched::CostInputs> shared;
};
} // namespace

std::unique_ptr<Pass>
flexpipe::createPartitionPass(const PartitionPassOptions &options,
                              std::shared_ptr<const sched::CostInputs> inputs) {
  return std::make_unique<PartitionPass>(options, std::move(inputs));
}
