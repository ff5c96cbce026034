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
#include <functional>
#include <numeric>

using namespace flexpipe::sched;

static llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<BuiltProblem>
flexpipe::sched::buildProblem(const PipelineSpec &spec) {
  BuiltProblem built;
  Problem &problem = built.problem;
  problem.numActors = spec.actors;
  problem.numMicrobatches = spec.microbatches;
  problem.splitBackward = spec.splitBackward;
  if (spec.actors < 1 || spec.microbatches < 1)
    return fail("a pipeline needs at least one actor and one micro-batch");
  if (spec.modules.empty())
    return fail("a pipeline needs at least one module");

  // --- Partition and placement; global stage ids in declaration order. ----
  const int32_t numModules = static_cast<int32_t>(spec.modules.size());
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
  const int32_t firstRegistered = nextStage;
  nextStage += static_cast<int32_t>(spec.registeredStages.size());
  built.numStages = nextStage;

  // What each stage holds.
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
        static_cast<int32_t>(built.moduleNames.size()), 0, false, false};
    built.moduleNames.push_back(spec.registeredStages[r].name);
  }

  // Depth (layer order) of each module's first stage: after its inputs.
  std::vector<int32_t> depthOffset(numModules, -1);
  std::function<llvm::Error(int32_t, int)> resolveDepth =
      [&](int32_t m, int guard) -> llvm::Error {
    if (depthOffset[m] >= 0)
      return llvm::Error::success();
    if (guard > numModules)
      return fail("module inputs form a cycle");
    int32_t offset = 0;
    for (int32_t input : spec.modules[m].inputs) {
      if (input < 0 || input >= numModules || input == m)
        return fail("module @" + spec.modules[m].name +
                    " names an invalid input module");
      if (llvm::Error error = resolveDepth(input, guard + 1))
        return error;
      offset = std::max<int32_t>(
          offset, depthOffset[input] +
                      built.modules[input].placement.stagesPerDirection);
    }
    depthOffset[m] = offset;
    return llvm::Error::success();
  };
  for (int32_t m = 0; m < numModules; ++m)
    if (llvm::Error error = resolveDepth(m, 0))
      return std::move(error);

  // --- Stage parts. ----------------------------------------------------------
  // partsOfStage[global stage] = its part indices (several when shared).
  std::vector<std::vector<int32_t>> partsOfStage(built.numStages);
  const int32_t half = (spec.microbatches + 1) / 2;
  for (int32_t m = 0; m < numModules; ++m) {
    const ModuleSpec &module = spec.modules[m];
    const ModuleLayout &layout = built.modules[m];
    const int64_t perDirection = layout.placement.stagesPerDirection;
    const bool bidirectional = layout.placement.directions == 2;
    const bool connected =
        !module.inputs.empty() ||
        std::any_of(spec.modules.begin(), spec.modules.end(),
                    [&](const ModuleSpec &other) {
                      return llvm::is_contained(other.inputs, m);
                    });
    if ((bidirectional || module.vocabParallel) && connected)
      return fail("module @" + module.name + " is " +
                  (bidirectional ? "bidirectional" : "vocabulary-parallel") +
                  " and cannot be connected to other modules");
    std::vector<std::vector<int64_t>> sharedActors(
        layout.placement.numStages());
    for (const auto &[local, actors] : module.shared) {
      if (local < 0 || local >= layout.placement.numStages())
        return fail(llvm::formatv("module @{0}: shared stage {1} is out of "
                                  "range",
                                  module.name, local));
      sharedActors[local] = actors;
      built.sharedStages.push_back(layout.firstStage +
                                   static_cast<int32_t>(local));
    }
    // Vocabulary parallelism puts the embedding before the module's stages
    // and the head after them, in depth as in the stage DAG.
    const int32_t vp = module.vocabParallel ? 1 : 0;
    for (int64_t local = 0; local < layout.placement.numStages(); ++local) {
      const int64_t direction = local / perDirection;
      const int64_t index = local % perDirection;
      StagePart part;
      part.stage = layout.firstStage + static_cast<int32_t>(local);
      part.depth = depthOffset[m] + vp + static_cast<int32_t>(index);
      part.mbBegin = bidirectional && direction == 1 ? half : 0;
      part.mbEnd = bidirectional && direction == 0 ? half : spec.microbatches;
      const double layers = static_cast<double>(
          std::max<int64_t>(1, layout.layersPerStage[index]));
      for (int k = 0; k < kNumCompKinds; ++k)
        part.cost[k] = spec.costPerLayer[k] * layers;
      if (spec.model && spec.cluster) {
        StageShape shape;
        shape.module = spec.model->module(module.name);
        if (!shape.module)
          return fail("the model file has no module '" + module.name + "'");
        shape.layers = layout.layersPerStage[index];
        shape.first = !vp && index == 0;
        shape.last = !vp && index == perDirection - 1;
        const Durations d =
            stageDurations(shape, *spec.model, *spec.cluster,
                           std::max<size_t>(1, sharedActors[local].size()));
        std::copy(d.begin(), d.end(), part.cost);
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

    // The vocabulary-parallel embedding and head: one part on every actor
    // of the module, a 1/n slice of the vocabulary each.
    if (!vp)
      continue;
    std::vector<int64_t> group(layout.placement.actorOf);
    std::sort(group.begin(), group.end());
    group.erase(std::unique(group.begin(), group.end()), group.end());
    const double share = static_cast<double>(group.size());
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
        part.depth = depthOffset[m] +
                     (head ? static_cast<int32_t>(perDirection) + 1 : 0);
        part.mbBegin = bidirectional && d == 1 ? half : 0;
        part.mbEnd = bidirectional && d == 0 ? half : spec.microbatches;
        part.countsInflight = false;
        for (int k = 0; k < kNumCompKinds; ++k)
          part.cost[k] = spec.costPerLayer[k] / share;
        if (spec.model && spec.cluster) {
          StageShape shape;
          shape.module = spec.model->module(module.name);
          if (!shape.module)
            return fail("the model file has no module '" + module.name + "'");
          if (shape.module->vocab <= 0 || !shape.module->lmHead)
            return fail("module @" + module.name +
                        " is vocabulary-parallel but the model file gives "
                        "it no vocabulary and LM head");
          shape.layers = 0;
          shape.first = !head;
          shape.last = head;
          const Durations d =
              stageDurations(shape, *spec.model, *spec.cluster, share);
          std::copy(d.begin(), d.end(), part.cost);
          if (head)
            sync.duration = vocabStatsTime(*spec.cluster, group, *shape.module,
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
  }
  std::sort(built.sharedStages.begin(), built.sharedStages.end());

  // The pool holds two or three items per stage part and micro-batch.
  int64_t items = 0;
  for (const StagePart &part : problem.parts)
    items += static_cast<int64_t>(part.mbEnd - part.mbBegin) *
             (spec.splitBackward ? 3 : 2);
  // The tools hold every computation, its transfers and its IR in memory:
  // about 1 KB each (docs/Rationale.md, "Sizes"), so 8 GB at the limit.
  constexpr int64_t kMaxItems = int64_t{1} << 23;
  if (items > kMaxItems)
    return fail(llvm::formatv("the schedule would hold {0} computations; the "
                              "tools handle at most {1}, about 8 GB of memory "
                              "(fewer micro-batches or stages)",
                              items, kMaxItems));

  // --- The stage DAG. --------------------------------------------------------
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
      connect(layout.embeddingStages[d],
              layout.firstStage + static_cast<int32_t>(d) * perDirection);
      connect(layout.firstStage + (static_cast<int32_t>(d) + 1) * perDirection -
                  1,
              layout.headStages[d]);
    }
    for (int32_t input : spec.modules[m].inputs) {
      const ModuleLayout &in = built.modules[input];
      connect(in.firstStage +
                  static_cast<int32_t>(in.placement.stagesPerDirection) - 1,
              layout.firstStage);
    }
  }

  // --- Priorities: pipeline default, then module, then actor overrides. ----
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
  std::vector<PriorityFunction> custom(spec.actors);
  bool anyCustom = false;
  auto moduleActors = [&](int32_t m) {
    return spec.modules[m].placement.actors;
  };
  for (int pass = 0; pass < 3; ++pass) {
    for (const PrioritySpec &p : spec.priorities) {
      const int level = !p.actors.empty() ? 2 : p.module >= 0 ? 1 : 0;
      if (level != pass)
        continue;
      std::vector<int64_t> actors = p.actors;
      if (actors.empty()) {
        if (p.module >= 0) {
          actors = moduleActors(p.module);
        } else {
          actors.resize(spec.actors);
          std::iota(actors.begin(), actors.end(), 0);
        }
      }
      for (int64_t actor : actors)
        if (actor >= 0 && actor < spec.actors) {
          apply(problem.policies[actor], p);
          if (p.custom) {
            custom[actor] = p.custom;
            anyCustom = true;
          }
        }
    }
  }
  if (anyCustom)
    problem.customPriorities = std::move(custom);
  problem.checks = spec.checks;

  // --- In-flight limits (the smallest applicable one wins). ------------------
  problem.actorLimits.assign(spec.actors, kNoLimit);
  for (const InflightSpec &in : spec.inflight) {
    std::vector<int32_t> stages; // the scope's stages, global ids
    std::vector<int64_t> actors; // the scope's actors
    if (in.module >= 0) {
      const ModuleLayout &layout = built.modules[in.module];
      for (int64_t i = 0; i < layout.placement.numStages(); ++i)
        stages.push_back(layout.firstStage + static_cast<int32_t>(i));
      actors = moduleActors(in.module);
    } else {
      // The modules' own stages: in-flight rules count them, not the
      // vocabulary-parallel slices.
      for (const ModuleLayout &layout : built.modules)
        for (int64_t i = 0; i < layout.placement.numStages(); ++i)
          stages.push_back(layout.firstStage + static_cast<int32_t>(i));
      actors.resize(spec.actors);
      std::iota(actors.begin(), actors.end(), 0);
    }
    switch (in.scope) {
    case InflightScope::PerActor:
      if (in.limits.size() != actors.size())
        return fail("a per-actor in-flight limit needs one entry per actor");
      for (size_t i = 0; i < actors.size(); ++i)
        problem.actorLimits[actors[i]] =
            std::min(problem.actorLimits[actors[i]], in.limits[i]);
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
      // Sources: the scope's stages without a predecessor other than a
      // vocabulary-parallel embedding (which does not count in flight).
      std::vector<bool> hasPred(built.numStages, false);
      for (auto [from, to] : built.stageEdges)
        if (!(built.stageMeta[from].layers == 0 && built.stageMeta[from].first))
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

  // --- Extra dependencies. ---------------------------------------------------
  // Registered instructions first: dependencies name them by index.
  const int32_t numInsts = static_cast<int32_t>(spec.instructions.size());
  const size_t instBase = problem.registered.size(); // after the vocab syncs
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
      r.stage = firstRegistered + inst.registeredStage;
      for (int64_t actor : spec.registeredStages[inst.registeredStage].actors) {
        if (actor < 0 || actor >= spec.actors)
          return fail(llvm::formatv(
              "stage @{0} lists actor {1}, outside the "
              "mesh",
              spec.registeredStages[inst.registeredStage].name, actor));
        r.actors.push_back(static_cast<int32_t>(actor));
      }
    } else {
      if (inst.module < 0 || inst.module >= numModules || inst.stage < 0 ||
          inst.stage >= built.modules[inst.module].placement.numStages())
        return fail("instruction @" + inst.name +
                    " is attached to a stage out of range");
      r.stage = built.modules[inst.module].firstStage +
                static_cast<int32_t>(inst.stage);
      for (int32_t part : partsOfStage[r.stage])
        r.actors.push_back(problem.parts[part].actor);
    }
    std::sort(r.actors.begin(), r.actors.end());
    r.actors.erase(std::unique(r.actors.begin(), r.actors.end()),
                   r.actors.end());
    if (r.actors.empty())
      return fail("instruction @" + inst.name + " runs on no actor");
    r.root = r.actors.front();
    problem.registered.push_back(std::move(r));
  }
  for (const DependencySpec &dep : spec.dependencies) {
    if (dep.srcInst >= 0 && dep.dstInst >= 0)
      return fail("a dependency between two registered instructions (@" +
                  spec.instructions[dep.srcInst].name + " and @" +
                  spec.instructions[dep.dstInst].name +
                  ") is not supported; connect each to a computation");
    if (dep.srcInst >= numInsts || dep.dstInst >= numInsts)
      return fail("an extra dependency names an instruction out of range");
    if (dep.srcInst >= 0 || dep.dstInst >= 0) {
      const bool toInst = dep.dstInst >= 0;
      const int32_t m = toInst ? dep.srcModule : dep.dstModule;
      const int64_t local = toInst ? dep.srcStage : dep.dstStage;
      if (m < 0 || m >= numModules || local < 0 ||
          local >= built.modules[m].placement.numStages())
        return fail("an extra dependency names a stage out of range");
      const int32_t stage =
          built.modules[m].firstStage + static_cast<int32_t>(local);
      Registered &r =
          problem.registered[instBase + (toInst ? dep.dstInst : dep.srcInst)];
      for (int32_t part : partsOfStage[stage])
        (toInst ? r.after : r.before)
            .push_back({toInst ? dep.srcKind : dep.dstKind, part});
      continue;
    }
    for (auto [m, local] : {std::pair{dep.srcModule, dep.srcStage},
                            std::pair{dep.dstModule, dep.dstStage}})
      if (m < 0 || m >= numModules || local < 0 ||
          local >= built.modules[m].placement.numStages())
        return fail("an extra dependency names a stage out of range");
    const int32_t src = built.modules[dep.srcModule].firstStage +
                        static_cast<int32_t>(dep.srcStage);
    const int32_t dst = built.modules[dep.dstModule].firstStage +
                        static_cast<int32_t>(dep.dstStage);
    for (int32_t a : partsOfStage[src])
      for (int32_t b : partsOfStage[dst])
        problem.extraDependencies.push_back({dep.srcKind, a, dep.dstKind, b});
  }

  // A collective's duration in the cost model: a ring all-gather of the
  // largest output its sources send (the output states of the modules it
  // joins), as the simulator's registeredCollectiveTime.
  if (spec.model && spec.cluster)
    for (size_t i = instBase; i < problem.registered.size(); ++i) {
      Registered &r = problem.registered[i];
      if (r.mode == InstMode::Local)
        continue;
      double bytes = 0;
      for (const PartKind &src : r.after) {
        const StageMeta &meta = built.stageMeta[problem.parts[src.part].stage];
        StageShape shape;
        shape.module = spec.model->module(built.moduleNames[meta.module]);
        if (!shape.module)
          continue;
        shape.layers = meta.layers;
        shape.first = meta.first;
        shape.last = meta.last;
        bytes = std::max(
            bytes, stageCost(shape, *spec.model, *spec.cluster).messageBytes);
      }
      r.duration = allGatherTime(
          *spec.cluster, std::vector<int64_t>(r.actors.begin(), r.actors.end()),
          bytes);
    }

  if (std::string error = validate(problem); !error.empty())
    return fail(error);
  return built;
}
