//===- PipelineSpec.cpp - Resolve a spec into a scheduler problem ---------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/PipelineSpec.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <array>
#include <functional>
#include <numeric>
#include <optional>
#include <tuple>

using namespace flexpipe::sched;

static llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// An error about module `m` of the spec, reported at its op.
static llvm::Error failAtModule(int32_t m, const llvm::Twine &message) {
  return llvm::make_error<StatementError>(StatementError::Site::Module, m,
                                          message.str());
}

namespace {
/// Resolves a PipelineSpec into a BuiltProblem, one named step at a time
/// (docs/Rationale.md, "Data flow"). Each step reads what earlier steps
/// made; run() calls them in order and stops at the first error.
class ProblemBuilder {
public:
  explicit ProblemBuilder(const PipelineSpec &spec)
      : spec(spec), problem(built.problem),
        numModules(static_cast<int32_t>(spec.modules.size())) {}

  llvm::Expected<BuiltProblem> run();

private:
  llvm::Error layOutModules();
  void describeStages();
  llvm::Error resolveDepths();
  llvm::Error buildParts();
  llvm::Error buildModuleParts(int32_t m);
  llvm::Error buildVocabParts(int32_t m);
  llvm::Error checkSize() const;
  void connectStages();
  llvm::Error checkMessageSources() const;
  llvm::Error applyPriorities();
  llvm::Error applyInflightLimits();
  llvm::Error registerInstructions();
  llvm::Error addDependencies();
  void priceCollectives();

  /// The model file's description of module `m` when costs come from a
  /// model and cluster (null otherwise), or an error naming the module.
  llvm::Expected<const ModuleModel *> costModelOf(int32_t m) const;
  /// The micro-batches [begin, end) direction `d` of a module carries: a
  /// bidirectional module splits them in halves.
  std::pair<int32_t, int32_t> microbatchRange(const ModuleLayout &layout,
                                              int64_t d) const {
    const int32_t half = (spec.microbatches + 1) / 2;
    const bool bidirectional = layout.placement.directions == 2;
    return {bidirectional && d == 1 ? half : 0,
            bidirectional && d == 0 ? half : spec.microbatches};
  }
  /// Global id of stage `local` of module `m`; none when out of range.
  std::optional<int32_t> globalStage(int32_t m, int64_t local) const;
  /// Actors that run module `m`'s stages, as its placement lists them;
  /// every actor for the whole pipeline (m < 0).
  std::vector<int64_t> scopeActors(int32_t m) const {
    if (m >= 0)
      return spec.modules[m].placement.actors;
    std::vector<int64_t> all(spec.actors);
    std::iota(all.begin(), all.end(), 0);
    return all;
  }

  const PipelineSpec &spec;
  BuiltProblem built;
  Problem &problem;
  const int32_t numModules;
  int32_t firstRegistered = 0;      ///< global id of the first registered stage
  std::vector<int32_t> depthOffset; ///< depth of each module's first stage
  /// partsOfStage[global stage] = its part indices (several when shared).
  std::vector<std::vector<int32_t>> partsOfStage;
  size_t instBase = 0; ///< first user instruction in problem.registered
};
} // namespace

llvm::Expected<BuiltProblem> ProblemBuilder::run() {
  problem.numActors = spec.actors;
  problem.numMicrobatches = spec.microbatches;
  problem.splitBackward = spec.splitBackward;
  if (spec.actors < 1 || spec.microbatches < 1)
    return fail("a pipeline needs at least one actor and one micro-batch");
  if (spec.modules.empty())
    return fail("a pipeline needs at least one module");
  if (llvm::Error error = layOutModules())
    return std::move(error);
  describeStages();
  if (llvm::Error error = resolveDepths())
    return std::move(error);
  if (llvm::Error error = buildParts())
    return std::move(error);
  if (llvm::Error error = checkSize())
    return std::move(error);
  connectStages();
  if (llvm::Error error = checkMessageSources())
    return std::move(error);
  if (llvm::Error error = applyPriorities())
    return std::move(error);
  if (llvm::Error error = applyInflightLimits())
    return std::move(error);
  if (llvm::Error error = registerInstructions())
    return std::move(error);
  if (llvm::Error error = addDependencies())
    return std::move(error);
  priceCollectives();
  // The problem's registered instructions follow the spec's from instBase.
  if (llvm::Error error = validate(problem))
    return llvm::handleErrors(
        std::move(error), [&](std::unique_ptr<StatementError> e) {
          if (e->site == StatementError::Site::Registered &&
              e->index >= static_cast<int32_t>(instBase)) {
            e->site = StatementError::Site::Instruction;
            e->index -= static_cast<int32_t>(instBase);
          }
          return llvm::Error(std::move(e));
        });
  return std::move(built);
}

llvm::Expected<BuiltProblem>
flexpipe::sched::buildProblem(const PipelineSpec &spec) {
  return ProblemBuilder(spec).run();
}

llvm::Expected<const ModuleModel *>
ProblemBuilder::costModelOf(int32_t m) const {
  if (!spec.model || !spec.cluster)
    return nullptr;
  const std::string &name = spec.modules[m].name;
  const ModuleModel *module = spec.model->module(name);
  if (!module)
    return fail("the model file has no module '" + name + "'");
  return module;
}

std::optional<int32_t> ProblemBuilder::globalStage(int32_t m,
                                                   int64_t local) const {
  if (m < 0 || m >= numModules || local < 0 ||
      local >= built.modules[m].placement.numStages())
    return std::nullopt;
  return built.modules[m].firstStage + static_cast<int32_t>(local);
}

/// Partition and placement of each module; global stage ids in declaration
/// order (a module's stages, then its vocabulary-parallel embedding and head
/// per direction), then the registered stages.
llvm::Error ProblemBuilder::layOutModules() {
  int32_t nextStage = 0;
  for (const ModuleSpec &module : spec.modules) {
    llvm::Expected<ModulePlacement> placed = place(module.placement);
    if (!placed)
      return fail("module @" + module.name + ": " +
                  llvm::toString(placed.takeError()));
    ModuleLayout layout;
    layout.firstStage = nextStage;
    layout.placement = std::move(*placed);
    const int64_t perDirection = layout.placement.stagesPerDirection;
    layout.layersPerStage = module.partition.empty()
                                ? evenPartition(module.layers, perDirection)
                                : module.partition;
    if (static_cast<int64_t>(layout.layersPerStage.size()) != perDirection)
      return fail(llvm::formatv("module @{0}: the partition lists {1} stages "
                                "but the placement makes {2}",
                                module.name, layout.layersPerStage.size(),
                                perDirection));
    nextStage += static_cast<int32_t>(layout.placement.numStages());
    if (module.vocabParallel) {
      for (int64_t d = 0; d < layout.placement.directions; ++d) {
        layout.embeddingStages.push_back(nextStage++);
        layout.headStages.push_back(nextStage++);
      }
    }
    built.modules.push_back(std::move(layout));
  }
  firstRegistered = nextStage;
  nextStage += static_cast<int32_t>(spec.registeredStages.size());
  built.numStages = nextStage;
  return llvm::Error::success();
}

/// What each stage holds: its module, layers, and whether it is a first or
/// last stage.
void ProblemBuilder::describeStages() {
  built.stageMeta.assign(built.numStages, StageMeta());
  for (int32_t m = 0; m < numModules; ++m) {
    const ModuleLayout &layout = built.modules[m];
    const bool vp = spec.modules[m].vocabParallel;
    const int64_t perDirection = layout.placement.stagesPerDirection;
    built.moduleNames.push_back(spec.modules[m].name);
    for (int64_t local = 0; local < layout.placement.numStages(); ++local) {
      const int64_t index = local % perDirection;
      built.stageMeta[layout.firstStage + local] = {
          m, layout.layersPerStage[index], !vp && index == 0,
          !vp && index == perDirection - 1};
    }
    for (int32_t s : layout.embeddingStages)
      built.stageMeta[s] = {m, 0, true, false};
    for (int32_t s : layout.headStages)
      built.stageMeta[s] = {m, 0, false, true};
  }
  for (size_t r = 0; r < spec.registeredStages.size(); ++r) {
    built.stageMeta[firstRegistered + r] = {
        static_cast<int32_t>(built.moduleNames.size()), 0, false, false,
        /*registered=*/true};
    built.moduleNames.push_back(spec.registeredStages[r].name);
  }
}

/// Depth (layer order) of each module's first stage: after its inputs.
llvm::Error ProblemBuilder::resolveDepths() {
  depthOffset.assign(numModules, -1);
  std::function<llvm::Error(int32_t, int)> resolve =
      [&](int32_t m, int guard) -> llvm::Error {
    if (depthOffset[m] >= 0)
      return llvm::Error::success();
    if (guard > numModules)
      return failAtModule(m, "module @" + spec.modules[m].name +
                                 " is its own input through the modules "
                                 "it takes (module inputs form a cycle)");
    int32_t offset = 0;
    for (int32_t input : spec.modules[m].inputs) {
      if (input < 0 || input >= numModules || input == m)
        return failAtModule(m, "module @" + spec.modules[m].name +
                                   " names an invalid input module");
      if (llvm::Error error = resolve(input, guard + 1))
        return error;
      offset = std::max<int32_t>(
          offset, depthOffset[input] +
                      built.modules[input].placement.stagesPerDirection);
    }
    depthOffset[m] = offset;
    return llvm::Error::success();
  };
  for (int32_t m = 0; m < numModules; ++m)
    if (llvm::Error error = resolve(m, 0))
      return error;
  return llvm::Error::success();
}

/// The stage parts: one per stage and actor that runs it.
llvm::Error ProblemBuilder::buildParts() {
  partsOfStage.assign(built.numStages, {});
  for (int32_t m = 0; m < numModules; ++m) {
    if (llvm::Error error = buildModuleParts(m))
      return error;
    if (spec.modules[m].vocabParallel)
      if (llvm::Error error = buildVocabParts(m))
        return error;
  }
  std::sort(built.sharedStages.begin(), built.sharedStages.end());
  return llvm::Error::success();
}

llvm::Error ProblemBuilder::buildModuleParts(int32_t m) {
  const ModuleSpec &module = spec.modules[m];
  const ModuleLayout &layout = built.modules[m];
  const int64_t perDirection = layout.placement.stagesPerDirection;
  const bool bidirectional = layout.placement.directions == 2;
  const bool connected =
      !module.inputs.empty() ||
      llvm::any_of(spec.modules, [&](const ModuleSpec &other) {
        return llvm::is_contained(other.inputs, m);
      });
  if ((bidirectional || module.vocabParallel) && connected)
    return fail("module @" + module.name + " is " +
                (bidirectional ? "bidirectional" : "vocabulary-parallel") +
                " and cannot be connected to other modules");
  std::vector<std::vector<int64_t>> sharedActors(layout.placement.numStages());
  for (const auto &[local, actors] : module.shared) {
    if (local < 0 || local >= layout.placement.numStages())
      return fail(llvm::formatv("module @{0}: shared stage {1} is out of "
                                "range",
                                module.name, local));
    sharedActors[local] = actors;
    built.sharedStages.push_back(layout.firstStage +
                                 static_cast<int32_t>(local));
  }
  llvm::Expected<const ModuleModel *> model = costModelOf(m);
  if (!model)
    return model.takeError();
  // Vocabulary parallelism puts the embedding before the module's stages
  // and the head after them, in depth as in the stage DAG.
  const int32_t vp = module.vocabParallel ? 1 : 0;
  for (int64_t local = 0; local < layout.placement.numStages(); ++local) {
    const int64_t direction = local / perDirection;
    const int64_t index = local % perDirection;
    StagePart part;
    part.stage = layout.firstStage + static_cast<int32_t>(local);
    part.depth = depthOffset[m] + vp + static_cast<int32_t>(index);
    std::tie(part.mbBegin, part.mbEnd) = microbatchRange(layout, direction);
    const double layers =
        static_cast<double>(std::max<int64_t>(1, layout.layersPerStage[index]));
    for (int k = 0; k < kNumCompKinds; ++k)
      part.cost[k] = spec.costPerLayer[k] * layers;
    if (*model) {
      const StageMeta &meta = built.stageMeta[part.stage];
      const StageShape shape{*model, meta.layers, meta.first, meta.last};
      part.cost =
          stageDurations(shape, *spec.model, *spec.cluster,
                         std::max<size_t>(1, sharedActors[local].size()));
    }
    std::vector<int64_t> actors = sharedActors[local];
    if (actors.empty())
      actors.push_back(layout.placement.actorOf[local]);
    for (int64_t actor : actors) {
      if (actor < 0 || actor >= spec.actors)
        return fail(llvm::formatv("module @{0}: stage {1} is placed on "
                                  "actor {2}, outside the mesh",
                                  module.name, local, actor));
      part.actor = static_cast<int32_t>(actor);
      partsOfStage[part.stage].push_back(
          static_cast<int32_t>(problem.parts.size()));
      problem.parts.push_back(part);
    }
  }
  return llvm::Error::success();
}

/// The vocabulary-parallel embedding and head: one part on every actor of
/// the module, a 1/n slice of the vocabulary each, and the head's loss
/// statistics all-gather.
llvm::Error ProblemBuilder::buildVocabParts(int32_t m) {
  const ModuleSpec &module = spec.modules[m];
  const ModuleLayout &layout = built.modules[m];
  const int64_t perDirection = layout.placement.stagesPerDirection;
  std::vector<int64_t> group(layout.placement.actorOf);
  llvm::sort(group);
  group.erase(llvm::unique(group), group.end());
  const double share = static_cast<double>(group.size());
  llvm::Expected<const ModuleModel *> found = costModelOf(m);
  if (!found)
    return found.takeError();
  const ModuleModel *model = *found;
  if (model && !model->hasHead())
    return fail("module @" + module.name +
                " is vocabulary-parallel but the model file gives "
                "it no vocabulary and LM head");
  for (int64_t d = 0; d < layout.placement.directions; ++d) {
    Registered sync;
    sync.name = module.name + ".loss_stats";
    sync.stage = layout.headStages[d];
    sync.actors.assign(group.begin(), group.end());
    sync.mode = InstMode::Collective;
    sync.runtime = InstRuntime::AllGather;
    for (bool head : {false, true}) {
      StagePart part;
      part.stage = head ? layout.headStages[d] : layout.embeddingStages[d];
      part.depth =
          depthOffset[m] + (head ? static_cast<int32_t>(perDirection) + 1 : 0);
      std::tie(part.mbBegin, part.mbEnd) = microbatchRange(layout, d);
      part.countsInflight = false;
      for (int k = 0; k < kNumCompKinds; ++k)
        part.cost[k] = spec.costPerLayer[k] / share;
      if (model) {
        const StageShape shape{model, 0, !head, head};
        part.cost = stageDurations(shape, *spec.model, *spec.cluster, share);
        if (head)
          sync.duration = vocabStatsTime(*spec.cluster, group, *model,
                                         spec.model->microBatchSize);
      }
      built.sharedStages.push_back(part.stage);
      for (int64_t actor : group) {
        part.actor = static_cast<int32_t>(actor);
        if (head) {
          const int32_t index = static_cast<int32_t>(problem.parts.size());
          sync.after.push_back({CompKind::Fwd, index});
          sync.before.push_back({CompKind::Bwd, index});
        }
        partsOfStage[part.stage].push_back(
            static_cast<int32_t>(problem.parts.size()));
        problem.parts.push_back(part);
      }
    }
    problem.registered.push_back(std::move(sync));
  }
  return llvm::Error::success();
}

/// The pool holds two or three items per stage part and micro-batch; the
/// tools hold every computation, its transfers and its IR in memory: about
/// 1 KB each (docs/Rationale.md, "Sizes"), so 8 GB at the limit.
llvm::Error ProblemBuilder::checkSize() const {
  int64_t items = 0;
  for (const StagePart &part : problem.parts)
    items += static_cast<int64_t>(part.mbEnd - part.mbBegin) *
             (spec.splitBackward ? 3 : 2);
  constexpr int64_t kMaxItems = int64_t{1} << 23;
  if (items > kMaxItems)
    return fail(llvm::formatv("the schedule would hold {0} computations; the "
                              "tools handle at most {1}, about 8 GB of memory "
                              "(fewer micro-batches or stages)",
                              items, kMaxItems));
  return llvm::Error::success();
}

/// The stage DAG: each direction's chain, the vocabulary-parallel embedding
/// and head around it, and module inputs; every edge joins all parts.
void ProblemBuilder::connectStages() {
  auto connect = [&](int32_t from, int32_t to) {
    built.stageEdges.push_back({from, to});
    for (int32_t a : partsOfStage[from])
      for (int32_t b : partsOfStage[to])
        problem.edges.push_back({a, b});
  };
  for (int32_t m = 0; m < numModules; ++m) {
    const ModuleLayout &layout = built.modules[m];
    const int32_t perDirection =
        static_cast<int32_t>(layout.placement.stagesPerDirection);
    for (int32_t d = 0; d < layout.placement.directions; ++d)
      for (int32_t i = 0; i + 1 < perDirection; ++i)
        connect(layout.firstStage + d * perDirection + i,
                layout.firstStage + d * perDirection + i + 1);
    for (size_t d = 0; d < layout.embeddingStages.size(); ++d) {
      const int32_t first =
          layout.firstStage + static_cast<int32_t>(d) * perDirection;
      connect(layout.embeddingStages[d], first);
      connect(first + perDirection - 1, layout.headStages[d]);
    }
    for (int32_t input : spec.modules[m].inputs) {
      const ModuleLayout &in = built.modules[input];
      connect(in.firstStage +
                  static_cast<int32_t>(in.placement.stagesPerDirection) - 1,
              layout.firstStage);
    }
  }
}

/// A transfer names the stage it serves and the peer, not the edge
/// (insertCommunication): a stage part can take activations from one stage
/// per other actor, and gradients from one. Module inputs can ask for more
/// (a join of two modules that end on one actor, or one module feeding two
/// on one actor); such a spec is refused at the module that takes the
/// second input.
llvm::Error ProblemBuilder::checkMessageSources() const {
  std::vector<std::vector<int32_t>> actorsOf(built.numStages);
  for (int32_t stage = 0; stage < built.numStages; ++stage)
    for (int32_t part : partsOfStage[stage])
      actorsOf[stage].push_back(problem.parts[part].actor);
  std::optional<MessageClash> clash =
      findMessageClash(built.stageEdges, actorsOf);
  if (!clash)
    return llvm::Error::success();
  auto [t, first, second, actor, peer, join] = *clash;
  auto moduleOf = [&](int32_t stage) { return built.stageMeta[stage].module; };
  auto name = [&](int32_t stage) {
    return "@" + built.moduleNames[moduleOf(stage)];
  };
  const std::string what =
      join
          ? llvm::formatv("module {0} takes the outputs of {1} and {2}, whose "
                          "stages {3} and {4} both run on actor {5}, while its "
                          "stage {6} runs on actor {7}",
                          name(t), name(first), name(second), first, second,
                          actor, t, peer)
          : llvm::formatv("module {0} takes the output of {1}, as {2} does, "
                          "and their stages {3} and {4} both run on actor "
                          "{5}, while {1}'s stage {6} runs on actor {7}",
                          name(second), name(t), name(first), second, first,
                          actor, t, peer);
  return failAtModule(
      moduleOf(join ? t : second),
      what + ": a transfer names the stage it serves, so the two " +
          (join ? "messages" : "gradients sent back") +
          " between one pair of actors could not be told apart; place " +
          (join
               ? name(first) + " and " + name(second) + " so that they end"
               : name(second) + " and " + name(first) + " so that they start") +
          " on different actors");
}

/// Priorities: the pipeline default, then module, then actor overrides.
llvm::Error ProblemBuilder::applyPriorities() {
  problem.policies.assign(spec.actors, ActorPolicy{});
  auto apply = [](ActorPolicy &policy, const PrioritySpec &p) {
    if (p.cttp) {
      policy.cttp = *p.cttp;
      policy.fwdUnit = p.fwdUnit;
      policy.bwdUnit = p.bwdUnit;
    }
    if (p.fwd)
      policy.fwd = *p.fwd;
    if (p.bwd)
      policy.bwd = *p.bwd;
  };
  // Two modules' priorities that set one field differently on an actor
  // both hold (the later one won silently), unless an actor's own priority
  // sets that field. A plugin priority sets all three (it replaces them).
  // Per actor and field (cttp, fstp, bstp): the module that set it (-2: the
  // actor's own priority), and what it set.
  struct Setting {
    int32_t module = -1;
    std::string value;
  };
  struct Conflict {
    int64_t actor;
    int field;
    int32_t first, second;
    bool custom; ///< a plugin priority on either side
  };
  std::vector<std::array<Setting, 3>> setBy(spec.actors);
  std::vector<Conflict> conflicts;
  auto valueOf = [](const PrioritySpec &p, int field) -> std::string {
    auto stp = [](const std::optional<StagePriority> &s) {
      return s ? llvm::formatv("{0}:{1}", static_cast<int>(s->order),
                               s->interval)
                     .str()
               : std::string();
    };
    if (p.custom)
      return "custom:" + p.customName;
    return field == 0   ? p.cttp ? llvm::formatv("{0}:{1}:{2}",
                                                 static_cast<int>(*p.cttp),
                                                 p.fwdUnit, p.bwdUnit)
                                     .str()
                                 : std::string()
             : field == 1 ? stp(p.fwd)
                        : stp(p.bwd);
  };
  // A plugin priority per actor, and the level that set it: a built-in
  // priority of a narrower scope replaces it (it stayed, and the actor's
  // own cttp was ignored).
  std::vector<PriorityFunction> custom(spec.actors);
  std::vector<std::string> customNames(spec.actors);
  std::vector<int> customLevel(spec.actors, -1);
  bool anyCustom = false;
  for (int level = 0; level < 3; ++level) {
    for (const PrioritySpec &p : spec.priorities) {
      if (level != (!p.actors.empty() ? 2 : p.module >= 0 ? 1 : 0))
        continue;
      for (int64_t actor : p.actors.empty() ? scopeActors(p.module) : p.actors)
        if (actor >= 0 && actor < spec.actors) {
          for (int field = 0; field < 3; ++field) {
            std::string value = valueOf(p, field);
            if (value.empty())
              continue;
            Setting &by = setBy[actor][field];
            if (level == 1 && by.module >= 0 && by.module != p.module &&
                by.value != value)
              conflicts.push_back(
                  {actor, field, by.module, p.module,
                   p.custom ||
                       llvm::StringRef(by.value).starts_with("custom:")});
            if (level >= 1)
              by = {level == 1 ? p.module : -2, std::move(value)};
          }
          apply(problem.policies[actor], p);
          if (p.custom) {
            custom[actor] = p.custom;
            customNames[actor] = p.customName;
            customLevel[actor] = level;
            anyCustom = true;
          } else if (customLevel[actor] >= 0 && customLevel[actor] < level) {
            custom[actor] = nullptr;
            customLevel[actor] = -1;
          }
        }
    }
  }
  for (const Conflict &c : conflicts) {
    // Settled by the actor's own priority: for that field, or for a plugin
    // priority's, by any priority of the actor's own, which replaces it.
    const bool settled =
        c.custom ? llvm::any_of(setBy[c.actor],
                                [](const Setting &s) { return s.module == -2; })
                 : setBy[c.actor][c.field].module == -2;
    if (settled)
      continue;
    // (A plugin priority replaces all three fields: the conflict is then
    // between priorities, not one field.)
    const char *names[] = {"cttp", "fstp", "bstp"};
    const std::string field = c.custom ? "priority" : names[c.field];
    return failAtModule(
        c.second,
        "its priority (flexpipe.priority @" + spec.modules[c.second].name +
            ") sets " + (c.custom ? "the priority of" : field + " for") +
            " actor " + llvm::Twine(c.actor) + ", which also holds module @" +
            spec.modules[c.first].name +
            ", whose priority sets it otherwise; an actor has one " + field +
            (c.custom ? " (a plugin's custom one replaces cttp, fstp and bstp)"
                      : "") +
            ": set it for the actor with `flexpipe.priority actors [...]`, "
            "or once for the pipeline");
  }
  if (anyCustom) {
    problem.customPriorities = std::move(custom);
    problem.customPriorityNames = std::move(customNames);
  }
  problem.checks = spec.checks;
  problem.checkNames = spec.checkNames;
  return llvm::Error::success();
}

/// In-flight limits; the smallest applicable one wins.
llvm::Error ProblemBuilder::applyInflightLimits() {
  problem.actorLimits.assign(spec.actors, kNoLimit);
  for (const InflightSpec &in : spec.inflight) {
    const std::vector<int64_t> actors = scopeActors(in.module);
    // The scope's stages, global ids: a module's own stages, not its
    // vocabulary-parallel slices (in-flight rules count them).
    std::vector<int32_t> stages;
    for (int32_t m = 0; m < numModules; ++m)
      if (in.module < 0 || in.module == m)
        for (int64_t i = 0; i < built.modules[m].placement.numStages(); ++i)
          stages.push_back(built.modules[m].firstStage +
                           static_cast<int32_t>(i));
    switch (in.scope) {
    case InflightScope::PerActor:
      if (in.limits.size() != actors.size())
        return fail("a per-actor in-flight limit needs one entry per actor");
      for (size_t i = 0; i < actors.size(); ++i) {
        if (in.module < 0) {
          problem.actorLimits[actors[i]] =
              std::min(problem.actorLimits[actors[i]], in.limits[i]);
          continue;
        }
        // A module's limit counts its own forwards on the actor (it counted
        // every module's, and refused specs it should have scheduled).
        ModuleActorLimit limit;
        limit.limit = in.limits[i];
        for (int32_t s : stages)
          for (int32_t part : partsOfStage[s])
            if (problem.parts[part].actor == actors[i] &&
                problem.parts[part].countsInflight)
              limit.parts.push_back(part);
        if (!limit.parts.empty())
          problem.moduleActorLimits.push_back(std::move(limit));
      }
      break;
    case InflightScope::PerStage:
      if (in.limits.size() != stages.size())
        return fail("a per-stage in-flight limit needs one entry per stage");
      for (size_t i = 0; i < stages.size(); ++i)
        for (int32_t part : partsOfStage[stages[i]])
          problem.parts[part].inflightLimit =
              std::min(problem.parts[part].inflightLimit, in.limits[i]);
      break;
    case InflightScope::Global: {
      if (in.limits.size() != 1)
        return fail("a global in-flight limit is one number");
      GlobalLimit limit;
      limit.limit = in.limits[0];
      limit.inflight = static_cast<int32_t>(&in - spec.inflight.data());
      // Sources: the scope's stages without a predecessor in the scope
      // other than a vocabulary-parallel embedding (which does not count in
      // flight). A head's inputs from other modules do not make it a
      // non-source: its module's limit had no source and bound nothing.
      std::vector<bool> inScope(built.numStages, false), hasPred = inScope;
      for (int32_t s : stages)
        inScope[s] = true;
      for (auto [from, to] : built.stageEdges)
        if (inScope[from] &&
            !(built.stageMeta[from].layers == 0 && built.stageMeta[from].first))
          hasPred[to] = true;
      for (int32_t s : stages)
        if (!hasPred[s])
          for (int32_t part : partsOfStage[s])
            if (problem.parts[part].countsInflight)
              limit.sources.push_back(part);
      problem.globalLimits.push_back(std::move(limit));
      break;
    }
    }
  }
  return llvm::Error::success();
}

/// The user's registered instructions, after the vocabulary syncs;
/// dependencies name them by index.
llvm::Error ProblemBuilder::registerInstructions() {
  instBase = problem.registered.size();
  for (const InstructionSpec &inst : spec.instructions) {
    Registered r;
    r.name = inst.name;
    r.runtime = inst.runtime;
    r.mode = inst.runtime == InstRuntime::Exec ? InstMode::Local
             : inst.async                      ? InstMode::Async
                                               : InstMode::Collective;
    r.prev = inst.prev;
    r.next = inst.next;
    r.unit = inst.unit;
    if (inst.registeredStage >= 0) {
      if (inst.registeredStage >=
          static_cast<int32_t>(spec.registeredStages.size()))
        return fail("instruction @" + inst.name +
                    " is attached to a stage out of range");
      const RegisteredStageSpec &stage =
          spec.registeredStages[inst.registeredStage];
      r.stage = firstRegistered + inst.registeredStage;
      for (int64_t actor : stage.actors) {
        if (actor < 0 || actor >= spec.actors)
          return fail(llvm::formatv("stage @{0} lists actor {1}, outside the "
                                    "mesh",
                                    stage.name, actor));
        r.actors.push_back(static_cast<int32_t>(actor));
      }
    } else {
      std::optional<int32_t> stage = globalStage(inst.module, inst.stage);
      if (!stage)
        return fail("instruction @" + inst.name +
                    " is attached to a stage out of range");
      r.stage = *stage;
      for (int32_t part : partsOfStage[r.stage])
        r.actors.push_back(problem.parts[part].actor);
    }
    llvm::sort(r.actors);
    r.actors.erase(llvm::unique(r.actors), r.actors.end());
    if (r.actors.empty())
      return fail("instruction @" + inst.name + " runs on no actor");
    r.root = r.actors.front();
    problem.registered.push_back(std::move(r));
  }
  return llvm::Error::success();
}

/// Extra dependencies: between two computations, or between a computation
/// and a registered instruction.
llvm::Error ProblemBuilder::addDependencies() {
  const int32_t numInsts = static_cast<int32_t>(spec.instructions.size());
  for (size_t index = 0; index < spec.dependencies.size(); ++index) {
    const DependencySpec &dep = spec.dependencies[index];
    auto fail = [&](const std::string &message) {
      return llvm::make_error<StatementError>(StatementError::Site::Dependency,
                                              static_cast<int32_t>(index),
                                              message);
    };
    if (dep.srcInst >= 0 && dep.dstInst >= 0)
      return fail("a dependency between two registered instructions (@" +
                  spec.instructions[dep.srcInst].name + " and @" +
                  spec.instructions[dep.dstInst].name +
                  ") is not supported; connect each to a computation");
    if (dep.srcInst >= numInsts || dep.dstInst >= numInsts)
      return fail("an extra dependency names an instruction out of range");
    if (dep.srcInst >= 0 || dep.dstInst >= 0) {
      const bool toInst = dep.dstInst >= 0;
      std::optional<int32_t> stage =
          toInst ? globalStage(dep.srcModule, dep.srcStage)
                 : globalStage(dep.dstModule, dep.dstStage);
      if (!stage)
        return fail("an extra dependency names a stage out of range");
      Registered &r =
          problem.registered[instBase + (toInst ? dep.dstInst : dep.srcInst)];
      for (int32_t part : partsOfStage[*stage])
        (toInst ? r.after : r.before)
            .push_back({toInst ? dep.srcKind : dep.dstKind, part,
                        static_cast<int32_t>(index)});
      continue;
    }
    std::optional<int32_t> src = globalStage(dep.srcModule, dep.srcStage);
    std::optional<int32_t> dst = globalStage(dep.dstModule, dep.dstStage);
    if (!src || !dst)
      return fail("an extra dependency names a stage out of range");
    for (int32_t a : partsOfStage[*src])
      for (int32_t b : partsOfStage[*dst])
        problem.extraDependencies.push_back(
            {dep.srcKind, a, dep.dstKind, b, static_cast<int32_t>(index)});
  }
  return llvm::Error::success();
}

/// A collective's duration in the cost model: a ring all-gather of the
/// largest output its sources send (the output states of the modules it
/// joins), as the simulator's registeredCollectiveTime.
void ProblemBuilder::priceCollectives() {
  if (!spec.model || !spec.cluster)
    return;
  for (size_t i = instBase; i < problem.registered.size(); ++i) {
    Registered &r = problem.registered[i];
    if (r.mode == InstMode::Local)
      continue;
    double bytes = 0;
    for (const PartKind &src : r.after) {
      const StageMeta &meta = built.stageMeta[problem.parts[src.part].stage];
      const StageShape shape{spec.model->module(built.moduleNames[meta.module]),
                             meta.layers, meta.first, meta.last};
      if (!shape.module)
        continue;
      bytes = std::max(
          bytes, stageCost(shape, *spec.model, *spec.cluster).messageBytes);
    }
    r.duration = allGatherTime(
        *spec.cluster, std::vector<int64_t>(r.actors.begin(), r.actors.end()),
        bytes);
  }
}
