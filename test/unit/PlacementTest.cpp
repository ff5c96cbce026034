//===- PlacementTest.cpp - Partition and placement unit tests -------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Placement.h"

#include <catch2/catch.hpp>

#include <numeric>
#include <string>

using namespace flexpipe::sched;

namespace {

PlacementSpec spec(PlacementKind kind, int64_t actors, int64_t chunks = 1,
                   bool bidirectional = false) {
  PlacementSpec result;
  result.kind = kind;
  result.chunks = chunks;
  result.bidirectional = bidirectional;
  for (int64_t a = 0; a < actors; ++a)
    result.actors.push_back(a);
  return result;
}

std::vector<int64_t> actorsOf(const PlacementSpec &s) {
  llvm::Expected<ModulePlacement> placed = place(s);
  REQUIRE(static_cast<bool>(placed));
  return placed->actorOf;
}

std::string errorOf(const PlacementSpec &s) {
  llvm::Expected<ModulePlacement> placed = place(s);
  REQUIRE(!placed);
  return llvm::toString(placed.takeError());
}

} // namespace

TEST_CASE("one-to-one puts stage i on actor i", "[placement]") {
  CHECK(actorsOf(spec(PlacementKind::OneToOne, 4)) ==
        std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("circular wraps around the actors chunk by chunk", "[placement]") {
  CHECK(actorsOf(spec(PlacementKind::Circular, 4, 2)) ==
        std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(actorsOf(spec(PlacementKind::Circular, 2, 3)) ==
        std::vector<int64_t>{0, 1, 0, 1, 0, 1});
}

TEST_CASE("vshape alternates direction per chunk", "[placement]") {
  // The V of ZB-V / DualPipe-V: stages 0-3 down, 4-7 back up.
  CHECK(actorsOf(spec(PlacementKind::VShape, 4, 2)) ==
        std::vector<int64_t>{0, 1, 2, 3, 3, 2, 1, 0});
  // A wave (Hanayo) with three chunks.
  CHECK(actorsOf(spec(PlacementKind::VShape, 2, 3)) ==
        std::vector<int64_t>{0, 1, 1, 0, 0, 1});
}

TEST_CASE("bidirectional mirrors the first direction", "[placement]") {
  llvm::Expected<ModulePlacement> placed =
      place(spec(PlacementKind::OneToOne, 4, 1, /*bidirectional=*/true));
  REQUIRE(static_cast<bool>(placed));
  CHECK(placed->directions == 2);
  CHECK(placed->stagesPerDirection == 4);
  CHECK(placed->actorOf == std::vector<int64_t>{0, 1, 2, 3, 3, 2, 1, 0});

  // vshape + bidirectional: every actor holds four stages.
  std::vector<int64_t> both =
      actorsOf(spec(PlacementKind::VShape, 2, 2, /*bidirectional=*/true));
  CHECK(both == std::vector<int64_t>{0, 1, 1, 0, 1, 0, 0, 1});
}

TEST_CASE("actor groups map positions to mesh ids", "[placement]") {
  PlacementSpec s = spec(PlacementKind::OneToOne, 0, 1, true);
  s.actors = {4, 6, 5};
  CHECK(actorsOf(s) == std::vector<int64_t>{4, 6, 5, 5, 6, 4});
}

TEST_CASE("explicit maps are taken as given and checked", "[placement]") {
  PlacementSpec s = spec(PlacementKind::Explicit, 2);
  s.stageMap = {0, 1, 1, 0};
  CHECK(actorsOf(s) == std::vector<int64_t>{0, 1, 1, 0});

  s.stageMap = {0, 2};
  CHECK(errorOf(s) == "the stage map puts stage 1 on actor 2, which is not in "
                      "the module's actor group");
  s.stageMap.clear();
  CHECK(errorOf(s) == "an explicit placement needs a non-empty stage map");
}

TEST_CASE("invalid placement parameters are explained", "[placement]") {
  CHECK(errorOf(spec(PlacementKind::OneToOne, 4, 2)) ==
        "one_to_one places exactly one stage per actor but chunks is 2; use "
        "circular or vshape for several stages per actor");
  CHECK(errorOf(spec(PlacementKind::Circular, 4, 0)) ==
        "chunks must be at least 1, got 0");
  CHECK(errorOf(spec(PlacementKind::Circular, 0, 2)) ==
        "a placement needs at least one actor");
  PlacementSpec twice = spec(PlacementKind::OneToOne, 0);
  twice.actors = {1, 1};
  CHECK(errorOf(twice) == "actor 1 appears twice in the actor group");
}

TEST_CASE("even partition spreads the remainder over the first stages",
          "[partition]") {
  CHECK(evenPartition(8, 4) == std::vector<int64_t>{2, 2, 2, 2});
  CHECK(evenPartition(10, 4) == std::vector<int64_t>{3, 3, 2, 2});
  CHECK(evenPartition(3, 3) == std::vector<int64_t>{1, 1, 1});
  CHECK(evenPartition(5, 0).empty());
  for (int64_t layers = 1; layers < 40; ++layers)
    for (int64_t stages = 1; stages <= layers; ++stages) {
      std::vector<int64_t> parts = evenPartition(layers, stages);
      CHECK(std::accumulate(parts.begin(), parts.end(), int64_t{0}) == layers);
      CHECK(parts.front() - parts.back() <= 1);
    }
}
