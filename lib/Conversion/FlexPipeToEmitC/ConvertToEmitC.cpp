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
// _end, which the NCCL backend turns into one NCCL group. Calls that repeat
// with arguments on a line are rolled into emitc.for loops
// (sched::rollLoops).
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Conversion/FlexPipeToEmitC/FlexPipeToEmitC.h"

#include "RuntimeDescription.h"

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Runtime/Schedule.h"
#include "flexpipe/Scheduling/Rolling.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
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

/// A runtime call of an actor's program before it is written: the callee,
/// its arguments after the runtime handle (integers and C text), whether it
/// returns a token, and the call whose token it takes (a wait).
struct PendingCall {
  std::string callee;
  SmallVector<Attribute> args;
  bool returnsToken = false;
  int64_t tokenFrom = -1;
};

/// The calls of `actor`'s program, in order, with flexpipe_rt_group_start
/// and _end around the transfer pairs posted together.
FailureOr<std::vector<PendingCall>>
actorCalls(Builder &b, ActorOp actor, const ExecInstances &instances,
           const llvm::DenseSet<Operation *> &groupFirsts) {
  MLIRContext *ctx = b.getContext();
  std::vector<PendingCall> calls;
  llvm::DenseMap<Value, int64_t> tokens; // the call that made each
  auto num = [&](int64_t v) -> Attribute { return b.getI64IntegerAttr(v); };
  Operation *groupLast = nullptr; // the second op of an open group
  for (Operation &op : actor.getBody().front()) {
    if (groupFirsts.contains(&op)) {
      calls.push_back({"flexpipe_rt_group_start", {}});
      groupLast = op.getNextNode();
    }
    auto inst = dyn_cast<InstructionOpInterface>(op);
    const int64_t s = inst ? inst.getStageId() : 0;
    const int64_t mb = inst ? inst.getMicrobatchId() : 0;
    // Each op calls the runtime function of its name; one that returns a
    // token calls the _async one, whose handle its wait takes.
    auto lower = [&](Operation *o, ArrayRef<Attribute> args, Value token) {
      if (token)
        tokens[token] = static_cast<int64_t>(calls.size());
      calls.push_back({runtimeCall(o, token != nullptr),
                       SmallVector<Attribute>(args), token != nullptr});
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
            .Case([&](WaitOp o) -> LogicalResult {
              auto made = tokens.find(o.getToken());
              if (made == tokens.end())
                return o.emitOpError()
                       << "waits on a token that no earlier instruction of "
                          "its actor returns";
              calls.push_back({runtimeCall(o, false), {}, false, made->second});
              return success();
            })
            .Default([&](Operation *other) {
              return other->emitOpError()
                     << "cannot be lowered to the runtime yet";
            });
    if (failed(result))
      return failure();
    if (&op == groupLast)
      calls.push_back({"flexpipe_rt_group_end", {}});
  }
  return calls;
}

/// `calls` as loop rolling sees them: one shape per callee with its text
/// arguments and token, the integer arguments as values.
std::vector<sched::RollCall> rollCalls(ArrayRef<PendingCall> calls) {
  llvm::StringMap<uint32_t> shapes;
  std::vector<sched::RollCall> out(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    std::string key = calls[i].callee + (calls[i].returnsToken ? "->" : "");
    for (Attribute arg : calls[i].args) {
      if (auto value = dyn_cast<IntegerAttr>(arg))
        out[i].values.push_back(value.getInt());
      else
        key += "," + cast<emitc::OpaqueAttr>(arg).getValue().str();
      key += ";";
    }
    out[i].shape = shapes.try_emplace(key, shapes.size()).first->second;
    out[i].tokenFrom = calls[i].tokenFrom;
  }
  return out;
}

/// Writes `calls` into the current block: straight, and each of `loops` as
/// an emitc.for over its trips whose body computes each integer argument
/// that changes as first + trip * step.
void writeCalls(OpBuilder &b, Location loc, Value rt,
                ArrayRef<PendingCall> calls, ArrayRef<sched::RollCall> rolled,
                ArrayRef<sched::RolledLoop> loops) {
  Type i64 = b.getI64Type();
  auto constant = [&](int64_t v) -> Value {
    return emitc::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
  };
  // Call `i` with its integer arguments from `values` where given (else its
  // own) and tokens from `made`, which it adds to.
  auto write = [&](size_t i, ArrayRef<Value> values,
                   llvm::DenseMap<int64_t, Value> &made) {
    const PendingCall &call = calls[i];
    SmallVector<Value> operands{rt};
    if (call.tokenFrom >= 0)
      operands.push_back(made.lookup(call.tokenFrom));
    SmallVector<Attribute> args;
    for (size_t k = 0; k < operands.size(); ++k)
      args.push_back(b.getIndexAttr(static_cast<int64_t>(k)));
    size_t v = 0;
    for (Attribute arg : call.args) {
      if (isa<IntegerAttr>(arg) && !values.empty() && values[v]) {
        args.push_back(b.getIndexAttr(static_cast<int64_t>(operands.size())));
        operands.push_back(values[v]);
      } else {
        args.push_back(arg);
      }
      v += isa<IntegerAttr>(arg);
    }
    // A wait takes its token and nothing else: no args list.
    auto c = emitc::CallOpaqueOp::create(
        b, loc, call.returnsToken ? TypeRange{i64} : TypeRange{}, call.callee,
        operands, call.tokenFrom >= 0 ? ArrayAttr() : b.getArrayAttr(args));
    if (call.returnsToken)
      made[static_cast<int64_t>(i)] = c.getResult(0);
  };
  llvm::DenseMap<int64_t, Value> made;
  size_t at = 0;
  for (size_t l = 0; l <= loops.size(); ++l) {
    const size_t end = l < loops.size() ? loops[l].begin : calls.size();
    for (; at < end; ++at)
      write(at, {}, made);
    if (l == loops.size())
      break;
    const sched::RolledLoop &loop = loops[l];
    auto forOp = emitc::ForOp::create(
        b, loc, constant(0), constant(static_cast<int64_t>(loop.trips)),
        constant(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    const Value trip = forOp.getInductionVar();
    llvm::DenseMap<int64_t, Value> body;
    // first + trip * step, each computed once in the body.
    llvm::DenseMap<std::pair<int64_t, int64_t>, Value> lines;
    auto line = [&](int64_t first, int64_t step) {
      Value scaled = lines.lookup({0, step});
      if (!scaled)
        scaled = lines[{0, step}] =
            step == 1 ? trip
                      : emitc::MulOp::create(b, loc, i64, trip, constant(step));
      if (first == 0)
        return scaled;
      Value value = lines.lookup({first, step});
      if (!value)
        value = lines[{first, step}] =
            emitc::AddOp::create(b, loc, i64, scaled, constant(first));
      return value;
    };
    for (size_t q = 0; q < loop.period; ++q) {
      const size_t i = loop.begin + q;
      const sched::RollCall &first = rolled[i], &next = rolled[i + loop.period];
      SmallVector<Value> values;
      for (size_t v = 0; v < first.values.size(); ++v) {
        const int64_t step = next.values[v] - first.values[v];
        values.push_back(step ? line(first.values[v], step) : Value());
      }
      write(i, values, body);
    }
    at = loop.begin + loop.trips * loop.period;
  }
}

LogicalResult lowerActor(OpBuilder &b, ScheduleOp schedule, ActorOp actor,
                         StringRef description, const ExecInstances &instances,
                         const llvm::DenseSet<Operation *> &groupFirsts) {
  MLIRContext *ctx = b.getContext();
  Location loc = actor.getLoc();
  const int64_t id = static_cast<int64_t>(actor.getId());
  FailureOr<std::vector<PendingCall>> calls =
      actorCalls(b, actor, instances, groupFirsts);
  if (failed(calls))
    return failure();
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
  const std::vector<sched::RollCall> rolled = rollCalls(*calls);
  writeCalls(b, loc, entry->getArgument(0), *calls, rolled,
             sched::rollLoops(rolled));
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
