//===- Placement.h - Stage partition and placement --------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Plain C++ (no IR): how a module's layers are cut into stages and how the
// stages sit on actors. The dialect verifier, the placement pass and the tuner
// all compute placements through this one file.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_PLACEMENT_H
#define FLEXPIPE_SCHEDULING_PLACEMENT_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <vector>

namespace flexpipe::sched {

/// The built-in stage placement strategies (the paper's Table 2).
enum class PlacementKind {
  /// Stage i on actor i: one stage per actor (GPipe, 1F1B).
  OneToOne,
  /// Stage i on actor i mod n: `chunks` rounds over the actors (interleaved
  /// 1F1B, looped BFS).
  Circular,
  /// Chunks alternate direction: chunk 0 goes down actors 0..n-1, chunk 1
  /// comes back up n-1..0, and so on (V-shape for 2 chunks, a wave for more).
  VShape,
  /// A user-given stage -> actor map.
  Explicit,
};

/// What a module says about its placement.
struct PlacementSpec {
  PlacementKind kind = PlacementKind::OneToOne;
  /// Stages per actor per direction (v). Must be 1 for OneToOne and Explicit.
  int64_t chunks = 1;
  /// Adds a second, mirrored pipeline that runs in the opposite direction
  /// over the same actors with replicated weights (Chimera).
  bool bidirectional = false;
  /// The module's actors in pipeline order (actor ids of the mesh).
  std::vector<int64_t> actors;
  /// Explicit only: the actor of each stage.
  std::vector<int64_t> stageMap;
};

/// A module's stages on actors. Stages of direction d have the indices
/// [d * stagesPerDirection, (d + 1) * stagesPerDirection).
struct ModulePlacement {
  int64_t stagesPerDirection = 0;
  int64_t directions = 1;
  /// The actor of each stage, all directions concatenated.
  std::vector<int64_t> actorOf;

  int64_t numStages() const { return stagesPerDirection * directions; }
};

/// Computes where each stage sits. Errors name the offending parameter and say
/// what would be valid.
llvm::Expected<ModulePlacement> place(const PlacementSpec &spec);

/// How a module's layers are split into stages where the spec gives no
/// partition.
enum class Balance : uint8_t {
  Layers, ///< evenly (evenPartition)
  Cost,   ///< balancing the stages' FLOPs (costBalancedPartition)
};

/// Splits `layers` into `stages` parts as evenly as possible; the first
/// `layers % stages` stages get one layer more. Requires stages >= 1.
std::vector<int64_t> evenPartition(int64_t layers, int64_t stages);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_PLACEMENT_H
