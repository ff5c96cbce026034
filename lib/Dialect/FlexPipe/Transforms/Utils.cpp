//===- Utils.cpp - Between the dialect and the scheduling library ---------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Dialect/FlexPipe/Transforms/Utils.h"

#include "flexpipe/Scheduling/CostModelYAML.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <numeric>

using namespace mlir;
using namespace flexpipe;

static sched::StagePriority toStagePriority(StpAttr attr) {
  sched::StagePriority result;
  result.order = attr.getOrder() == StageOrder::DepthFirst
                     ? sched::StageOrder::DepthFirst
                     : sched::StageOrder::BreadthFirst;
  result.interval = attr.getInterval().value_or(0);
  return result;
}

static std::optional<sched::CompKind> builtinKind(StringRef name) {
  return llvm::StringSwitch<std::optional<sched::CompKind>>(name)
      .Case("fwd", sched::CompKind::Fwd)
      .Case("bwd", sched::CompKind::Bwd)
      .Case("igrad", sched::CompKind::Igrad)
      .Case("wgrad", sched::CompKind::Wgrad)
      .Default(std::nullopt);
}

FailureOr<sched::PipelineSpec> flexpipe::readPipelineSpec(PipelineOp pipeline) {
  sched::PipelineSpec spec;
  spec.actors = static_cast<int32_t>(pipeline.getActors());
  spec.microbatches = static_cast<int32_t>(pipeline.getMicrobatches());

  llvm::DenseMap<StringAttr, int32_t> moduleIndex;
  SmallVector<ModalityOp> modules;
  for (auto module : pipeline.getBody().getOps<ModalityOp>()) {
    moduleIndex[module.getSymNameAttr()] = static_cast<int32_t>(modules.size());
    modules.push_back(module);
  }
  auto indexOf = [&](FlatSymbolRefAttr symbol) {
    return symbol ? moduleIndex.lookup(symbol.getAttr()) : -1;
  };

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

  for (Operation &op : pipeline.getBody().front()) {
    if (isa<StageOp, InstructionOp>(op))
      return op.emitOpError()
             << "is not scheduled yet: the scheduler handles modules, shared "
                "stages, priorities, in-flight limits and dependencies between "
                "built-in instructions; registered stages and instructions "
                "come with plugin support";
    if (auto share = dyn_cast<ShareOp>(op)) {
      int32_t m = indexOf(share.getModuleAttr());
      llvm::Expected<sched::ModulePlacement> placed =
          modules[m].computePlacement();
      if (!placed)
        return share.emitOpError() << llvm::toString(placed.takeError());
      int64_t stage = static_cast<int64_t>(share.getStage());
      if (stage < 0)
        stage += placed->stagesPerDirection;
      spec.modules[m].shared.push_back(
          {stage, std::vector<int64_t>(share.getActorIds().begin(),
                                       share.getActorIds().end())});
    } else if (auto priority = dyn_cast<PriorityOp>(op)) {
      sched::PrioritySpec p;
      p.module = indexOf(priority.getModuleAttr());
      if (std::optional<ArrayRef<int64_t>> actors = priority.getActorIds())
        p.actors.assign(actors->begin(), actors->end());
      if (CttpAttr cttp = priority.getCttpAttr()) {
        p.cttp = cttp.getKind() == CttpKind::BwdFirst   ? sched::Cttp::BwdFirst
                 : cttp.getKind() == CttpKind::FwdFirst ? sched::Cttp::FwdFirst
                                                        : sched::Cttp::Interleaved;
        p.fwdUnit = cttp.getFwdUnit();
        p.bwdUnit = cttp.getBwdUnit();
      }
      if (StpAttr fstp = priority.getFstpAttr())
        p.fwd = toStagePriority(fstp);
      if (StpAttr bstp = priority.getBstpAttr())
        p.bwd = toStagePriority(bstp);
      spec.priorities.push_back(std::move(p));
    } else if (auto inflight = dyn_cast<InflightOp>(op)) {
      sched::InflightSpec in;
      in.module = indexOf(inflight.getModuleAttr());
      in.scope = inflight.getScope() == InflightScope::Global
                     ? sched::InflightScope::Global
                 : inflight.getScope() == InflightScope::PerStage
                     ? sched::InflightScope::PerStage
                     : sched::InflightScope::PerActor;
      int64_t numActors = spec.actors, numStages = pipeline.getNumStages();
      if (in.module >= 0) {
        numActors = static_cast<int64_t>(modules[in.module].getActorIds().size());
        llvm::Expected<sched::ModulePlacement> placed =
            modules[in.module].computePlacement();
        if (!placed)
          return inflight.emitOpError() << llvm::toString(placed.takeError());
        numStages = placed->numStages();
      }
      FailureOr<SmallVector<int64_t>> limits =
          inflight.evaluate(numActors, numStages, spec.microbatches);
      if (failed(limits))
        return failure();
      in.limits.assign(limits->begin(), limits->end());
      spec.inflight.push_back(std::move(in));
    } else if (auto dep = dyn_cast<DependencyOp>(op)) {
      std::optional<sched::CompKind> src = builtinKind(dep.getSrcInst());
      std::optional<sched::CompKind> dst = builtinKind(dep.getDstInst());
      ModalityOp srcModule = SymbolTable::lookupNearestSymbolFrom<ModalityOp>(
          dep, dep.getSrcStageAttr());
      ModalityOp dstModule = SymbolTable::lookupNearestSymbolFrom<ModalityOp>(
          dep, dep.getDstStageAttr());
      if (!src || !dst || !srcModule || !dstModule)
        return dep.emitOpError()
               << "is not scheduled yet: dependencies between registered "
                  "instructions or stages come with plugin support";
      auto normalize = [](ModalityOp module, int64_t index) -> int64_t {
        llvm::Expected<sched::ModulePlacement> placed = module.computePlacement();
        if (!placed) {
          llvm::consumeError(placed.takeError());
          return index;
        }
        return index < 0 ? index + placed->stagesPerDirection : index;
      };
      spec.dependencies.push_back(
          {*src, indexOf(dep.getSrcStageAttr()),
           normalize(srcModule, static_cast<int64_t>(*dep.getSrcIndex())), *dst,
           indexOf(dep.getDstStageAttr()),
           normalize(dstModule, static_cast<int64_t>(*dep.getDstIndex()))});
    }
  }
  return spec;
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
  if (ArrayAttr info = schedule.getStageInfoAttr()) {
    for (Attribute attr : info) {
      auto stage = cast<StageInfoAttr>(attr);
      sched::StageMeta meta;
      auto it = llvm::find(p.moduleNames, stage.getModule().str());
      meta.module = static_cast<int32_t>(it - p.moduleNames.begin());
      if (it == p.moduleNames.end())
        p.moduleNames.push_back(stage.getModule().str());
      meta.layers = stage.getLayers();
      meta.first = stage.getFirst();
      meta.last = stage.getLast();
      p.stageMeta.push_back(meta);
    }
  }

  llvm::DenseMap<Value, int32_t> tokens;
  std::map<std::vector<int32_t>, int32_t> groups;
  auto tokenOf = [&](Value token) {
    if (!token)
      return -1;
    return tokens.try_emplace(token, static_cast<int32_t>(tokens.size()))
        .first->second;
  };
  auto groupOf = [&](ArrayRef<int64_t> members) {
    std::vector<int32_t> key(members.begin(), members.end());
    std::sort(key.begin(), key.end());
    auto [it, inserted] =
        groups.try_emplace(key, static_cast<int32_t>(p.groups.size()));
    if (inserted)
      p.groups.push_back(key);
    return it->second;
  };

  for (auto actor : schedule.getBody().getOps<ActorOp>()) {
    const int64_t id = static_cast<int64_t>(actor.getId());
    if (id < 0 || id >= p.numActors)
      continue;
    for (Operation &op : actor.getBody().front()) {
      sched::ProgOp entry{sched::OpKind::Wait};
      entry.source = static_cast<int32_t>(result.ops[id].size());
      if (auto inst = dyn_cast<InstructionOpInterface>(op)) {
        entry.stage = static_cast<int32_t>(inst.getStageId());
        entry.mb = static_cast<int32_t>(inst.getMicrobatchId());
        entry.peer = static_cast<int32_t>(inst.getPeerActor());
      }
      llvm::TypeSwitch<Operation *>(&op)
          .Case([&](FwdOp) { entry.kind = sched::OpKind::Fwd; })
          .Case([&](BwdOp) { entry.kind = sched::OpKind::Bwd; })
          .Case([&](IgradOp) { entry.kind = sched::OpKind::Igrad; })
          .Case([&](WgradOp) { entry.kind = sched::OpKind::Wgrad; })
          .Case([&](SendActOp o) {
            entry.kind = sched::OpKind::SendAct;
            entry.token = tokenOf(o.getToken());
          })
          .Case([&](RecvActOp o) {
            entry.kind = sched::OpKind::RecvAct;
            entry.token = tokenOf(o.getToken());
          })
          .Case([&](SendGradOp o) {
            entry.kind = sched::OpKind::SendGrad;
            entry.token = tokenOf(o.getToken());
          })
          .Case([&](RecvGradOp o) {
            entry.kind = sched::OpKind::RecvGrad;
            entry.token = tokenOf(o.getToken());
          })
          .Case([&](AllGatherOp o) {
            entry.kind = sched::OpKind::AllGather;
            entry.group = groupOf(o.getGroup());
            entry.token = tokenOf(o.getToken());
          })
          .Case([&](GatherOp o) {
            entry.kind = sched::OpKind::Gather;
            entry.group = groupOf(o.getGroup());
            entry.peer = static_cast<int32_t>(o.getRoot());
            entry.token = tokenOf(o.getToken());
          })
          .Case([&](ExecOp o) {
            entry.kind = sched::OpKind::Exec;
            entry.token = tokenOf(o.getToken());
          })
          .Case([&](WaitOp o) {
            entry.kind = sched::OpKind::Wait;
            entry.token = tokenOf(o.getToken());
          });
      p.actors[id].push_back(entry);
      result.ops[id].push_back(&op);
    }
  }
  return result;
}

Operation *flexpipe::createInstruction(OpBuilder &b, Location loc,
                                       const sched::ProgOp &op,
                                       const sched::Program &program) {
  const uint64_t stage = op.stage, mb = op.mb, peer = op.peer;
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
    return SendActOp::create(b, loc, Type(), stage, mb, peer);
  case sched::OpKind::RecvAct:
    return RecvActOp::create(b, loc, Type(), stage, mb, peer);
  case sched::OpKind::SendGrad:
    return SendGradOp::create(b, loc, Type(), stage, mb, peer);
  case sched::OpKind::RecvGrad:
    return RecvGradOp::create(b, loc, Type(), stage, mb, peer);
  case sched::OpKind::AllGather: {
    const auto &group = program.groups[op.group];
    return AllGatherOp::create(
        b, loc, Type(), stage, mb,
        SmallVector<int64_t>(group.begin(), group.end()));
  }
  case sched::OpKind::Gather: {
    const auto &group = program.groups[op.group];
    return GatherOp::create(b, loc, Type(), stage, mb,
                            SmallVector<int64_t>(group.begin(), group.end()),
                            peer);
  }
  case sched::OpKind::Exec:
  case sched::OpKind::Wait:
    break;
  }
  return nullptr;
}

void flexpipe::rewriteSchedule(ScheduleOp schedule, const ScheduleProgram &read,
                               const sched::Program &program) {
  OpBuilder b(schedule.getContext());
  for (auto actor : schedule.getBody().getOps<ActorOp>()) {
    const int64_t id = static_cast<int64_t>(actor.getId());
    if (id < 0 || id >= program.numActors)
      continue;
    Block &body = actor.getBody().front();
    llvm::SmallPtrSet<Operation *, 32> kept;
    for (const sched::ProgOp &op : program.actors[id]) {
      if (op.source >= 0 &&
          op.source < static_cast<int32_t>(read.ops[id].size()) &&
          read.program.actors[id][op.source].kind == op.kind &&
          !kept.contains(read.ops[id][op.source])) {
        Operation *existing = read.ops[id][op.source];
        existing->moveBefore(&body, body.end());
        kept.insert(existing);
        continue;
      }
      b.setInsertionPointToEnd(&body);
      kept.insert(createInstruction(b, actor.getLoc(), op, program));
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
  auto requested =
      schedule->getAttrOfType<DictionaryAttr>("flexpipe.optimize");
  return requested && requested.contains(optimization);
}

FailureOr<sched::SimCosts>
flexpipe::resolveCosts(Operation *at, const sched::Program &program,
                       StringRef passName, StringRef timeModel,
                       StringRef modelFile, StringRef clusterFile,
                       StringRef profileFile) {
  if (timeModel != "step" && timeModel != "cost") {
    at->emitError() << "unknown time model '" << timeModel << "' for -"
                    << passName << "; expected step or cost";
    return failure();
  }
  if (modelFile.empty() != clusterFile.empty()) {
    at->emitError() << "-" << passName
                    << " needs both model and cluster files, or neither";
    return failure();
  }
  sched::ModelConfig model;
  sched::ClusterConfig cluster;
  sched::Profile profile;
  std::vector<std::string> problems;
  if (!modelFile.empty()) {
    problems.push_back(sched::loadModel(modelFile.str(), model));
    problems.push_back(sched::loadCluster(clusterFile.str(), cluster));
  }
  if (!profileFile.empty())
    problems.push_back(sched::loadProfile(profileFile.str(), profile));
  for (const std::string &problem : problems)
    if (!problem.empty()) {
      at->emitError() << problem;
      return failure();
    }
  sched::SimCosts costs;
  std::string error;
  if (!modelFile.empty()) {
    std::vector<int64_t> devices(program.numActors);
    std::iota(devices.begin(), devices.end(), 0);
    error = sched::modelCosts(program, model, cluster,
                              profileFile.empty() ? nullptr : &profile,
                              devices, costs);
  } else if (!profileFile.empty()) {
    error = sched::profileCosts(program, profile, costs);
  } else {
    costs = timeModel == "cost" ? sched::layerCosts(program)
                                : sched::unitCosts(program);
  }
  if (!error.empty()) {
    at->emitError() << error;
    return failure();
  }
  return costs;
}
