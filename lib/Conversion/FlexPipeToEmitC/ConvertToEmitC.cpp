//===- ConvertToEmitC.cpp - -flexpipe-convert-to-emitc --------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers each actor of a flexpipe.schedule to an EmitC module: a
// `flexpipe_program` function that calls the runtime in the actor's order,
// and a `main` that hands the runtime the schedule's description
// (RuntimeDescription.h). The walk is by hand, not by conversion patterns:
// each op becomes one call, and only tokens thread state between ops. A
// send and a receive with one peer that the peer mirrors
// (sched::mirroredTransferPairs) are bracketed by flexpipe_rt_group_start /
// _end, which the NCCL backend turns into one NCCL group.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Conversion/FlexPipeToEmitC/FlexPipeToEmitC.h"

#include "RuntimeDescription.h"

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Runtime/Schedule.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

namespace flexpipe {
#define GEN_PASS_DEF_CONVERTTOEMITCPASS
#include "flexpipe/Conversion/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {

/// A C string literal.
std::string quote(StringRef text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n')
      out += "\\n";
    else if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else
      out += c;
  }
  return out + "\"";
}

/// The runtime function an op of the schedule calls: flexpipe.X calls
/// flexpipe_rt_X (flexpipe/Runtime/Runtime.h), and flexpipe_rt_X_async
/// where the op returns a token.
std::string runtimeCall(Operation *op, bool async) {
  return ("flexpipe_rt_" + op->getName().stripDialect() +
          (async ? "_async" : ""))
      .str();
}

/// The first op of each transfer pair to post as one group (its next op is
/// the second); none for a schedule the replay rejects.
llvm::DenseSet<Operation *> groupedPairs(ScheduleOp schedule) {
  const ScheduleProgram read = readSchedule(schedule);
  sched::ProgramGraph graph;
  llvm::DenseSet<Operation *> firsts;
  if (sched::buildGraph(read.program, sched::ChannelRule::PerStage, graph))
    return firsts;
  for (const sched::TransferPair &pair :
       sched::mirroredTransferPairs(read.program, graph))
    firsts.insert(read.ops[pair.actor][pair.first]);
  return firsts;
}

LogicalResult lowerActor(OpBuilder &b, ScheduleOp schedule, ActorOp actor,
                         StringRef description, const ExecInstances &instances,
                         const llvm::DenseSet<Operation *> &groupFirsts) {
  MLIRContext *ctx = b.getContext();
  Location loc = actor.getLoc();
  const int64_t id = static_cast<int64_t>(actor.getId());
  auto module = ModuleOp::create(
      b, loc, (schedule.getSymName() + "_rank" + std::to_string(id)).str());
  module->setAttr("flexpipe.actor", b.getI64IntegerAttr(id));
  module->setAttr("flexpipe.description", b.getStringAttr(description));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  emitc::IncludeOp::create(b, loc, "flexpipe/Runtime/Runtime.h", false);

  Type rtType =
      emitc::PointerType::get(emitc::OpaqueType::get(ctx, "flexpipe_rt"));
  auto program = emitc::FuncOp::create(b, loc, "flexpipe_program",
                                       b.getFunctionType({rtType}, {}));
  Block *entry = program.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  Value rt = entry->getArgument(0);
  llvm::DenseMap<Value, Value> tokens;
  Type i64 = b.getI64Type();
  auto num = [&](int64_t v) -> Attribute { return b.getI64IntegerAttr(v); };
  // callee(rt, args...); where `token` is given, its handle is the result.
  auto call = [&](StringRef callee, ArrayRef<Attribute> args,
                  Value token = {}) {
    SmallVector<Attribute> all{b.getIndexAttr(0)};
    llvm::append_range(all, args);
    auto c = emitc::CallOpaqueOp::create(
        b, loc, token ? TypeRange{i64} : TypeRange{}, callee, ValueRange{rt},
        b.getArrayAttr(all));
    if (token)
      tokens[token] = c.getResult(0);
  };
  Operation *groupLast = nullptr; // the second op of an open group
  for (Operation &op : actor.getBody().front()) {
    if (groupFirsts.contains(&op)) {
      call("flexpipe_rt_group_start", {});
      groupLast = op.getNextNode();
    }
    auto inst = dyn_cast<InstructionOpInterface>(op);
    const int64_t s = inst ? inst.getStageId() : 0;
    const int64_t mb = inst ? inst.getMicrobatchId() : 0;
    // Each op calls the runtime function of its name; one that returns a
    // token calls the _async one, whose handle its wait takes.
    auto lower = [&](Operation *o, ArrayRef<Attribute> args, Value token) {
      call(runtimeCall(o, token != nullptr), args, token);
      return success();
    };
    LogicalResult result =
        llvm::TypeSwitch<Operation *, LogicalResult>(&op)
            .Case<FwdOp, BwdOp, IgradOp, WgradOp>([&](Operation *o) {
              return lower(o, {num(s), num(mb)}, nullptr);
            })
            .Case<SendActOp, RecvActOp, SendGradOp, RecvGradOp>([&](auto o) {
              return lower(o, {num(s), num(mb), num(o.getPeerActor())},
                           o.getToken());
            })
            // describe() checked that an all-gather belongs to a
            // vocabulary-parallel head or a sync stage; the runtime knows
            // the group from the description.
            .Case([&](AllGatherOp o) {
              return lower(o, {num(s), num(mb)}, o.getToken());
            })
            .Case([&](ExecOp o) {
              // flexpipe_rt_exec(rt, "name", stage, mb, count, "attrs").
              const ExecInstance &instance = instances.at(o);
              return lower(
                  o,
                  {emitc::OpaqueAttr::get(ctx, quote(o.getInstruction())),
                   num(s), num(mb), num(instance.count),
                   emitc::OpaqueAttr::get(ctx, quote(instance.attrs))},
                  o.getToken());
            })
            .Case([&](WaitOp o) {
              emitc::CallOpaqueOp::create(
                  b, loc, TypeRange{}, runtimeCall(o, false),
                  ValueRange{rt, tokens.lookup(o.getToken())});
              return success();
            })
            .Default([&](Operation *other) {
              return other->emitOpError()
                     << "cannot be lowered to the runtime yet";
            });
    if (failed(result))
      return failure();
    if (&op == groupLast)
      call("flexpipe_rt_group_end", {});
  }
  emitc::ReturnOp::create(b, loc, Value());

  // int main(int argc, char **argv) { return flexpipe_rt_main(...); }
  b.setInsertionPointToEnd(module.getBody());
  Type argvType = emitc::PointerType::get(
      emitc::PointerType::get(emitc::OpaqueType::get(ctx, "char")));
  auto main = emitc::FuncOp::create(
      b, loc, "main",
      b.getFunctionType({b.getI32Type(), argvType}, {b.getI32Type()}));
  Block *mainEntry = main.addEntryBlock();
  b.setInsertionPointToEnd(mainEntry);
  auto runMain = emitc::CallOpaqueOp::create(
      b, loc, TypeRange{b.getI32Type()}, "flexpipe_rt_main",
      ValueRange{mainEntry->getArgument(0), mainEntry->getArgument(1)},
      b.getArrayAttr({b.getIndexAttr(0), b.getIndexAttr(1),
                      emitc::OpaqueAttr::get(
                          ctx, quote(rt::forProgram(description.str(), id))),
                      emitc::OpaqueAttr::get(ctx, "flexpipe_program")}));
  emitc::ReturnOp::create(b, loc, runMain.getResult(0));
  return success();
}

struct ConvertToEmitCPass
    : flexpipe::impl::ConvertToEmitCPassBase<ConvertToEmitCPass> {
  using Base::Base;
  ConvertToEmitCPass(const ConvertToEmitCPassOptions &options,
                     std::shared_ptr<const sched::ModelConfig> model)
      : Base(options), shared(std::move(model)) {}

  void runOnOperation() override {
    ModuleOp root = getOperation();
    if (failed(checkTopLevel(root, getArgument())) ||
        failed(checkReplicas(&getContext(), getArgument(), dataParallel)))
      return signalPassFailure();
    if (seed < 0) {
      optionError(&getContext())
          << "-" << getArgument() << " needs seed >= 0, not "
          << static_cast<int64_t>(seed);
      return signalPassFailure();
    }
    // The model's sizes: read once by the pass's creator, or here.
    FailureOr<std::optional<sched::ModelConfig>> model =
        passModel(&getContext(), getArgument(), shared.get(), modelFile);
    if (failed(model))
      return signalPassFailure();
    for (ScheduleOp schedule :
         llvm::make_early_inc_range(root.getOps<ScheduleOp>())) {
      ExecInstances instances;
      FailureOr<std::string> description =
          describeForRuntime(schedule, *model ? &**model : nullptr,
                             dataParallel, seed, backend, instances);
      if (failed(description))
        return signalPassFailure();
      // The rank programs would hang on a schedule the replay rejects, or
      // train on the wrong data.
      if (failed(verifyRead(schedule, readSchedule(schedule),
                            sched::ChannelRule::PerStage)))
        return signalPassFailure();
      const llvm::DenseSet<Operation *> groupFirsts = groupedPairs(schedule);
      OpBuilder b(schedule);
      for (auto actor : schedule.getBody().getOps<ActorOp>())
        if (failed(lowerActor(b, schedule, actor, *description, instances,
                              groupFirsts)))
          return signalPassFailure();
      schedule.erase();
    }
  }

  /// The model file read once by the pass's creator; null: the option's.
  std::shared_ptr<const sched::ModelConfig> shared;
};

} // namespace

std::unique_ptr<Pass> flexpipe::createConvertToEmitCPass(
    const ConvertToEmitCPassOptions &options,
    std::shared_ptr<const sched::ModelConfig> model) {
  return std::make_unique<ConvertToEmitCPass>(options, std::move(model));
}
