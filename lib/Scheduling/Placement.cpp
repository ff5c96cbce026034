//===- Placement.cpp - Stage partition and placement ----------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Placement.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

using namespace flexpipe::sched;

static llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Number of stages per direction the spec implies, or an error saying which
/// parameter is inconsistent.
static llvm::Expected<int64_t> stagesPerDirection(const PlacementSpec &spec) {
  const int64_t numActors = static_cast<int64_t>(spec.actors.size());
  if (numActors < 1)
    return fail("a placement needs at least one actor");
  if (spec.chunks < 1)
    return fail(llvm::formatv("chunks must be at least 1, got {0}",
                              spec.chunks));
  switch (spec.kind) {
  case PlacementKind::OneToOne:
    if (spec.chunks != 1)
      return fail(llvm::formatv(
          "one_to_one places exactly one stage per actor but chunks is {0}; "
          "use circular or vshape for several stages per actor",
          spec.chunks));
    return numActors;
  case PlacementKind::Circular:
  case PlacementKind::VShape:
    return spec.chunks * numActors;
  case PlacementKind::Explicit:
    if (spec.chunks != 1)
      return fail("an explicit stage map gives the stages itself; drop chunks");
    if (spec.stageMap.empty())
      return fail("an explicit placement needs a non-empty stage map");
    return static_cast<int64_t>(spec.stageMap.size());
  }
  return fail("unknown placement kind");
}

llvm::Expected<ModulePlacement>
flexpipe::sched::place(const PlacementSpec &spec) {
  llvm::Expected<int64_t> perDirection = stagesPerDirection(spec);
  if (!perDirection)
    return perDirection.takeError();

  // Position of each actor id in the module's group, for mirroring and for
  // checking explicit maps.
  llvm::DenseMap<int64_t, int64_t> position;
  for (auto [index, actor] : llvm::enumerate(spec.actors))
    if (!position.try_emplace(actor, index).second)
      return fail(llvm::formatv("actor {0} appears twice in the actor group",
                                actor));

  const int64_t n = static_cast<int64_t>(spec.actors.size());
  ModulePlacement result;
  result.stagesPerDirection = *perDirection;
  result.directions = spec.bidirectional ? 2 : 1;
  result.actorOf.reserve(result.numStages());

  for (int64_t stage = 0; stage < *perDirection; ++stage) {
    switch (spec.kind) {
    case PlacementKind::OneToOne:
    case PlacementKind::Circular:
      result.actorOf.push_back(spec.actors[stage % n]);
      break;
    case PlacementKind::VShape: {
      int64_t chunk = stage / n, offset = stage % n;
      result.actorOf.push_back(spec.actors[chunk % 2 == 0 ? offset
                                                          : n - 1 - offset]);
      break;
    }
    case PlacementKind::Explicit: {
      int64_t actor = spec.stageMap[stage];
      if (!position.count(actor))
        return fail(llvm::formatv(
            "the stage map puts stage {0} on actor {1}, which is not in the "
            "module's actor group",
            stage, actor));
      result.actorOf.push_back(actor);
      break;
    }
    }
  }

  // The mirrored pipeline: stage i of the second direction sits on the actor
  // at the opposite end of the group from stage i of the first. Both run
  // over the same actors: a first direction that leaves one out would have
  // the second on others (a map [0, 1, 2, 3] of 5 actors mirrored onto 4, 3,
  // 2, 1).
  if (spec.bidirectional && spec.kind == PlacementKind::Explicit) {
    llvm::DenseSet<int64_t> used(result.actorOf.begin(),
                                 result.actorOf.end());
    for (int64_t actor : spec.actors)
      if (!used.count(actor))
        return fail(llvm::formatv(
            "the stage map leaves actor {0} of the module's group without a "
            "stage; a bidirectional module's mirrored direction runs over "
            "the same actors as the first, so its map must use each of them",
            actor));
  }
  if (spec.bidirectional)
    for (int64_t stage = 0; stage < *perDirection; ++stage)
      result.actorOf.push_back(
          spec.actors[n - 1 - position.lookup(result.actorOf[stage])]);
  return result;
}

std::vector<int64_t> flexpipe::sched::evenPartition(int64_t layers,
                                                    int64_t stages) {
  if (stages < 1)
    return {};
  std::vector<int64_t> counts(stages, layers / stages);
  for (int64_t i = 0; i < layers % stages; ++i)
    ++counts[i];
  return counts;
}
