//===- ConvertToEmitC.cpp - -flexpipe-convert-to-emitc --------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Conversion/FlexPipeToEmitC/FlexPipeToEmitC.h"

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Scheduling/CostModelYAML.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <set>
#include <sstream>

#define DEBUG_TYPE "flexpipe-convert-to-emitc"

namespace flexpipe {
#define GEN_PASS_DEF_CONVERTTOEMITCPASS
#include "flexpipe/Conversion/Passes.h.inc"
} // namespace flexpipe

using namespace mlir;
using namespace flexpipe;

namespace {

uint64_t fnv1a(StringRef text, uint64_t h = 1469598103934665603ULL) {
  for (char c : text)
    h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  return h;
}

/// The text of docs/Runtime.md for `schedule`, or a diagnostic.
FailureOr<std::string> describe(ScheduleOp schedule,
                                const sched::ModelConfig *model, int64_t dp,
                                int64_t seed) {
  const int64_t numStages = static_cast<int64_t>(schedule.getStages());
  ArrayAttr info = schedule.getStageInfoAttr();
  if (!info)
    return schedule.emitOpError()
           << "does not say what its stages hold (no stage_info); compile "
              "it from a spec";
  // Shared stages: the runtime runs the vocabulary-parallel token embedding
  // (0 layers, first) and LM head + loss (0 layers, last), split over the
  // vocabulary between the actors that run them.
  llvm::SmallDenseSet<int64_t> shared;
  if (std::optional<ArrayRef<int64_t>> list = schedule.getShared())
    shared.insert(list->begin(), list->end());
  auto isVocabHead = [&](int64_t s) {
    auto stage = cast<StageInfoAttr>(info[s]);
    return shared.contains(s) && stage.getLayers() == 0 && stage.getLast() &&
           !stage.getFirst();
  };
  for (int64_t s : shared) {
    auto stage = cast<StageInfoAttr>(info[s]);
    if (stage.getLayers() != 0 || stage.getFirst() == stage.getLast())
      return schedule.emitOpError()
             << "shares stage " << s << " (" << stage.getLayers() << " layers"
             << (stage.getFirst() ? ", first" : "")
             << (stage.getLast() ? ", last" : "")
             << ") between actors; the runtime runs only a vocabulary-parallel "
                "token embedding (0 layers, first) or LM head (0 layers, last) "
                "as a shared stage";
  }
  for (auto [from, to] : schedule.getEdgeList()) {
    if (!shared.contains(from) && !shared.contains(to))
      continue;
    if (shared.contains(from) && shared.contains(to))
      return schedule.emitOpError()
             << "connects shared stages " << from << " and " << to
             << "; a vocabulary-parallel embedding and head need a "
                "transformer stage between them";
    if (isVocabHead(to) && cast<StageInfoAttr>(info[from]).getLast())
      return schedule.emitOpError()
             << "feeds vocabulary-parallel head " << to << " from stage "
             << from << ", which is marked last and so holds a head itself";
  }
  // One module: the runtime's GPT. Each direction of a bidirectional
  // pipeline starts again at the first layer (its stages are copies of the
  // other direction's, with the same weights).
  StringAttr module;
  int64_t layers = 0, directionLayers = 0;
  for (Attribute attr : info) {
    auto stage = cast<StageInfoAttr>(attr);
    if (module && stage.getModule() != module)
      return schedule.emitOpError()
             << "has several modules, which the runtime's built-in model "
                "does not have yet";
    module = stage.getModule();
    if (stage.getFirst())
      directionLayers = 0;
    directionLayers += stage.getLayers();
    layers = std::max(layers, directionLayers);
  }

  // The actors that run each stage's computations, in ascending order.
  std::vector<std::set<int64_t>> actorsOf(numStages);
  for (auto actor : schedule.getBody().getOps<ActorOp>())
    for (Operation &op : actor.getBody().front()) {
      if (isa<GatherOp, ExecOp>(op))
        return op.emitOpError()
               << "cannot be lowered yet: the runtime runs computations, "
                  "point-to-point transfers and the all-gathers of "
                  "vocabulary-parallel heads";
      if (auto inst = dyn_cast<InstructionOpInterface>(op))
        if (inst.isCompute())
          actorsOf[inst.getStageId()].insert(
              static_cast<int64_t>(actor.getId()));
    }
  for (int64_t s : shared)
    if (actorsOf[s].size() < 2)
      return schedule.emitOpError()
             << "shares stage " << s << ", but "
             << (actorsOf[s].empty() ? "no actor runs" : "only one actor runs")
             << " its computations; a vocabulary-parallel stage needs at "
                "least two";
  // An all-gather belongs to a vocabulary-parallel head, among exactly the
  // actors that run it.
  for (auto actor : schedule.getBody().getOps<ActorOp>())
    for (auto gather : actor.getBody().getOps<AllGatherOp>()) {
      const auto s = static_cast<int64_t>(gather.getStage());
      if (!isVocabHead(s))
        return gather.emitOpError()
               << "cannot be lowered: stage " << s
               << " is not a vocabulary-parallel LM head (a shared stage with "
                  "0 layers and last), the only all-gather the runtime runs";
      if (!llvm::equal(gather.getGroup(), actorsOf[s]))
        return gather.emitOpError()
               << "gathers in a group other than the actors that run stage "
               << s << "; list exactly them, in ascending order";
    }

  sched::ModuleModel sizes{module.str(), layers, 64, 4, 32, 256, true};
  int64_t microBatch = 1;
  if (model) {
    const sched::ModuleModel *m = model->module(module.str());
    if (!m || model->modules.size() != 1 || m->vocab <= 0 || !m->lmHead)
      return schedule.emitOpError()
             << "needs a model file with one GPT module named '"
             << module.getValue() << "' (with a vocabulary and an LM head)";
    sizes = *m;
    microBatch = model->microBatchSize;
    if (sizes.layers != layers)
      return schedule.emitOpError()
             << "holds " << layers << " layers but the model file's '"
             << module.getValue() << "' has " << sizes.layers;
  }

  for (int64_t s : shared)
    if (sizes.vocab < static_cast<int64_t>(actorsOf[s].size()))
      return schedule.emitOpError()
             << "splits a vocabulary of " << sizes.vocab << " over "
             << actorsOf[s].size() << " actors in stage " << s;

  std::ostringstream body;
  body << "name " << schedule.getSymName().str() << "\n"
       << "actors " << schedule.getActors() << "\n"
       << "stages " << numStages << "\n"
       << "microbatches " << schedule.getMicrobatches() << "\n"
       << "dp " << dp << "\n"
       << "model vocab=" << sizes.vocab << " seq=" << sizes.seq
       << " hidden=" << sizes.hidden << " heads=" << sizes.heads
       << " layers=" << layers << " microbatch=" << microBatch
       << " seed=" << seed << "\n";
  int64_t firstBlock = 0;
  for (int64_t s = 0; s < numStages; ++s) {
    auto stage = cast<StageInfoAttr>(info[s]);
    if (stage.getFirst())
      firstBlock = 0;
    const std::set<int64_t> &actors = actorsOf[s];
    body << "stage " << s << " actor "
         << (actors.empty() ? -1 : *actors.begin()) << " blocks " << firstBlock
         << " " << stage.getLayers() << " first_last " << stage.getFirst()
         << " " << stage.getLast();
    if (shared.contains(s)) {
      body << " shared";
      for (int64_t a : actors)
        body << " " << a;
    }
    body << "\n";
    firstBlock += stage.getLayers();
  }
  for (auto [from, to] : schedule.getEdgeList())
    body << "edge " << from << " " << to << "\n";

  // The hash covers the description and every actor's program.
  std::string printed;
  llvm::raw_string_ostream os(printed);
  schedule->print(os, OpPrintingFlags().printGenericOpForm());
  const uint64_t hash = fnv1a(printed, fnv1a(body.str())) >> 1;
  return "flexpipe-schedule 1\nhash " + std::to_string(hash) + "\n" +
         body.str();
}

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

LogicalResult lowerActor(OpBuilder &b, ScheduleOp schedule, ActorOp actor,
                         StringRef description) {
  MLIRContext *ctx = b.getContext();
  Location loc = actor.getLoc();
  const int64_t id = static_cast<int64_t>(actor.getId());
  auto module = ModuleOp::create(b, loc,
                                 (schedule.getSymName() + "_rank" +
                                  std::to_string(id))
                                     .str());
  module->setAttr("flexpipe.actor", b.getI64IntegerAttr(id));
  module->setAttr("flexpipe.description", b.getStringAttr(description));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(module.getBody());
  emitc::IncludeOp::create(b, loc, "flexpipe/Runtime/Runtime.h", false);

  Type rtType = emitc::PointerType::get(emitc::OpaqueType::get(ctx, "flexpipe_rt"));
  auto program = emitc::FuncOp::create(b, loc, "flexpipe_program",
                                       b.getFunctionType({rtType}, {}));
  Block *entry = program.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  Value rt = entry->getArgument(0);
  llvm::DenseMap<Value, Value> tokens;
  Type i64 = b.getI64Type();
  auto call = [&](StringRef callee, ArrayRef<int64_t> ints, Type result = {}) {
    SmallVector<Attribute> args{b.getIndexAttr(0)};
    for (int64_t v : ints)
      args.push_back(b.getI64IntegerAttr(v));
    return emitc::CallOpaqueOp::create(
        b, loc, result ? TypeRange{result} : TypeRange{}, callee,
        ValueRange{rt}, b.getArrayAttr(args));
  };
  for (Operation &op : actor.getBody().front()) {
    auto inst = dyn_cast<InstructionOpInterface>(op);
    const int64_t s = inst ? inst.getStageId() : 0;
    const int64_t mb = inst ? inst.getMicrobatchId() : 0;
    auto transfer = [&](StringRef name, int64_t peer, Value token) {
      if (!token) {
        call(name, {s, mb, peer});
        return;
      }
      tokens[token] = call((name + "_async").str(), {s, mb, peer}, i64)
                          .getResult(0);
    };
    LogicalResult result =
        llvm::TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](FwdOp) { return call("flexpipe_rt_fwd", {s, mb}), success(); })
            .Case([&](BwdOp) { return call("flexpipe_rt_bwd", {s, mb}), success(); })
            .Case([&](IgradOp) { return call("flexpipe_rt_igrad", {s, mb}), success(); })
            .Case([&](WgradOp) { return call("flexpipe_rt_wgrad", {s, mb}), success(); })
            .Case([&](SendActOp o) {
              transfer("flexpipe_rt_send_act", o.getPeerActor(), o.getToken());
              return success();
            })
            .Case([&](RecvActOp o) {
              transfer("flexpipe_rt_recv_act", o.getPeerActor(), o.getToken());
              return success();
            })
            .Case([&](SendGradOp o) {
              transfer("flexpipe_rt_send_grad", o.getPeerActor(), o.getToken());
              return success();
            })
            .Case([&](RecvGradOp o) {
              transfer("flexpipe_rt_recv_grad", o.getPeerActor(), o.getToken());
              return success();
            })
            .Case([&](AllGatherOp o) {
              // describe() checked that it belongs to a vocabulary-parallel
              // head; the runtime knows the group from the description.
              if (Value token = o.getToken())
                tokens[token] =
                    call("flexpipe_rt_all_gather_async", {s, mb}, i64)
                        .getResult(0);
              else
                call("flexpipe_rt_all_gather", {s, mb});
              return success();
            })
            .Case([&](WaitOp o) {
              emitc::CallOpaqueOp::create(b, loc, TypeRange{},
                                          "flexpipe_rt_wait",
                                          ValueRange{rt, tokens.lookup(o.getToken())});
              return success();
            })
            .Default([&](Operation *other) {
              return other->emitOpError()
                     << "cannot be lowered to the runtime yet";
            });
    if (failed(result))
      return failure();
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
                      emitc::OpaqueAttr::get(ctx, quote(description)),
                      emitc::OpaqueAttr::get(ctx, "flexpipe_program")}));
  emitc::ReturnOp::create(b, loc, runMain.getResult(0));
  return success();
}

struct ConvertToEmitCPass
    : flexpipe::impl::ConvertToEmitCPassBase<ConvertToEmitCPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp root = getOperation();
    if (dataParallel < 1) {
      root.emitError() << "-flexpipe-convert-to-emitc needs dp >= 1, got "
                       << dataParallel.getValue();
      return signalPassFailure();
    }
    sched::ModelConfig model;
    if (!modelFile.empty())
      if (std::string error = sched::loadModel(modelFile, model);
          !error.empty()) {
        root.emitError() << error;
        return signalPassFailure();
      }
    for (ScheduleOp schedule :
         llvm::make_early_inc_range(root.getOps<ScheduleOp>())) {
      FailureOr<std::string> description =
          describe(schedule, modelFile.empty() ? nullptr : &model,
                   dataParallel, seed);
      if (failed(description))
        return signalPassFailure();
      OpBuilder b(schedule);
      for (auto actor : schedule.getBody().getOps<ActorOp>())
        if (failed(lowerActor(b, schedule, actor, *description)))
          return signalPassFailure();
      schedule.erase();
    }
  }
};

} // namespace
