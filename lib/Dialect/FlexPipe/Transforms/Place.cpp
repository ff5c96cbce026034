//===- Place.cpp - -flexpipe-place ----------------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Scheduling/Placement.h"

namespace flexpipe {
#define GEN_PASS_DEF_PLACEPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {
struct PlacePass : flexpipe::impl::PlacePassBase<PlacePass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(checkTopLevel(getOperation())))
      return signalPassFailure();
    getOperation().walk([&](ModalityOp module) {
      if (module.getPlacement() == PlacementKind::Explicit)
        return;
      llvm::Expected<sched::ModulePlacement> placed = module.computePlacement();
      if (!placed) {
        module.emitOpError() << llvm::toString(placed.takeError());
        return signalPassFailure();
      }
      module.setPlacement(PlacementKind::Explicit);
      // The first direction's map; a bidirectional module's mirror follows.
      module.setStageMap(ArrayRef<int64_t>(placed->actorOf)
                             .take_front(placed->stagesPerDirection));
      module.removeChunksAttr();
    });
  }
};
} // namespace
