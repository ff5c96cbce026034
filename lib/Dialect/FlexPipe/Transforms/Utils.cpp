//===- Utils.cpp - Between the dialect and the scheduling library ---------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h"

#include "flexpipe/Plugin.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Support/InputLimits.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace flexpipe;

/// The size a priority or in-flight statement's counts are evaluated at:
/// its module's actors and stages, or the whole pipeline's.
struct CountScope {
  int64_t pp, s, m;
};

/// Evaluates one count of `op` (an interval or a scheduling unit); a count
/// below 1 or one that does not evaluate is a located error.
static FailureOr<int64_t> evaluateCountAt(Operation *op, AffineMap count,
                                          StringRef what,
                                          const CountScope &scope) {
  std::optional<int64_t> value =
      evaluateCount(count, scope.pp, scope.s, scope.m);
  if (value && *value >= 1)
    return *value;
  std::string text;
  llvm::raw_string_ostream os(text);
  printCountExpr(os, count);
  InFlightDiagnostic diag = op->emitOpError()
                            << "gives " << what << " `" << text << "`, which ";
  if (value)
    diag << "is " << *value;
  else
    diag << "does not evaluate (a division by zero, or past 64 bits)";
  return diag << " at pp = " << scope.pp << ", s = " << scope.s
              << ", m = " << scope.m << "; it must be at least 1 there";
}

static std::optional<sched::CompKind> builtinKind(StringRef name) {
  return llvm::StringSwitch<std::optional<sched::CompKind>>(name)
      .Case("fwd", sched::CompKind::Fwd)
      .Case("bwd", sched::CompKind::Bwd)
      .Case("igrad", sched::CompKind::Igrad)
      .Case("wgrad", sched::CompKind::Wgrad)
      .Default(std::nullopt);
}

namespace {
/// Reads a flexpipe.pipeline into the IR-free sched::PipelineSpec, one op
/// kind at a time. Errors are emitted at the op.
class SpecReader {
public:
  explicit SpecReader(PipelineOp pipeline)
      : pipeline(pipeline), symbols(pipeline) {}

  FailureOr<sched::PipelineSpec> read();

private:
  void readModules();
  void readRegistered();
  LogicalResult readCheck(CheckOp check);
  LogicalResult readShare(ShareOp share);
  LogicalResult readPriority(PriorityOp priority);
  LogicalResult readInflight(InflightOp inflight);
  LogicalResult readDependency(DependencyOp dep);

  /// The index of a module, -1 for none.
  int32_t indexOf(FlatSymbolRefAttr symbol) const {
    return symbol ? moduleIndex.lookup(symbol.getAttr()) : -1;
  }
  /// A stage index of `module`, negative ones counted from its last stage.
  int64_t normalize(ModalityOp module, int64_t index);
  /// Module `m`'s placement, computed once (every rule, share and reference
  /// of a module asks for it: computing it each time was quadratic).
  llvm::Expected<const sched::ModulePlacement &> placementOf(int32_t m);
  /// The sizes counts of a statement are evaluated at: its module's actors
  /// and stages, or the whole pipeline's.
  FailureOr<CountScope> scopeOf(Operation *op, int32_t module);
  /// An error at `op`: no loaded plugin registers the `kind` `name`.
  LogicalResult unknown(Operation &op, StringRef kind, StringRef name) const;

  PipelineOp pipeline;
  /// The pipeline's symbols, indexed once.
  SymbolTable symbols;
  sched::PipelineSpec spec;
  plugin::Registry &plugins = plugin::Registry::global();
  llvm::DenseMap<StringAttr, int32_t> moduleIndex;
  SmallVector<ModalityOp> modules;
  std::vector<std::optional<sched::ModulePlacement>> placements;
  std::optional<int64_t> numStages; ///< the pipeline's, once asked
  llvm::StringMap<int32_t> stageIndex, instIndex;
};
} // namespace

llvm::Expected<const sched::ModulePlacement &>
SpecReader::placementOf(int32_t m) {
  if (!placements[m]) {
    llvm::Expected<sched::ModulePlacement> placed =
        modules[m].computePlacement();
    if (!placed)
      return placed.takeError();
    placements[m] = std::move(*placed);
  }
  return *placements[m];
}

int64_t SpecReader::normalize(ModalityOp module, int64_t index) {
  llvm::Expected<const sched::ModulePlacement &> placed =
      placementOf(moduleIndex.lookup(module.getSymNameAttr()));
  if (!placed) {
    llvm::consumeError(placed.takeError());
    return index;
  }
  return index < 0 ? index + placed->stagesPerDirection : index;
}

FailureOr<CountScope> SpecReader::scopeOf(Operation *op, int32_t module) {
  if (!numStages)
    numStages = pipeline.getNumStages();
  CountScope scope{spec.actors, *numStages, spec.microbatches};
  if (module < 0)
    return scope;
  llvm::Expected<const sched::ModulePlacement &> placed = placementOf(module);
  if (!placed)
    return op->emitOpError() << llvm::toString(placed.takeError());
  scope.pp = static_cast<int64_t>(modules[module].getActorIds().size());
  scope.s = placed->numStages();
  return scope;
}

LogicalResult SpecReader::unknown(Operation &op, StringRef kind,
                                  StringRef name) const {
  InFlightDiagnostic diag = op.emitOpError()
                            << "uses " << kind << " \"" << name
                            << "\", which no loaded plugin registers; load "
                               "the plugin that defines it with "
                               "--load-plugin";
  std::vector<std::string> known = plugins.names(kind.str());
  if (!known.empty())
    diag << " (registered: " << llvm::join(known, ", ") << ")";
  return failure();
}

void SpecReader::readModules() {
  for (auto module : pipeline.getBody().getOps<ModalityOp>()) {
    moduleIndex[module.getSymNameAttr()] = static_cast<int32_t>(modules.size());
    modules.push_back(module);
  }
  placements.resize(modules.size());
  for (ModalityOp module : modules) {
    sched::ModuleSpec m;
    m.name = module.getSymName().str();
    m.layers = static_cast<int64_t>(module.getLayers());
    m.placement = module.getPlacementSpec();
    m.vocabParallel = module.getVocabParallel();
    if (std::optional<ArrayRef<int64_t>> partition = module.getPartition())
      m.partition.assign(partition->begin(), partition->end());
    if (ArrayAttr inputs = module.getInputsAttr())
      for (Attribute input : inputs)
        m.inputs.push_back(indexOf(cast<FlatSymbolRefAttr>(input)));
    spec.modules.push_back(std::move(m));
  }
}

/// Registered stages and instructions, by name.
void SpecReader::readRegistered() {
  for (auto stage : pipeline.getBody().getOps<StageOp>()) {
    stageIndex[stage.getSymName()] =
        static_cast<int32_t>(spec.registeredStages.size());
    spec.registeredStages.push_back(
        {stage.getSymName().str(),
         std::vector<int64_t>(stage.getActorIds().begin(),
                              stage.getActorIds().end())});
  }
  for (auto inst : pipeline.getBody().getOps<InstructionOp>()) {
    sched::InstructionSpec in;
    in.name = inst.getSymName().str();
    in.runtime = toSched<sched::InstRuntime>(inst.getKind());
    in.async = inst.getAsync();
    in.prev = static_cast<int64_t>(inst.getPrev());
    in.next = static_cast<int64_t>(inst.getNext());
    in.unit = static_cast<int64_t>(inst.getUnit());
    if (auto module =
            symbols.lookup<ModalityOp>(inst.getStageAttr().getAttr())) {
      in.module = indexOf(inst.getStageAttr());
      in.stage = normalize(module, static_cast<int64_t>(*inst.getStageIndex()));
    } else {
      in.registeredStage = stageIndex.lookup(inst.getStageAttr().getValue());
    }
    instIndex[inst.getSymName()] =
        static_cast<int32_t>(spec.instructions.size());
    spec.instructions.push_back(std::move(in));
  }
}

LogicalResult SpecReader::readCheck(CheckOp check) {
  const sched::CheckFunction *function = plugins.check(check.getName().str());
  if (!function)
    return unknown(*check, "check", check.getName());
  spec.checks.push_back(*function);
  spec.checkNames.push_back(check.getName().str());
  return success();
}

LogicalResult SpecReader::readShare(ShareOp share) {
  int32_t m = indexOf(share.getModuleAttr());
  llvm::Expected<const sched::ModulePlacement &> placed = placementOf(m);
  if (!placed)
    return share.emitOpError() << llvm::toString(placed.takeError());
  int64_t stage = static_cast<int64_t>(share.getStage());
  if (stage < 0)
    stage += placed->stagesPerDirection;
  spec.modules[m].shared.push_back(
      {stage, std::vector<int64_t>(share.getActorIds().begin(),
                                   share.getActorIds().end())});
  return success();
}

LogicalResult SpecReader::readPriority(PriorityOp priority) {
  sched::PrioritySpec p;
  p.module = indexOf(priority.getModuleAttr());
  const SmallVector<int64_t> actors = priority.getResolvedActorIds();
  p.actors.assign(actors.begin(), actors.end());
  FailureOr<CountScope> scope = scopeOf(priority, p.module);
  if (failed(scope))
    return failure();
  if (CttpAttr cttp = priority.getCttpAttr()) {
    p.cttp = toSched<sched::Cttp>(cttp.getKind());
    for (auto [unit, count, what] :
         {std::tuple{&p.fwdUnit, cttp.getFwdUnit(), "a forward unit"},
          std::tuple{&p.bwdUnit, cttp.getBwdUnit(), "a backward unit"}}) {
      if (!count)
        continue;
      FailureOr<int64_t> value = evaluateCountAt(priority, count, what, *scope);
      if (failed(value))
        return failure();
      *unit = *value;
    }
  }
  for (auto [attr, target, what] :
       {std::tuple{priority.getFstpAttr(), &p.fwd, "a forward interval"},
        std::tuple{priority.getBstpAttr(), &p.bwd, "a backward interval"}}) {
    if (!attr)
      continue;
    sched::StagePriority stp{toSched<sched::StageOrder>(attr.getOrder())};
    if (AffineMap interval = attr.getInterval()) {
      FailureOr<int64_t> value =
          evaluateCountAt(priority, interval, what, *scope);
      if (failed(value))
        return failure();
      stp.interval = *value;
    }
    *target = stp;
  }
  if (std::optional<StringRef> custom = priority.getCustom()) {
    const sched::PriorityFunction *function = plugins.priority(custom->str());
    if (!function)
      return unknown(*priority, "priority", *custom);
    p.custom = *function;
    p.customName = custom->str();
  }
  spec.priorities.push_back(std::move(p));
  return success();
}

LogicalResult SpecReader::readInflight(InflightOp inflight) {
  sched::InflightSpec in;
  in.module = indexOf(inflight.getModuleAttr());
  in.scope = toSched<sched::InflightScope>(inflight.getScope());
  FailureOr<CountScope> scope = scopeOf(inflight, in.module);
  if (failed(scope))
    return failure();
  FailureOr<SmallVector<int64_t>> limits =
      inflight.evaluate(scope->pp, scope->s, scope->m);
  if (failed(limits))
    return failure();
  in.limits.assign(limits->begin(), limits->end());
  spec.inflight.push_back(std::move(in));
  return success();
}

LogicalResult SpecReader::readDependency(DependencyOp dep) {
  sched::DependencySpec d{sched::CompKind::Fwd, -1, 0,
                          sched::CompKind::Fwd, -1, 0};
  // Each end: a built-in computation on a module stage, or a registered
  // instruction (named with the stage it is attached to).
  for (bool source : {true, false}) {
    StringRef inst = source ? dep.getSrcInst() : dep.getDstInst();
    FlatSymbolRefAttr stage =
        source ? dep.getSrcStageAttr() : dep.getDstStageAttr();
    std::optional<uint64_t> index =
        source ? dep.getSrcIndex() : dep.getDstIndex();
    std::optional<sched::CompKind> kind = builtinKind(inst);
    auto module = symbols.lookup<ModalityOp>(stage.getAttr());
    if (kind && !module)
      return dep.emitOpError()
             << "runs " << inst << " on registered stage " << stage
             << ", which holds no layers and so no computations; "
                "built-in instructions need a module stage";
    if (kind) {
      (source ? d.srcKind : d.dstKind) = *kind;
      (source ? d.srcModule : d.dstModule) = indexOf(stage);
      (source ? d.srcStage : d.dstStage) =
          normalize(module, static_cast<int64_t>(*index));
    } else {
      (source ? d.srcInst : d.dstInst) = instIndex.lookup(inst);
    }
  }
  if (d.srcInst >= 0 && d.dstInst >= 0)
    return dep.emitOpError()
           << "connects two registered instructions; the scheduler "
              "orders a registered instruction against computations "
              "(its sources and dependents), so connect each to a "
              "computation";
  spec.dependencies.push_back(d);
  return success();
}

FailureOr<sched::PipelineSpec> SpecReader::read() {
  spec.actors = static_cast<int32_t>(pipeline.getActors());
  spec.microbatches = static_cast<int32_t>(pipeline.getMicrobatches());
  readModules();
  readRegistered();
  for (Operation &op : pipeline.getBody().front()) {
    LogicalResult result =
        llvm::TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](CheckOp check) { return readCheck(check); })
            .Case([&](ShareOp share) { return readShare(share); })
            .Case([&](PriorityOp priority) { return readPriority(priority); })
            .Case([&](InflightOp inflight) { return readInflight(inflight); })
            .Case([&](DependencyOp dep) { return readDependency(dep); })
            .Default([](Operation *) { return success(); });
    if (failed(result))
      return failure();
  }
  return std::move(spec);
}

FailureOr<sched::PipelineSpec> flexpipe::readPipelineSpec(PipelineOp pipeline) {
  return SpecReader(pipeline).read();
}

void flexpipe::emitSpecError(PipelineOp pipeline, llvm::Error error) {
  Operation *at = pipeline;
  Region &body = pipeline.getBody();
  auto nth = [](auto ops, int32_t index) -> Operation * {
    for (auto op : ops)
      if (index-- == 0)
        return op;
    return nullptr;
  };
  llvm::handleAllErrors(
      std::move(error),
      [&](const sched::StatementError &e) {
        using Site = sched::StatementError::Site;
        Operation *op = nullptr;
        if (e.site == Site::Module)
          op = nth(body.getOps<ModalityOp>(), e.index);
        else if (e.site == Site::Instruction)
          op = nth(body.getOps<InstructionOp>(), e.index);
        else if (e.site == Site::Dependency)
          op = nth(body.getOps<DependencyOp>(), e.index);
        else if (e.site == Site::Optimize)
          for (OptimizeOp optimize : body.getOps<OptimizeOp>())
            op = optimize; // the last one is the request
        (op ? op : at)->emitOpError() << e.what;
      },
      [&](const llvm::ErrorInfoBase &e) { at->emitOpError() << e.message(); });
}

ScheduleProgram flexpipe::readSchedule(ScheduleOp schedule) {
  ScheduleProgram result;
  sched::Program &p = result.program;
  p.numActors = static_cast<int32_t>(schedule.getActors());
  p.numStages = static_cast<int32_t>(schedule.getStages());
  p.numMicrobatches = static_cast<int32_t>(schedule.getMicrobatches());
  for (auto [from, to] : schedule.getEdgeList())
    p.edges.push_back({static_cast<int32_t>(from), static_cast<int32_t>(to)});
  if (std::optional<ArrayRef<int64_t>> shared = schedule.getShared())
    p.sharedStages.assign(shared->begin(), shared->end());
  p.actors.resize(p.numActors);
  result.ops.resize(p.numActors);
  // The index of `name` in `names`, appended when new; `index` mirrors
  // `names` (a schedule may hold thousands of registered stages and
  // instructions).
  auto indexOf = [](std::vector<std::string> &names,
                    llvm::StringMap<int32_t> &index, StringRef name) {
    auto [it, inserted] =
        index.try_emplace(name, static_cast<int32_t>(names.size()));
    if (inserted)
      names.push_back(name.str());
    return it->second;
  };
  llvm::StringMap<int32_t> moduleIndex, instIndex;
  if (ArrayAttr info = schedule.getStageInfoAttr()) {
    for (StageInfoAttr stage : info.getAsRange<StageInfoAttr>())
      p.stageMeta.push_back(
          {indexOf(p.moduleNames, moduleIndex, stage.getModule()),
           stage.getLayers(), stage.getFirst(), stage.getLast()});
    sched::markRegistered(p.stageMeta);
  }

  llvm::DenseMap<Value, int32_t> tokens;
  std::map<std::vector<int32_t>, int32_t> groups;
  auto tokenOf = [&](Value token) {
    if (!token)
      return -1;
    return tokens.try_emplace(token, static_cast<int32_t>(tokens.size()))
        .first->second;
  };
  // A group attribute is uniqued: each distinct one is sorted and looked up
  // once (a vocabulary-parallel schedule repeats one group of every actor
  // in each all_gather).
  llvm::DenseMap<Attribute, int32_t> groupOfAttr;
  auto groupOf = [&](DenseI64ArrayAttr attr) {
    auto [known, fresh] = groupOfAttr.try_emplace(attr, 0);
    if (!fresh)
      return known->second;
    ArrayRef<int64_t> members = attr.asArrayRef();
    std::vector<int32_t> key(members.begin(), members.end());
    std::sort(key.begin(), key.end());
    auto [it, inserted] =
        groups.try_emplace(key, static_cast<int32_t>(p.groups.size()));
    if (inserted)
      p.groups.push_back(key);
    return known->second = it->second;
  };

  for (auto actor : schedule.getBody().getOps<ActorOp>()) {
    const int64_t id = static_cast<int64_t>(actor.getId());
    if (id < 0 || id >= p.numActors)
      continue;
    for (Operation &op : actor.getBody().front()) {
      sched::ProgOp entry{WaitOp::kOpKind};
      entry.source = static_cast<int32_t>(result.ops[id].size());
      if (auto inst = dyn_cast<InstructionOpInterface>(op)) {
        entry.kind = inst.getOpKind();
        entry.stage = static_cast<int32_t>(inst.getStageId());
        entry.mb = static_cast<int32_t>(inst.getMicrobatchId());
        entry.peer = static_cast<int32_t>(inst.getPeerActor());
        // Asynchronous transfers, collectives and execs return their token.
        if (op.getNumResults() == 1)
          entry.token = tokenOf(op.getResult(0));
      }
      llvm::TypeSwitch<Operation *>(&op)
          .Case([&](AllGatherOp o) { entry.group = groupOf(o.getGroupAttr()); })
          .Case([&](GatherOp o) {
            entry.group = groupOf(o.getGroupAttr());
            entry.peer = static_cast<int32_t>(o.getRoot());
          })
          .Case([&](ExecOp o) {
            entry.inst = indexOf(p.instructions, instIndex, o.getInstruction());
          })
          .Case([&](WaitOp o) { entry.token = tokenOf(o.getToken()); });
      p.actors[id].push_back(entry);
      result.ops[id].push_back(&op);
    }
  }
  return result;
}

LogicalResult flexpipe::verifyRead(ScheduleOp schedule,
                                   const ScheduleProgram &read,
                                   sched::ChannelRule rule, bool replay) {
  std::optional<sched::VerifyFailure> problem =
      replay ? sched::verify(read.program, rule)
             : sched::verifyComputations(read.program);
  return problem ? reportFailure(schedule, read, *problem) : success();
}

LogicalResult flexpipe::reportFailure(ScheduleOp schedule,
                                      const ScheduleProgram &read,
                                      const sched::VerifyFailure &problem) {
  auto locate = [&](const sched::VerifyFailure::At &at) -> Operation * {
    if (at.actor < 0 || at.actor >= static_cast<int32_t>(read.ops.size()) ||
        at.index < 0 ||
        at.index >= static_cast<int32_t>(read.ops[at.actor].size()))
      return schedule;
    return read.ops[at.actor][at.index];
  };
  Operation *primary =
      problem.at.empty() ? schedule.getOperation() : locate(problem.at[0]);
  InFlightDiagnostic diag = primary->emitError() << problem.message;
  for (const sched::VerifyFailure::At &at : problem.at)
    if (!at.note.empty())
      diag.attachNote(locate(at)->getLoc()) << at.note;
  return failure();
}

/// Creates one instruction op for `op` at the builder's insertion point: ops
/// the program gives a token produce a !flexpipe.token (recorded in
/// `tokens`), and waits use it. Null for a wait of no known token.
static Operation *createInstruction(OpBuilder &b, Location loc,
                                    const sched::ProgOp &op,
                                    const sched::Program &program,
                                    llvm::DenseMap<int32_t, Value> &tokens) {
  const uint64_t stage = op.stage, mb = op.mb, peer = op.peer;
  Type token = op.token >= 0 ? TokenType::get(b.getContext()) : Type();
  Operation *created = [&]() -> Operation * {
    switch (op.kind) {
    case sched::OpKind::Fwd:
      return FwdOp::create(b, loc, stage, mb);
    case sched::OpKind::Bwd:
      return BwdOp::create(b, loc, stage, mb);
    case sched::OpKind::Igrad:
      return IgradOp::create(b, loc, stage, mb);
    case sched::OpKind::Wgrad:
      return WgradOp::create(b, loc, stage, mb);
    case sched::OpKind::SendAct:
      return SendActOp::create(b, loc, token, stage, mb, peer);
    case sched::OpKind::RecvAct:
      return RecvActOp::create(b, loc, token, stage, mb, peer);
    case sched::OpKind::SendGrad:
      return SendGradOp::create(b, loc, token, stage, mb, peer);
    case sched::OpKind::RecvGrad:
      return RecvGradOp::create(b, loc, token, stage, mb, peer);
    case sched::OpKind::AllGather: {
      const auto &group = program.groups[op.group];
      return AllGatherOp::create(
          b, loc, token, stage, mb,
          SmallVector<int64_t>(group.begin(), group.end()));
    }
    case sched::OpKind::Gather: {
      const auto &group = program.groups[op.group];
      return GatherOp::create(b, loc, token, stage, mb,
                              SmallVector<int64_t>(group.begin(), group.end()),
                              peer);
    }
    case sched::OpKind::Exec:
      if (op.inst < 0 ||
          op.inst >= static_cast<int32_t>(program.instructions.size()))
        return nullptr;
      return ExecOp::create(b, loc, token, program.instructions[op.inst], stage,
                            mb, /*attrs=*/nullptr);
    case sched::OpKind::Wait:
      if (!tokens.count(op.token))
        return nullptr;
      return WaitOp::create(b, loc, tokens.lookup(op.token));
    }
    return nullptr;
  }();
  if (created && op.token >= 0 && op.kind != sched::OpKind::Wait &&
      created->getNumResults() == 1)
    tokens[op.token] = created->getResult(0);
  return created;
}

ArrayAttr flexpipe::stageInfoAttr(Builder &b, const sched::Program &program) {
  if (program.stageMeta.empty())
    return {};
  SmallVector<Attribute> stages;
  for (const sched::StageMeta &meta : program.stageMeta)
    stages.push_back(StageInfoAttr::get(
        b.getContext(), b.getStringAttr(program.moduleNames[meta.module]),
        meta.layers, meta.first, meta.last));
  return b.getArrayAttr(stages);
}

ScheduleOp flexpipe::createSchedule(
    OpBuilder &b, Location loc, StringAttr name, const sched::Program &program,
    llvm::function_ref<Location(const sched::ProgOp &)> locate) {
  // The edges attribute only when the DAG is not the default chain.
  std::vector<std::pair<int32_t, int32_t>> chain;
  for (int32_t s = 0; s + 1 < program.numStages; ++s)
    chain.push_back({s, s + 1});
  DenseI64ArrayAttr edges;
  if (program.edges != chain) {
    SmallVector<int64_t> flat;
    for (auto [from, to] : program.edges)
      flat.append({from, to});
    edges = b.getDenseI64ArrayAttr(flat);
  }
  DenseI64ArrayAttr shared;
  if (!program.sharedStages.empty())
    shared = b.getDenseI64ArrayAttr(SmallVector<int64_t>(
        program.sharedStages.begin(), program.sharedStages.end()));
  auto schedule =
      ScheduleOp::create(b, loc, name, b.getI64IntegerAttr(program.numActors),
                         b.getI64IntegerAttr(program.numStages),
                         b.getI64IntegerAttr(program.numMicrobatches), edges,
                         shared, stageInfoAttr(b, program));
  Block &body = schedule.getBody().emplaceBlock();
  for (int32_t a = 0; a < program.numActors; ++a) {
    b.setInsertionPointToEnd(&body);
    auto actor = ActorOp::create(b, loc, b.getI64IntegerAttr(a));
    b.setInsertionPointToEnd(&actor.getBody().emplaceBlock());
    llvm::DenseMap<int32_t, Value> tokens;
    for (const sched::ProgOp &op : program.actors[a]) {
      // A wait is where the op whose token it completes is.
      auto token =
          op.kind == sched::OpKind::Wait ? tokens.find(op.token) : tokens.end();
      const Location at = !locate                 ? loc
                          : token != tokens.end() ? token->second.getLoc()
                                                  : locate(op);
      createInstruction(b, at, op, program, tokens);
    }
  }
  b.setInsertionPointAfter(schedule);
  return schedule;
}

void flexpipe::rewriteSchedule(ScheduleOp schedule, const ScheduleProgram &read,
                               const sched::Program &program) {
  // A prediction of another program would be wrong now.
  schedule->removeAttr("flexpipe.simulation");
  OpBuilder b(schedule.getContext());
  for (auto actor : schedule.getBody().getOps<ActorOp>()) {
    const int64_t id = static_cast<int64_t>(actor.getId());
    if (id < 0 || id >= program.numActors)
      continue;
    Block &body = actor.getBody().front();
    llvm::SmallPtrSet<Operation *, 32> kept;
    // Tokens by id: of the ops kept and of those created, for new waits.
    llvm::DenseMap<int32_t, Value> tokens;
    // Per (stage, micro-batch), where the first computation read of it is:
    // a new computation without a source (a split backward's weight
    // gradient) is there too.
    llvm::DenseMap<std::pair<int32_t, int32_t>, Location> cells;
    for (auto [entry, op] : llvm::zip(read.program.actors[id], read.ops[id]))
      if (sched::isWork(entry.kind))
        cells.try_emplace({entry.stage, entry.mb}, op->getLoc());
    for (const sched::ProgOp &op : program.actors[id]) {
      Operation *from = op.source >= 0 && op.source < static_cast<int32_t>(
                                                          read.ops[id].size())
                            ? read.ops[id][op.source]
                            : nullptr;
      // The op read for this entry moves when it is still what the entry
      // says (kind, and a token or none).
      const sched::ProgOp *was =
          from ? &read.program.actors[id][op.source] : nullptr;
      if (was && was->kind == op.kind && (was->token >= 0) == (op.token >= 0) &&
          !kept.contains(from)) {
        from->moveBefore(&body, body.end());
        kept.insert(from);
        if (op.token >= 0 && op.kind != sched::OpKind::Wait &&
            from->getNumResults() == 1)
          tokens[op.token] = from->getResult(0);
        continue;
      }
      // A new op takes the location of the op it was derived from.
      b.setInsertionPointToEnd(&body);
      auto cell =
          sched::isWork(op.kind) ? cells.find({op.stage, op.mb}) : cells.end();
      const Location at = from                  ? from->getLoc()
                          : cell != cells.end() ? cell->second
                                                : actor.getLoc();
      kept.insert(createInstruction(b, at, op, program, tokens));
    }
    for (Operation *old : read.ops[id])
      if (!kept.contains(old))
        old->erase();
  }
}

bool flexpipe::shouldOptimize(ScheduleOp schedule, StringRef optimization,
                              bool requestedOnly) {
  if (!requestedOnly)
    return true;
  auto requested = schedule->getAttrOfType<DictionaryAttr>("flexpipe.optimize");
  return requested && requested.contains(optimization);
}

void flexpipe::applySeparationRequest(DictionaryAttr requested,
                                      sched::SeparationOptions &options) {
  if (!requested)
    return;
  if (auto bound = requested.getAs<FloatAttr>("memory_bound"))
    options.memoryBound = bound.getValueAsDouble();
  if (auto rounds = requested.getAs<IntegerAttr>("max_rounds"))
    options.maxRounds = rounds.getInt();
}

void flexpipe::setSeparationFigures(ScheduleOp schedule,
                                    const sched::SeparationResult &result,
                                    StringRef unit) {
  Builder b(schedule.getContext());
  NamedAttrList fields;
  fields.append("time_before", b.getF64FloatAttr(result.fusedTime));
  fields.append("time", b.getF64FloatAttr(result.time));
  fields.append("peak_before", b.getF64FloatAttr(result.fusedPeak));
  fields.append("peak", b.getF64FloatAttr(result.peak));
  fields.append("memory_bound", b.getF64FloatAttr(result.memoryBound));
  fields.append("stashed", b.getI64IntegerAttr(result.stashed));
  fields.append("strategy", b.getStringAttr(result.strategy));
  fields.append("unit", b.getStringAttr(unit));
  schedule->setAttr("flexpipe.separation",
                    fields.getDictionary(b.getContext()));
}

sched::BubbleOptimizations
flexpipe::requestedOptimizations(DictionaryAttr requested,
                                 llvm::ThreadPoolInterface *pool) {
  sched::BubbleOptimizations opts;
  if (!requested)
    return opts;
  opts.splitBackward = requested.contains("split_backward");
  if (requested.contains("gradient_separation")) {
    const GradientSeparationPassOptions defaults;
    sched::SeparationOptions &separation = opts.separation.emplace();
    separation.memoryBound = defaults.memoryBound;
    separation.maxRounds = defaults.maxRounds;
    applySeparationRequest(requested, separation);
    separation.pool = pool;
  }
  if (requested.contains("async_comm"))
    opts.asyncLookahead = AsyncCommPassOptions().lookahead;
  return opts;
}

/// Reports what is wrong with the files a pass's options name, or with the
/// options together: a fault in a file (sched::FileError) where the file has
/// it (FILE:LINE:COLUMN, the line shown), anything else as optionError does.
static void reportInputError(MLIRContext *context, StringRef passName,
                             llvm::Error error) {
  llvm::handleAllErrors(
      std::move(error),
      [&](const sched::FileError &e) {
        emitError(FileLineColLoc::get(context, e.path, e.line, e.column))
            << "-" << passName << ": " << e.what;
      },
      [&](const llvm::ErrorInfoBase &e) {
        optionError(context) << "-" << passName << ": " << e.message();
      });
}

FailureOr<std::optional<sched::ModelConfig>>
flexpipe::passModel(MLIRContext *context, StringRef passName,
                    const sched::ModelConfig *shared, StringRef modelFile) {
  if (shared)
    return std::optional<sched::ModelConfig>(*shared);
  if (modelFile.empty())
    return std::optional<sched::ModelConfig>();
  sched::ModelConfig model;
  if (llvm::Error error = sched::loadModel(modelFile.str(), model)) {
    reportInputError(context, passName, std::move(error));
    return failure();
  }
  return std::optional<sched::ModelConfig>(std::move(model));
}

FailureOr<std::shared_ptr<const sched::CostInputs>>
flexpipe::passCostInputs(MLIRContext *context, StringRef passName,
                         std::shared_ptr<const sched::CostInputs> shared,
                         StringRef modelFile, StringRef clusterFile,
                         StringRef profileFile) {
  if (shared)
    return shared;
  auto inputs = std::make_shared<sched::CostInputs>();
  if (llvm::Error error = sched::loadCostInputs(
          modelFile.str(), clusterFile.str(), profileFile.str(), *inputs)) {
    reportInputError(context, passName, std::move(error));
    return failure();
  }
  return std::shared_ptr<const sched::CostInputs>(std::move(inputs));
}

LogicalResult flexpipe::checkTopLevel(ModuleOp root, StringRef schedulePass) {
  if (!schedulePass.empty() && root.getOps<ScheduleOp>().empty())
    if (auto specs = root.getOps<PipelineOp>(); !specs.empty())
      return (*specs.begin()).emitOpError()
             << "is a spec, and -" << schedulePass
             << " works on schedules (flexpipe.schedule): turn the spec into "
                "one first (-flexpipe-spec-to-schedule, or flexpipe-compile)";
  bool nested = false;
  root.walk([&](Operation *op) {
    if (!isa<PipelineOp, ScheduleOp>(op))
      return WalkResult::advance();
    if (op->getParentOp() != root.getOperation()) {
      op->emitOpError() << "is inside a nested module; FlexPipe's passes and "
                           "tools read the pipelines and schedules of the "
                           "top-level module only";
      nested = true;
    }
    return WalkResult::skip();
  });
  return failure(nested);
}

LogicalResult flexpipe::checkReplicas(MLIRContext *context, StringRef passName,
                                      int64_t dp) {
  if (dp >= 1 && dp <= kMaxActors)
    return success();
  return optionError(context) << "-" << passName << " needs dp from 1 to "
                              << kMaxActors << ", not " << dp;
}

InFlightDiagnostic flexpipe::optionError(MLIRContext *context) {
  return emitError(UnknownLoc::get(context));
}

FailureOr<sched::SimCosts>
flexpipe::resolveCosts(Operation *at, StringRef passName,
                       const sched::Program &program,
                       const sched::CostInputs &inputs, int64_t dp,
                       sched::TimeModel withoutFiles) {
  if (failed(checkReplicas(at->getContext(), passName, dp)))
    return failure();
  sched::SimCosts costs;
  if (llvm::Error error =
          sched::programCosts(program, inputs, dp, withoutFiles, costs)) {
    at->emitError() << llvm::toString(std::move(error));
    return failure();
  }
  return costs;
}
