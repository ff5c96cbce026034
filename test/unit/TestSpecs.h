//===- TestSpecs.h - Pipeline specs for the unit tests ----------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_UNIT_TESTSPECS_H
#define FLEXPIPE_TEST_UNIT_TESTSPECS_H

#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Program.h"

#include <catch2/catch.hpp>

namespace flexpipe::sched::test {

/// A hand-built program's sizes and stage edges; its actors' ops are the
/// test's.
inline Program
makeProgram(int32_t actors, int32_t stages, int32_t microbatches,
            std::vector<std::pair<int32_t, int32_t>> edges = {}) {
  Program program;
  program.numActors = actors;
  program.numStages = stages;
  program.numMicrobatches = microbatches;
  program.edges = std::move(edges);
  return program;
}

/// Stage priorities without an interval.
inline const StagePriority kBreadth{StageOrder::BreadthFirst, 0};
inline const StagePriority kDepth{StageOrder::DepthFirst, 0};

/// One module over actors 0..pp-1 with the given placement, one pipeline-wide
/// priority and, when given, per-actor in-flight limits.
inline PipelineSpec makeSpec(int32_t pp, int32_t m, PlacementKind kind,
                      int64_t chunks, Cttp cttp, StagePriority fwd,
                      StagePriority bwd, std::vector<int64_t> actorLimits = {},
                      bool bidirectional = false) {
  PipelineSpec spec;
  spec.actors = pp;
  spec.microbatches = m;
  ModuleSpec module;
  module.name = "gpt";
  module.placement.kind = kind;
  module.placement.chunks = chunks;
  module.placement.bidirectional = bidirectional;
  for (int32_t a = 0; a < pp; ++a)
    module.placement.actors.push_back(a);
  module.layers = pp * chunks * 2;
  spec.modules.push_back(module);
  PrioritySpec priority;
  priority.cttp = cttp;
  priority.fwd = fwd;
  priority.bwd = bwd;
  spec.priorities.push_back(priority);
  if (!actorLimits.empty()) {
    InflightSpec inflight;
    inflight.scope = InflightScope::PerActor;
    inflight.limits = std::move(actorLimits);
    spec.inflight.push_back(inflight);
  }
  return spec;
}

/// The compute-only program the scheduler makes for a spec.
inline Program computeProgram(const PipelineSpec &spec,
                              TimeModel model = TimeModel::Step) {
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  ScheduleResult result = schedule(built->problem, model);
  REQUIRE(result.ok);
  return toProgram(built->problem, result, built->numStages, built->stageEdges,
                   built->sharedStages);
}

/// The value of `expected`; fails the test case with its error otherwise.
template <typename T> T valueOf(llvm::Expected<T> expected) {
  if (!expected)
    FAIL(llvm::toString(expected.takeError()));
  return std::move(*expected);
}

/// Per-actor limits pp - a (1F1B).
inline std::vector<int64_t> oneF1BLimits(int32_t pp) {
  std::vector<int64_t> limits;
  for (int32_t a = 0; a < pp; ++a)
    limits.push_back(pp - a);
  return limits;
}

/// A small test cluster: `devices` devices, 4 per node, 50 TFLOP/s
/// achievable, 40 GB each.
inline ClusterConfig testCluster(int64_t devices) {
  ClusterConfig c;
  c.name = "test";
  c.devices = devices;
  c.devicesPerNode = 4;
  c.peakFlops = 100e12;
  c.efficiency = 0.5;
  c.memoryBytes = 40e9;
  c.intraNode = {100e9, 5e-6};
  c.interNode = {10e9, 10e-6};
  return c;
}

/// configs/clusters/a800.yaml with `devices` devices (8 per node, 312
/// TFLOP/s peak at half efficiency, 80 GiB each).
inline ClusterConfig a800Cluster(int64_t devices) {
  ClusterConfig c = testCluster(devices);
  c.name = "a800";
  c.devicesPerNode = 8;
  c.peakFlops = 312e12;
  c.memoryBytes = 85899345920;
  c.intraNode = {200e9, 5e-6};
  c.interNode = {25e9, 10e-6};
  return c;
}

} // namespace flexpipe::sched::test

#endif // FLEXPIPE_TEST_UNIT_TESTSPECS_H
