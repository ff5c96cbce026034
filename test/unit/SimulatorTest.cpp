//===- SimulatorTest.cpp - Cost model and simulator unit tests ------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/CostModel.h"
#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Simulator.h"

#include "TestSpecs.h"

#include <catch2/catch.hpp>

using namespace flexpipe::sched;
using flexpipe::sched::test::kBreadth;
using flexpipe::sched::test::kDepth;

namespace {

/// A scheduled, communicating program for a single-module spec.
Program programFor(int32_t pp, int32_t m, PlacementKind kind, int64_t chunks,
                   Cttp cttp, StagePriority fwd, StagePriority bwd,
                   std::vector<int64_t> limits) {
  Program program = flexpipe::sched::test::computeProgram(
      flexpipe::sched::test::makeSpec(pp, m, kind, chunks, cttp, fwd, bwd,
                                      std::move(limits)));
  insertCommunication(program);
  return program;
}

SimResult simulate(const Program &program, const SimCosts &costs) {
  Simulator simulator;
  std::string error;
  REQUIRE(simulator.prepare(program, error));
  return simulator.run(costs);
}

using flexpipe::sched::test::oneF1BLimits;

} // namespace

TEST_CASE("1F1B and GPipe with F = B have bubble ratio (p-1)/(m+p-1)",
          "[simulator][closed-form]") {
  for (int32_t p : {1, 2, 3, 4, 8})
    for (int32_t m : {1, 2, 5, 8, 32}) {
      INFO("p=" << p << " m=" << m);
      const double expected = (p - 1.0) / (m + p - 1.0);
      Program gpipe = programFor(p, m, PlacementKind::OneToOne, 1,
                                 Cttp::FwdFirst, kBreadth, kBreadth, {});
      Program oneF1B = programFor(p, m, PlacementKind::OneToOne, 1,
                                  Cttp::BwdFirst, kBreadth, kBreadth,
                                  oneF1BLimits(p));
      for (const Program *program : {&gpipe, &oneF1B}) {
        SimResult r = simulate(*program, unitCosts(*program));
        CHECK(r.iterationTime == Approx(2.0 * (m + p - 1)));
        CHECK(r.bubbleRatio() == Approx(expected));
        for (double bubble : r.bubble)
          CHECK(bubble == Approx(expected));
      }
      // Peak activations: GPipe holds all m on actor 0, 1F1B min(p, m).
      CHECK(simulate(gpipe, unitCosts(gpipe)).peakActivation[0] == m);
      CHECK(simulate(oneF1B, unitCosts(oneF1B)).peakActivation[0] ==
            std::min(p, m));
    }
}

TEST_CASE("interleaving v chunks divides 1F1B's bubble by v",
          "[simulator][closed-form]") {
  for (int32_t p : {2, 4, 8})
    for (int32_t v : {2, 4}) {
      const int32_t m = 4 * p;
      INFO("p=" << p << " v=" << v << " m=" << m);
      Program oneF1B = programFor(p, m, PlacementKind::OneToOne, 1,
                                  Cttp::BwdFirst, kBreadth, kBreadth,
                                  oneF1BLimits(p));
      std::vector<int64_t> limits;
      for (int32_t a = 0; a < p; ++a)
        limits.push_back(p * v + p - 2 * a - 1);
      Program interleaved = programFor(
          p, m, PlacementKind::Circular, v, Cttp::Interleaved,
          {StageOrder::BreadthFirst, p}, {StageOrder::DepthFirst, p}, limits);
      // A chunk takes 1/v of a whole stage.
      SimCosts chunkCosts = unitCosts(interleaved);
      for (auto &d : chunkCosts.duration)
        d = {1.0 / v, 1.0 / v, 1.0 / v, 1.0 / v};
      SimResult whole = simulate(oneF1B, unitCosts(oneF1B));
      SimResult chunked = simulate(interleaved, chunkCosts);
      CHECK(whole.idle[0] == Approx(2.0 * (p - 1)));
      CHECK(chunked.idle[0] == Approx(2.0 * (p - 1) / v));
      CHECK(chunked.busy[0] == Approx(whole.busy[0]));
    }
}

TEST_CASE("a hand-computed case with unequal costs and communication",
          "[simulator]") {
  // Two actors, two micro-batches, 1F1B order. Stage 0: F = 1, B = 2;
  // stage 1: F = 2, B = 3; every message takes 0.5.
  Program program;
  program.numActors = 2;
  program.numStages = 2;
  program.numMicrobatches = 2;
  program.edges = {{0, 1}};
  program.actors = {{{OpKind::Fwd, 0, 0},
                     {OpKind::Fwd, 0, 1},
                     {OpKind::Bwd, 0, 0},
                     {OpKind::Bwd, 0, 1}},
                    {{OpKind::Fwd, 1, 0},
                     {OpKind::Bwd, 1, 0},
                     {OpKind::Fwd, 1, 1},
                     {OpKind::Bwd, 1, 1}}};
  insertCommunication(program);
  SimCosts costs = unitCosts(program);
  costs.duration = {{1, 2, 1, 1}, {2, 3, 1, 1}};
  costs.latency = {0, 0.5, 0.5, 0};
  costs.bandwidth = {0, 0, 0, 0};
  SimResult r = simulate(program, costs);
  // Actor 0: F0 [0,1], F1 [1,2]; activation 0 arrives at 1.5.
  // Actor 1: F0 [1.5,3.5], B0 [3.5,6.5] (gradient 0 arrives at 7),
  //          F1 [6.5,8.5], B1 [8.5,11.5] (gradient 1 arrives at 12).
  // Actor 0: B0 [7,9], B1 [12,14].
  CHECK(r.iterationTime == Approx(14));
  CHECK(r.busy == std::vector<double>{6, 10});
  CHECK(r.idle == std::vector<double>{8, 4});
  auto computeStarts = [&](int32_t actor) {
    std::vector<double> starts;
    for (size_t i = 0; i < program.actors[actor].size(); ++i)
      if (isCompute(program.actors[actor][i].kind))
        starts.push_back(r.start[actor][i]);
    return starts;
  };
  CHECK(computeStarts(0) == std::vector<double>{0, 1, 7, 12});
  CHECK(computeStarts(1) == std::vector<double>{1.5, 3.5, 6.5, 8.5});
  // The critical path ends with actor 0's last backward, after the gradient
  // of micro-batch 1.
  REQUIRE(!r.criticalPath.empty());
  auto [actor, index] = r.criticalPath.back();
  CHECK(actor == 0);
  CHECK(program.actors[0][index].kind == OpKind::Bwd);
  CHECK(program.actors[0][index].mb == 1);
}

TEST_CASE("actors over the device memory are flagged", "[simulator]") {
  Program program = programFor(2, 4, PlacementKind::OneToOne, 1,
                               Cttp::FwdFirst, kBreadth, kBreadth, {});
  SimCosts costs = unitCosts(program);
  costs.activationBytes = {10, 10};
  costs.staticBytes = {5, 100};
  costs.memoryLimit = 60;
  SimResult r = simulate(program, costs);
  // GPipe: all four micro-batches alive on each actor.
  CHECK(r.peakActivation == std::vector<double>{40, 40});
  CHECK(r.totalBytes == std::vector<double>{45, 140});
  CHECK(r.overMemory == std::vector<bool>{false, true});
}

TEST_CASE("the cost model counts embedding and LM head where they sit",
          "[costmodel]") {
  ModuleModel gpt{"gpt", 64, 2560, 64, 512, 1000000, true};
  ModelConfig model;
  model.dtypeBytes = 2;
  model.microBatchSize = 1;
  model.modules = {gpt};
  ClusterConfig cluster;
  cluster.peakFlops = 312e12;
  cluster.efficiency = 0.5;
  // Eight stages of eight layers: the last also multiplies by a 2560 x 1M
  // LM head, 2 b s h V FLOPs per pass against 24 b s h^2 + 4 b s^2 h per
  // layer.
  StageShape middle{&gpt, 8, false, false}, last{&gpt, 8, false, true};
  const double ratio = stageCost(last, model, cluster).fwd /
                       stageCost(middle, model, cluster).fwd;
  const double layer = 24.0 * 512 * 2560 * 2560 + 4.0 * 512 * 512 * 2560;
  const double head = 2.0 * 512 * 2560 * 1e6 + 5.0 * 512 * 1e6;
  CHECK(ratio == Approx((8 * layer + head) / (8 * layer)));
  CHECK(ratio == Approx(4.94).epsilon(0.01));
  // Backward = input gradient + weight gradient = about twice the forward.
  StageCost c = stageCost(middle, model, cluster);
  CHECK(c.bwd == Approx(c.igrad + c.wgrad));
  CHECK(c.bwd / c.fwd == Approx(2.0).epsilon(0.05));
  // The embedding's and the head's parameters sit on the first and last
  // stage.
  StageShape first{&gpt, 8, true, false};
  CHECK(stageCost(first, model, cluster).parameters -
            stageCost(middle, model, cluster).parameters ==
        Approx(1e6 * 2560 + 512 * 2560));
  // The cost-balanced split leaves the LM head's stage one layer.
  std::vector<int64_t> split = costBalancedPartition(gpt, 8);
  CHECK(split == std::vector<int64_t>{9, 9, 9, 9, 9, 9, 9, 1});
  CHECK(transferTime(ClusterConfig{"", 16, 8, 1, 1, 1, {100, 1}, {10, 2}}, 0,
                     9, 100) == Approx(12));
}
