//===- RuntimeDescription.cpp - A schedule as the runtime reads it --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "RuntimeDescription.h"

#include "flexpipe/Runtime/Schedule.h"
#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Support/Hash.h"
#include "flexpipe/Support/InputLimits.h"
#include "flexpipe/Support/StageGraph.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>
#include <map>
#include <set>

using namespace mlir;
using namespace flexpipe;

namespace {

/// "[a, b, ...]".
std::string listText(ArrayRef<int64_t> values) {
  std::string text = "[";
  for (auto [i, v] : llvm::enumerate(values))
    text += (i ? ", " : "") + std::to_string(v);
  return text + "]";
}

/// The attributes of `exec` as the runtime decodes them: `KEY=K:VALUE`
/// entries separated by spaces, K one of s, i, f, b, u; or a diagnostic.
FailureOr<std::string> encodeAttributes(ExecOp exec) {
  std::string encoded;
  DictionaryAttr attrs = exec.getAttrsAttr();
  if (!attrs)
    return encoded;
  for (NamedAttribute named : attrs) {
    std::string value;
    char kind;
    Attribute attr = named.getValue();
    if (auto text = dyn_cast<StringAttr>(attr)) {
      kind = 's';
      value = text.getValue().str();
    } else if (auto flag = dyn_cast<BoolAttr>(attr)) {
      kind = 'b';
      value = flag.getValue() ? "true" : "false";
    } else if (auto integer = dyn_cast<IntegerAttr>(attr);
               integer && !isa<FloatType>(integer.getType())) {
      kind = 'i';
      const APInt &v = integer.getValue();
      const bool isUnsigned = integer.getType().isUnsignedInteger();
      if (isUnsigned ? v.getActiveBits() > 63 : v.getSignificantBits() > 64)
        return exec.emitOpError()
               << "has attribute '" << named.getName().getValue()
               << "' = " << attr
               << ", which does not fit in 64 signed bits; the runtime passes "
                  "integers as int64_t";
      value = std::to_string(isUnsigned ? static_cast<int64_t>(v.getZExtValue())
                                        : v.getSExtValue());
    } else if (auto real = dyn_cast<FloatAttr>(attr)) {
      kind = 'f';
      char buffer[64];
      std::snprintf(buffer, sizeof(buffer), "%.17g", real.getValueAsDouble());
      value = buffer;
    } else if (isa<UnitAttr>(attr)) {
      kind = 'u';
    } else {
      return exec.emitOpError()
             << "has attribute '" << named.getName().getValue()
             << "' = " << attr
             << ", which the runtime cannot pass to operation @"
             << exec.getInstruction()
             << "; runtime attributes are strings, integers, floats, "
                "booleans and unit attributes";
    }
    if (!encoded.empty())
      encoded += ' ';
    encoded +=
        rt::encodeOpAttribute(named.getName().getValue().str(), kind, value);
  }
  return encoded;
}

/// Every flexpipe.exec of `schedule` with what the runtime needs of it, or a
/// diagnostic. `noOutputs` are the stages whose outputs operations do not
/// see (shared and sync stages).
LogicalResult analyzeExecs(ScheduleOp schedule,
                           const llvm::SmallDenseSet<int64_t> &noOutputs,
                           ExecInstances &instances) {
  const auto numMicrobatches = static_cast<int64_t>(schedule.getMicrobatches());
  for (auto actor : schedule.getBody().getOps<ActorOp>()) {
    // Instances of one instruction on one stage, and the forwards so far.
    std::map<std::pair<std::string, int64_t>, SmallVector<ExecOp>> groups;
    std::set<std::pair<int64_t, int64_t>> forwarded;
    for (Operation &op : actor.getBody().front()) {
      if (auto fwd = dyn_cast<FwdOp>(op)) {
        forwarded.insert({static_cast<int64_t>(fwd.getStage()),
                          static_cast<int64_t>(fwd.getMb())});
        continue;
      }
      auto exec = dyn_cast<ExecOp>(op);
      if (!exec)
        continue;
      if (!rt::isOperationName(exec.getInstruction().str()))
        return exec.emitOpError()
               << "runs instruction '" << exec.getInstruction()
               << "', a name the runtime cannot bind an operation to; name the "
                  "instruction with letters, digits, '_', '.' and '-', "
                  "starting with a letter or '_'";
      FailureOr<std::string> attrs = encodeAttributes(exec);
      if (failed(attrs))
        return failure();
      ExecInstance &instance = instances[exec];
      instance.attrs = std::move(*attrs);
      const auto s = static_cast<int64_t>(exec.getStage());
      for (int64_t mb = static_cast<int64_t>(exec.getMb());
           mb < numMicrobatches && !noOutputs.contains(s); ++mb)
        if (forwarded.count({s, mb}))
          instance.outputs.push_back(mb);
      groups[{exec.getInstruction().str(), s}].push_back(exec);
    }
    for (auto &[key, execs] : groups) {
      llvm::sort(execs,
                 [](ExecOp a, ExecOp b) { return a.getMb() < b.getMb(); });
      // The last instance covers its stage's micro-batches up to the last
      // this actor forwards (a bidirectional pipeline's copy of the stage
      // here runs only its direction's), or to the end.
      const int64_t s = key.second;
      int64_t stageEnd = numMicrobatches;
      auto after =
          forwarded.lower_bound({s + 1, std::numeric_limits<int64_t>::min()});
      if (after != forwarded.begin() && std::prev(after)->first == s)
        stageEnd = std::prev(after)->second + 1;
      for (auto [i, exec] : llvm::enumerate(execs)) {
        const auto mb = static_cast<int64_t>(exec.getMb());
        const int64_t end = i + 1 < execs.size()
                                ? static_cast<int64_t>(execs[i + 1].getMb())
                                : std::max(mb + 1, stageEnd);
        ExecInstance &instance = instances[exec];
        instance.count = end - mb;
        llvm::erase_if(instance.outputs, [&](int64_t m) { return m >= end; });
      }
    }
  }
  return success();
}

/// The description's execs, one per instance, by actor and program order.
std::vector<rt::ScheduleDesc::Exec> execsOf(ScheduleOp schedule,
                                            const ExecInstances &instances) {
  std::vector<rt::ScheduleDesc::Exec> execs;
  for (auto actor : schedule.getBody().getOps<ActorOp>())
    for (auto exec : actor.getBody().getOps<ExecOp>()) {
      const ExecInstance &instance = instances.at(exec);
      rt::ScheduleDesc::Exec &e = execs.emplace_back();
      e.name = exec.getInstruction().str();
      e.stage = static_cast<int>(exec.getStage());
      e.actor = static_cast<int>(actor.getId());
      e.mb = static_cast<int64_t>(exec.getMb());
      e.count = instance.count;
      e.outputs.assign(instance.outputs.begin(), instance.outputs.end());
      e.attrs = instance.attrs;
    }
  // Actors in id order (the description's rule), whatever order the
  // schedule lists their regions in.
  llvm::stable_sort(
      execs, [](const rt::ScheduleDesc::Exec &x,
                const rt::ScheduleDesc::Exec &y) { return x.actor < y.actor; });
  return execs;
}

/// The description of `desc` with its header: a hash that covers the body
/// and every actor's program (the ranks compare it), and the check sum of
/// the body alone (the reader recomputes it: a description changed after it
/// was written is refused).
std::string withHash(ScheduleOp schedule, const rt::ScheduleDesc &desc) {
  const std::string body = rt::formatScheduleBody(desc);
  std::string printed;
  llvm::raw_string_ostream os(printed);
  schedule->print(os, OpPrintingFlags().printGenericOpForm());
  return rt::withScheduleHeader(body, fnv1a(printed, fnv1a(body)) >> 1);
}

/// Whether the ranks will start on `description`: the runtime's own reader
/// accepts it (on every backend; a rank refuses what it refuses), and
/// `backend` runs its stages and can give every actor's ranks the message
/// channels the runtime opens for it (rt::tooManyChannels). A diagnostic at the
/// schedule or at the first actor it cannot serve.
LogicalResult checkRanksRead(ScheduleOp schedule,
                             const std::string &description,
                             RuntimeBackend backend) {
  // What the ranks will read (the reader completes what the writer leaves
  // implicit, such as a stage's one actor).
  rt::ScheduleDesc desc;
  if (std::string error = rt::parseSchedule(description, desc); !error.empty())
    return schedule.emitOpError()
           << "has a runtime description its reader refuses: " << error;
  if (backend != RuntimeBackend::Cuda)
    return success();
  // What the CUDA device does not run (CudaDevice's vocabParallel() and
  // twoTower(), which the ranks check at start-up): said here, before the
  // ranks are built.
  if (std::string what = rt::unsupportedStages(desc, /*vocabParallel=*/false,
                                               /*twoTower=*/false);
      !what.empty())
    return schedule.emitOpError()
           << "has " << what
           << ", which the cuda backend does not run; compile it with "
              "--backend=cpu";
  const std::vector<int> channels = rt::channelsPerActor(desc);
  for (auto actor : schedule.getBody().getOps<ActorOp>()) {
    const auto id = static_cast<size_t>(actor.getId());
    if (id >= channels.size())
      continue;
    if (std::string error = rt::tooManyChannels(channels[id]); !error.empty())
      return actor.emitOpError()
             << "on the cuda backend: actor " << id << " " << error;
  }
  return success();
}

/// The runtime's sizes of a model file's module.
void setGptSizes(rt::GptConfig &config, const sched::ModuleModel &m) {
  config.vocab = m.vocab;
  config.seq = m.seq;
  config.hidden = m.hidden;
  config.heads = m.heads;
  config.layers = m.layers;
}

/// The description's sizes of `schedule`.
rt::ScheduleDesc descSizes(ScheduleOp schedule, int64_t dp,
                           std::vector<rt::ScheduleDesc::Exec> execs) {
  rt::ScheduleDesc desc;
  desc.name = schedule.getSymName().str();
  desc.actors = static_cast<int>(schedule.getActors());
  desc.stages = static_cast<int>(schedule.getStages());
  desc.microbatches = static_cast<int>(schedule.getMicrobatches());
  desc.dp = static_cast<int>(dp);
  desc.stage.assign(desc.stages, {});
  for (auto [from, to] : schedule.getEdgeList())
    desc.edges.push_back({static_cast<int>(from), static_cast<int>(to)});
  desc.execs = std::move(execs);
  if (auto predicted =
          schedule->getAttrOfType<DenseF64ArrayAttr>(kPredictedPeakAttr);
      predicted && predicted.size() == desc.actors)
    desc.predictedPeak.assign(predicted.asArrayRef().begin(),
                              predicted.asArrayRef().end());
  return desc;
}

/// What describe() found out about a schedule before the model decides.
struct Analysis {
  ArrayAttr info;
  llvm::SmallDenseSet<int64_t> shared;
  /// Registered stages that join towers: 0 layers, neither first nor last,
  /// not shared, and a module no computing stage belongs to.
  SmallVector<int64_t> syncStages;
  /// The modules of the other stages, in order of first appearance.
  SmallVector<StringAttr> modules;
  /// The actors that run each stage's computations, in ascending order.
  std::vector<std::set<int64_t>> actorsOf;

  /// A vocabulary-parallel LM head: shared, 0 layers, last and not first.
  bool isVocabHead(int64_t s) const {
    auto stage = cast<StageInfoAttr>(info[s]);
    return shared.contains(s) && stage.getLayers() == 0 && stage.getLast() &&
           !stage.getFirst();
  }
};

StageInfoAttr stageInfo(const Analysis &a, int64_t s) {
  return cast<StageInfoAttr>(a.info[s]);
}

/// The towers of a two-tower model, as describeTowers checks and writes
/// them.
struct Towers {
  int64_t sync = -1;               ///< the registered sync stage
  SmallVector<StringRef, 2> names; ///< in the model file's order
  std::vector<int64_t> towerOf;    ///< per stage (-1: the sync stage)
  std::vector<int64_t> firstBlock; ///< per stage, within its tower
  int64_t lastOf[2] = {-1, -1};    ///< each tower's last stage
  int64_t lastActor[2] = {-1, -1}; ///< the actor of each tower's last stage
  SmallVector<int64_t> group;      ///< the two last actors, ascending
};

/// Two modules and one sync stage, no shared stages, and a model file with
/// exactly the two towers, each embedding tokens without an LM head.
LogicalResult checkTowerModel(ScheduleOp schedule, const Analysis &a,
                              const sched::ModelConfig *model, Towers &towers) {
  if (a.modules.size() != 2 || a.syncStages.size() != 1) {
    InFlightDiagnostic diag = schedule.emitOpError() << "has modules";
    for (auto [i, m] : llvm::enumerate(a.modules))
      diag << (i ? ", '" : " '") << m.getValue() << "'";
    diag << " and " << a.syncStages.size()
         << " registered sync stage(s) (0 layers, neither first nor last, a "
            "module of their own); the runtime runs one GPT module, or two "
            "towers joined by one sync stage";
    return diag;
  }
  towers.sync = a.syncStages.front();
  if (!a.shared.empty())
    return schedule.emitOpError()
           << "shares stages between actors in a two-tower model; the "
              "runtime's towers have no vocabulary-parallel stages";
  if (!model)
    return schedule.emitOpError()
           << "is a two-tower model (modules '" << a.modules[0].getValue()
           << "' and '" << a.modules[1].getValue()
           << "'); give the lowering a model file with their sizes (--model)";
  for (const sched::ModuleModel &m : model->modules)
    towers.names.push_back(m.name);
  if (towers.names.size() != 2 || !llvm::all_of(a.modules, [&](StringAttr m) {
        return llvm::is_contained(towers.names, m.getValue());
      }))
    return schedule.emitOpError()
           << "needs a model file with exactly its two towers, '"
           << a.modules[0].getValue() << "' and '" << a.modules[1].getValue()
           << "'";
  for (const sched::ModuleModel &m : model->modules) {
    if (m.vocab <= 0 || m.lmHead)
      return schedule.emitOpError()
             << "needs tower '" << m.name
             << "' with a token vocabulary and no LM head in the model file "
                "(vocab: V, lm_head: false): a tower embeds tokens and ends "
                "in a projection";
    if (llvm::any_of(m.name, [](char c) { return std::isspace(c); }))
      return schedule.emitOpError()
             << "has tower '" << m.name
             << "', whose name the schedule description cannot carry; name "
                "it without spaces";
  }
  return success();
}

/// Each tower is one chain of stages along single edges from its one first
/// stage to its one last stage, with the model file's layers; the last
/// stages run on one actor each, two different ones.
LogicalResult chainTowers(ScheduleOp schedule, const Analysis &a,
                          const sched::ModelConfig &model, Towers &towers) {
  const int64_t numStages = static_cast<int64_t>(schedule.getStages());
  const int64_t sync = towers.sync;
  const SmallVector<StringRef, 2> &names = towers.names;
  std::vector<int64_t> &towerOf = towers.towerOf;
  towerOf.assign(numStages, -1);
  for (int64_t s = 0; s < numStages; ++s)
    if (s != sync)
      towerOf[s] = stageInfo(a, s).getModule().getValue() == names[0] ? 0 : 1;
  const SmallVector<std::pair<int64_t, int64_t>> edges = schedule.getEdgeList();
  for (auto [from, to] : edges) {
    if (from == sync || to == sync)
      return schedule.emitOpError()
             << "has an edge " << from << " -> " << to << " at sync stage "
             << sync << ", which joins the towers through its all-gather only";
    if (towerOf[from] != towerOf[to])
      return schedule.emitOpError()
             << "connects stage " << from << " of tower '"
             << names[towerOf[from]] << "' to stage " << to << " of tower '"
             << names[towerOf[to]]
             << "'; the towers meet only at the sync stage's all-gather";
  }
  const StageGraph<int64_t> graph(numStages, edges);
  const auto &succs = graph.succs;
  const auto &preds = graph.preds;
  towers.firstBlock.assign(numStages, 0);
  for (int64_t t = 0; t < 2; ++t) {
    SmallVector<int64_t> firsts, lasts, members;
    for (int64_t s = 0; s < numStages; ++s) {
      if (towerOf[s] != t)
        continue;
      members.push_back(s);
      if (stageInfo(a, s).getFirst())
        firsts.push_back(s);
      if (stageInfo(a, s).getLast())
        lasts.push_back(s);
    }
    if (firsts.size() != 1 || lasts.size() != 1)
      return schedule.emitOpError()
             << "has " << firsts.size() << " first and " << lasts.size()
             << " last stage(s) in tower '" << names[t]
             << "'; the runtime runs each tower as one pipeline, with one "
                "first and one last stage";
    int64_t s = firsts.front(), layers = 0, length = 0;
    for (;; s = succs[s].front()) {
      ++length;
      towers.firstBlock[s] = layers;
      layers += stageInfo(a, s).getLayers();
      if (s == lasts.front() || succs[s].size() != 1 ||
          preds[succs[s].front()].size() != 1)
        break;
    }
    if (s != lasts.front() || !succs[s].empty() ||
        length != static_cast<int64_t>(members.size()))
      return schedule.emitOpError()
             << "does not chain the stages of tower '" << names[t]
             << "' from its first stage " << firsts.front()
             << " to its last stage " << lasts.front()
             << " along single edges; the runtime runs each tower as one "
                "pipeline";
    if (layers != model.modules[t].layers)
      return schedule.emitOpError()
             << "holds " << layers << " layers in tower '" << names[t]
             << "' but the model file's has " << model.modules[t].layers;
    const int64_t last = towers.lastOf[t] = lasts.front();
    if (a.actorsOf[last].size() != 1)
      return schedule.emitOpError()
             << "runs the last stage " << last << " of tower '" << names[t]
             << "' on " << a.actorsOf[last].size()
             << " actors; the sync stage's all-gather needs it on one";
    towers.lastActor[t] = *a.actorsOf[last].begin();
  }
  if (towers.lastActor[0] == towers.lastActor[1])
    return schedule.emitOpError()
           << "runs the last stages of both towers on actor "
           << towers.lastActor[0]
           << "; the sync stage's all-gather needs them on two actors";
  towers.group = {std::min(towers.lastActor[0], towers.lastActor[1]),
                  std::max(towers.lastActor[0], towers.lastActor[1])};
  return success();
}

/// Per member of the group, in program order: the all-gather of a
/// micro-batch after its tower's last forward, completed (blocking, or the
/// wait of its token) before that stage's backward.
LogicalResult checkSyncGathers(ScheduleOp schedule, const Towers &towers) {
  const int64_t sync = towers.sync;
  for (auto actor : schedule.getBody().getOps<ActorOp>()) {
    const auto id = static_cast<int64_t>(actor.getId());
    const int64_t mine =
        id == towers.lastActor[0] ? towers.lastOf[0] : towers.lastOf[1];
    llvm::DenseSet<int64_t> forwarded;
    llvm::DenseMap<int64_t, bool> gathered; // mb -> completed
    llvm::DenseMap<Value, int64_t> pending; // token -> mb
    llvm::DenseSet<int64_t> anywhere;       // mbs this actor gathers at all
    SmallVector<AllGatherOp> syncGathers;   // in program order
    for (auto gather : actor.getBody().getOps<AllGatherOp>())
      if (static_cast<int64_t>(gather.getStage()) == sync) {
        syncGathers.push_back(gather);
        anywhere.insert(static_cast<int64_t>(gather.getMb()));
      }
    for (Operation &op : actor.getBody().front()) {
      if (auto wait = dyn_cast<WaitOp>(op)) {
        if (auto it = pending.find(wait.getToken()); it != pending.end())
          gathered[it->second] = true;
        continue;
      }
      auto inst = dyn_cast<InstructionOpInterface>(op);
      if (!inst)
        continue;
      const int64_t s = inst.getStageId(), mb = inst.getMicrobatchId();
      if (auto gather = dyn_cast<AllGatherOp>(op); gather && s == sync) {
        if (!llvm::equal(gather.getGroup(), towers.group))
          return gather.emitOpError()
                 << "gathers in group " << listText(gather.getGroup())
                 << ", but sync stage " << sync
                 << " joins the actors of the towers' last stages, "
                 << listText(towers.group) << "; list exactly them, in "
                 << "ascending order";
        if (!forwarded.contains(mb))
          return gather.emitOpError()
                 << "comes before the fwd of stage " << mine << " mb " << mb
                 << " on actor " << id
                 << ", whose embeddings it exchanges; gather after it";
        if (gathered.count(mb))
          return gather.emitOpError()
                 << "repeats the all-gather of sync stage " << sync << " mb "
                 << mb << " on actor " << id;
        gathered[mb] = !gather.getToken();
        if (Value token = gather.getToken())
          pending[token] = mb;
        continue;
      }
      if (!inst.isCompute() || s != mine)
        continue;
      if (isa<FwdOp>(op))
        forwarded.insert(mb);
      // Gathers of other micro-batches but none of this one: one gather
      // stands for several (the spec's prev(N)).
      if (isa<BwdOp, IgradOp>(op) && !anywhere.empty() &&
          !anywhere.contains(mb)) {
        InFlightDiagnostic diag =
            op.emitOpError()
            << "has no all-gather of sync stage " << sync << " mb " << mb
            << " on actor " << id
            << " before it: the runtime exchanges the towers' embeddings "
               "one micro-batch per all-gather, and an instruction that "
               "groups several (prev(N) or next(N) above 1) is not "
               "supported yet; give the sync instruction prev(1) next(1)";
        diag.attachNote(syncGathers.front().getLoc())
            << "the sync stage's all-gathers (actor " << id
            << " runs one for micro-batch " << syncGathers.front().getMb()
            << ", none for " << mb << ")";
        return diag;
      }
      if (isa<BwdOp, IgradOp>(op) && !gathered.lookup(mb)) {
        InFlightDiagnostic diag =
            op.emitOpError()
            << "runs before the all-gather of sync stage " << sync << " mb "
            << mb << " has "
            << (gathered.count(mb) ? "completed (wait for its token)" : "run")
            << " on actor " << id
            << "; the gradient of the tower's embeddings comes from it";
        // Where the spec's instruction released this backward through an
        // earlier micro-batch's all-gather (next(N) above 1), say so there.
        auto gather = llvm::find_if(syncGathers, [&](AllGatherOp g) {
          return static_cast<int64_t>(g.getMb()) == mb;
        });
        if (gather != syncGathers.end())
          diag.attachNote(gather->getLoc())
              << "the all-gather of micro-batch " << mb
              << (gathered.count(mb) ? " is waited for" : " comes")
              << " after that backward on actor " << id
              << ": the backward needs it first (a dependency from the "
                 "sync instruction to the tower's last backward, with "
                 "next(1): one all-gather releasing the backwards of "
                 "several micro-batches, next(N) above 1, is not "
                 "supported yet)";
        return diag;
      }
    }
  }
  return success();
}

/// The two-tower model (docs/Runtime.md): two modules, each one pipeline of
/// stages from its first to its last, joined by the all-gather of one
/// registered sync stage among the actors of the towers' last stages.
FailureOr<rt::ScheduleDesc>
describeTowers(ScheduleOp schedule, const Analysis &a,
               const sched::ModelConfig *model, int64_t dp, int64_t seed,
               std::vector<rt::ScheduleDesc::Exec> execs) {
  Towers towers;
  if (failed(checkTowerModel(schedule, a, model, towers)) ||
      failed(chainTowers(schedule, a, *model, towers)) ||
      failed(checkSyncGathers(schedule, towers)))
    return failure();
  rt::ScheduleDesc desc = descSizes(schedule, dp, std::move(execs));
  desc.model.microBatch = model->microBatchSize;
  if (model->microBatchSize < 2)
    schedule.emitWarning()
        << "trains two towers on micro-batches of one sample "
           "(micro_batch_size 1 in the model file): the contrastive loss of "
           "one pair is 0 whatever the towers compute, so they get no "
           "gradient and learn nothing; use 2 or more";
  desc.model.seed = static_cast<uint64_t>(seed);
  desc.model.embed =
      std::min(model->modules[0].hidden, model->modules[1].hidden);
  for (const sched::ModuleModel &m : model->modules) {
    setGptSizes(desc.towers.emplace_back(), m);
    desc.towers.back().prefix = m.name + ".";
  }
  for (int64_t s = 0; s < desc.stages; ++s) {
    rt::ScheduleDesc::Stage &stage = desc.stage[s];
    if (s == towers.sync) {
      stage.actor = static_cast<int>(towers.group[0]);
      stage.actors = {stage.actor, static_cast<int>(towers.group[1])};
      stage.sync = true;
      continue;
    }
    auto info = stageInfo(a, s);
    stage.actor = static_cast<int>(*a.actorsOf[s].begin());
    stage.actors = {stage.actor};
    stage.firstBlock = static_cast<int>(towers.firstBlock[s]);
    stage.blocks = static_cast<int>(info.getLayers());
    stage.first = info.getFirst();
    stage.last = info.getLast();
    stage.tower = static_cast<int>(towers.towerOf[s]);
  }
  return desc;
}

/// Shared stages (the runtime runs the vocabulary-parallel token embedding,
/// 0 layers and first, and LM head + loss, 0 layers and last, split over the
/// vocabulary between the actors that run them), and the modules and
/// registered sync stages.
LogicalResult classifyStages(ScheduleOp schedule, Analysis &a) {
  const int64_t numStages = static_cast<int64_t>(schedule.getStages());
  if (std::optional<ArrayRef<int64_t>> list = schedule.getShared())
    a.shared.insert(list->begin(), list->end());
  for (int64_t s : a.shared) {
    auto stage = stageInfo(a, s);
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
    if (a.shared.contains(from) && a.shared.contains(to))
      return schedule.emitOpError()
             << "connects shared stages " << from << " and " << to
             << "; a vocabulary-parallel embedding and head need a "
                "transformer stage between them";
    if (a.isVocabHead(to) && stageInfo(a, from).getLast())
      return schedule.emitOpError()
             << "feeds vocabulary-parallel head " << to << " from stage "
             << from << ", which is marked last and so holds a head itself";
  }
  // Registered sync stages: 0 layers, neither first nor last, not shared,
  // and a module of their own (a 0-layer middle stage of a module that
  // computes is an ordinary, empty stage).
  auto maybeSync = [&](int64_t s) {
    auto stage = stageInfo(a, s);
    return !a.shared.contains(s) && stage.getLayers() == 0 &&
           !stage.getFirst() && !stage.getLast();
  };
  for (int64_t s = 0; s < numStages; ++s)
    if (!maybeSync(s) &&
        !llvm::is_contained(a.modules, stageInfo(a, s).getModule()))
      a.modules.push_back(stageInfo(a, s).getModule());
  for (int64_t s = 0; s < numStages; ++s)
    if (maybeSync(s) &&
        !llvm::is_contained(a.modules, stageInfo(a, s).getModule()))
      a.syncStages.push_back(s);
  return success();
}

/// The actors that run each stage's computations; gathers, computations of
/// sync stages and all-gathers the runtime does not run are errors.
LogicalResult collectActors(ScheduleOp schedule, Analysis &a) {
  auto isSync = [&](int64_t s) { return llvm::is_contained(a.syncStages, s); };
  a.actorsOf.resize(static_cast<size_t>(schedule.getStages()));
  for (auto actor : schedule.getBody().getOps<ActorOp>())
    for (Operation &op : actor.getBody().front()) {
      auto inst = dyn_cast<InstructionOpInterface>(op);
      // (A sync stage beside one module is no two-tower join: the generic
      // refusal below.)
      if (isa<GatherOp>(op) && isSync(inst.getStageId()) &&
          a.modules.size() > 1)
        return op.emitOpError()
               << "gathers sync stage " << inst.getStageId()
               << " to one actor, but the contrastive loss needs both towers' "
                  "embeddings on both towers' last actors; use "
                  "flexpipe.all_gather";
      if (isa<GatherOp>(op))
        return op.emitOpError()
               << "cannot be lowered yet: the runtime runs computations, "
                  "point-to-point transfers and the all-gathers of "
                  "vocabulary-parallel heads and of two-tower sync stages";
      if (inst && inst.isCompute() && isSync(inst.getStageId()))
        return op.emitOpError()
               << "computes sync stage " << inst.getStageId()
               << ", which holds nothing; the towers' last stages compute "
                  "the loss after its all-gather";
      if (inst && inst.isCompute())
        a.actorsOf[inst.getStageId()].insert(
            static_cast<int64_t>(actor.getId()));
    }
  // (The reader refused it as "stage 2 names actor -1".)
  for (int64_t s = 0; s < static_cast<int64_t>(a.actorsOf.size()); ++s)
    if (a.actorsOf[s].empty() && !isSync(s))
      return schedule.emitOpError()
             << "computes stage " << s << " on no actor (no program "
             << "computes it), and the runtime holds each stage on an "
             << "actor: give its direction micro-batches, or drop the stage";
  for (int64_t s : a.shared)
    if (a.actorsOf[s].size() < 2)
      return schedule.emitOpError()
             << "shares stage " << s << ", but "
             << (a.actorsOf[s].empty() ? "no actor runs"
                                       : "only one actor runs")
             << " its computations; a vocabulary-parallel stage needs at "
                "least two";
  // An all-gather belongs to a vocabulary-parallel head, among exactly the
  // actors that run it, or to a sync stage (describeTowers checks those).
  for (auto actor : schedule.getBody().getOps<ActorOp>())
    for (auto gather : actor.getBody().getOps<AllGatherOp>()) {
      const auto s = static_cast<int64_t>(gather.getStage());
      if (isSync(s))
        continue;
      if (!a.isVocabHead(s))
        return gather.emitOpError()
               << "cannot be lowered: stage " << s
               << " is neither a vocabulary-parallel LM head (a shared stage "
                  "with 0 layers and last) nor the sync stage of a two-tower "
                  "model (0 layers, neither first nor last, a module of its "
                  "own), whose all-gathers the runtime runs";
      if (!llvm::equal(gather.getGroup(), a.actorsOf[s]))
        return gather.emitOpError()
               << "gathers in a group other than the actors that run stage "
               << s << "; list exactly them, in ascending order";
    }
  return success();
}

/// One module: the runtime's GPT. A stage's first block follows from the
/// stages before it along the edges (its predecessors' first block plus
/// their layers); each direction of a bidirectional pipeline starts again
/// at block 0 (its stages are copies of the other direction's, with the
/// same weights). Stage numbers need not follow the edges: with vocabulary
/// parallelism the embedding and head stages come last.
FailureOr<rt::ScheduleDesc>
describeGpt(ScheduleOp schedule, const Analysis &a,
            const sched::ModelConfig *model, int64_t dp, int64_t seed,
            std::vector<rt::ScheduleDesc::Exec> execs) {
  const int64_t numStages = static_cast<int64_t>(schedule.getStages());
  StringAttr module = a.modules.front();
  std::vector<sched::StageMeta> meta(numStages);
  for (int64_t s = 0; s < numStages; ++s) {
    auto stage = stageInfo(a, s);
    meta[s] = {stage.getModule() == module ? 0 : -1, stage.getLayers(),
               stage.getFirst(), stage.getLast()};
  }
  std::vector<std::pair<int32_t, int32_t>> edges;
  for (auto [from, to] : schedule.getEdgeList())
    edges.push_back({static_cast<int32_t>(from), static_cast<int32_t>(to)});
  const std::vector<int64_t> firstBlock = sched::stageFirstLayers(meta, edges);
  int64_t layers = 0;
  for (int64_t s = 0; s < numStages; ++s)
    layers = std::max(layers, firstBlock[s] + meta[s].layers);

  // (The description's block indices are ints.)
  if (layers > kMaxCount)
    return schedule.emitOpError()
           << "holds " << layers << " layers along its stages; a model may "
           << "have at most " << kMaxCount;
  sched::ModuleModel sizes{module.str(), layers, 64, 4, 32, 256, true};
  int64_t microBatch = 1;
  if (model) {
    const sched::ModuleModel *m = model->module(module.str());
    if (!m || model->modules.size() != 1 || !m->hasHead())
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
  for (int64_t s : a.shared)
    if (sizes.vocab < static_cast<int64_t>(a.actorsOf[s].size()))
      return schedule.emitOpError()
             << "splits a vocabulary of " << sizes.vocab << " over "
             << a.actorsOf[s].size() << " actors in stage " << s
             << ", and the rank programs give every actor at least one of "
                "its rows: use fewer actors, a larger vocabulary, or no "
                "vocab_parallel";

  rt::ScheduleDesc desc = descSizes(schedule, dp, std::move(execs));
  setGptSizes(desc.model, sizes);
  desc.model.layers = layers;
  desc.model.microBatch = microBatch;
  desc.model.seed = static_cast<uint64_t>(seed);
  for (int64_t s = 0; s < numStages; ++s) {
    auto info = stageInfo(a, s);
    const std::set<int64_t> &actors = a.actorsOf[s];
    rt::ScheduleDesc::Stage &stage = desc.stage[s];
    stage.actor = static_cast<int>(*actors.begin());
    stage.firstBlock = static_cast<int>(firstBlock[s]);
    stage.blocks = static_cast<int>(info.getLayers());
    stage.first = info.getFirst();
    stage.last = info.getLast();
    if (a.shared.contains(s))
      stage.actors.assign(actors.begin(), actors.end());
  }
  return desc;
}

} // namespace

FailureOr<std::string> flexpipe::describeForRuntime(
    ScheduleOp schedule, const sched::ModelConfig *model, int64_t dp,
    int64_t seed, RuntimeBackend backend, ExecInstances &instances) {
  Analysis a;
  a.info = schedule.getStageInfoAttr();
  if (!a.info)
    return schedule.emitOpError()
           << "does not say what its stages hold (no stage_info): compile "
              "it from a spec, give it a stage_info, or let flexpipe-compile "
              "--model split a one-module model evenly over its stages";
  if (failed(classifyStages(schedule, a)) || failed(collectActors(schedule, a)))
    return failure();
  // Registered computations: operations see no output of shared and sync
  // stages.
  llvm::SmallDenseSet<int64_t> noOutputs = a.shared;
  noOutputs.insert(a.syncStages.begin(), a.syncStages.end());
  if (failed(analyzeExecs(schedule, noOutputs, instances)))
    return failure();
  std::vector<rt::ScheduleDesc::Exec> execs = execsOf(schedule, instances);
  FailureOr<rt::ScheduleDesc> desc =
      a.modules.size() != 1 || !a.syncStages.empty()
          ? describeTowers(schedule, a, model, dp, seed, std::move(execs))
          : describeGpt(schedule, a, model, dp, seed, std::move(execs));
  if (failed(desc))
    return failure();
  std::string description = withHash(schedule, *desc);
  if (failed(checkRanksRead(schedule, description, backend)))
    return failure();
  return description;
}
