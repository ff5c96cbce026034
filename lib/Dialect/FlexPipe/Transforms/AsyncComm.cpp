//===- AsyncComm.cpp - -flexpipe-async-comm -------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"

#include "mlir/IR/Builders.h"

namespace flexpipe {
#define GEN_PASS_DEF_ASYNCCOMMPASS
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {
struct AsyncCommPass : flexpipe::impl::AsyncCommPassBase<AsyncCommPass> {
  using Base::Base;
  void runOnOperation() override {
    if (lookahead < 1) {
      getOperation().emitError()
          << "-flexpipe-async-comm needs lookahead >= 1, not "
          << static_cast<int64_t>(lookahead);
      return signalPassFailure();
    }
    OpBuilder b(&getContext());
    auto token = TokenType::get(&getContext());
    for (ScheduleOp schedule : getOperation().getOps<ScheduleOp>()) {
      if (!shouldOptimize(schedule, "async_comm", requestedOnly))
        continue;
      for (auto actor : schedule.getBody().getOps<ActorOp>()) {
        // Computations in program order, to find where a post goes.
        SmallVector<Operation *> ops;
        for (Operation &op : actor.getBody().front())
          ops.push_back(&op);
        SmallVector<Operation *> computations;
        // For each op: how many computations precede it.
        DenseMap<Operation *, size_t> before;
        for (Operation *op : ops) {
          before[op] = computations.size();
          if (auto inst = dyn_cast<InstructionOpInterface>(op);
              inst && inst.isCompute())
            computations.push_back(op);
        }
        for (Operation *op : ops) {
          if (!isa<RecvActOp, RecvGradOp>(op) || op->getNumResults() != 0)
            continue;
          auto inst = cast<InstructionOpInterface>(op);
          // The post goes before the lookahead-th computation back (the
          // first one, at most); with none before, where the receive was.
          const size_t n = before[op];
          const size_t back = static_cast<size_t>(lookahead);
          Operation *postBefore =
              n == 0 ? op : computations[n >= back ? n - back : 0];
          b.setInsertionPoint(postBefore);
          Value t;
          if (isa<RecvActOp>(op))
            t = RecvActOp::create(b, op->getLoc(), token, inst.getStageId(),
                                  inst.getMicrobatchId(), inst.getPeerActor())
                    .getToken();
          else
            t = RecvGradOp::create(b, op->getLoc(), token, inst.getStageId(),
                                   inst.getMicrobatchId(),
                                   inst.getPeerActor())
                    .getToken();
          b.setInsertionPoint(op);
          WaitOp::create(b, op->getLoc(), t);
          op->erase();
        }
      }
    }
  }
};
} // namespace
