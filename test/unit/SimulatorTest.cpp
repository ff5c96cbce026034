//===- SimulatorTest.cpp - Cost model and simulator unit tests ------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/Simulator.h"
#include "flexpipe/Scheduling/CostModel.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Scheduling/PipelineSpec.h"

#include "FormatProfile.h"
#include "TestSpecs.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include <random>
#include <set>

using namespace flexpipe::sched;
using flexpipe::sched::test::kBreadth;
using flexpipe::sched::test::kDepth;
using flexpipe::sched::test::makeProgram;
using Slowdowns = std::vector<std::vector<std::vector<double>>>;

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
  REQUIRE(llvm::toString(simulator.prepare(program)) == "");
  return simulator.run(costs);
}

/// Two actors, two micro-batches, 1F1B order, communication inserted.
Program handProgram() {
  Program program = makeProgram(2, 2, 2, {{0, 1}});
  program.actors = {{{OpKind::Fwd, 0, 0},
                     {OpKind::Fwd, 0, 1},
                     {OpKind::Bwd, 0, 0},
                     {OpKind::Bwd, 0, 1}},
                    {{OpKind::Fwd, 1, 0},
                     {OpKind::Bwd, 1, 0},
                     {OpKind::Fwd, 1, 1},
                     {OpKind::Bwd, 1, 1}}};
  insertCommunication(program);
  return program;
}

/// Stage 0: F = 1, B = 2; stage 1: F = 2, B = 3; every message takes 0.5.
SimCosts handCosts(const Program &program) {
  SimCosts costs = unitCosts(program);
  costs.duration = {{1, 2, 1, 1}, {2, 3, 1, 1}};
  costs.latency = {0, 0.5, 0.5, 0};
  costs.bandwidth = {0, 0, 0, 0};
  return costs;
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
  Program program = handProgram();
  SimCosts costs = handCosts(program);
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

TEST_CASE("ranks sharing cores take turns on them", "[simulator]") {
  // The hand-computed case above on one core: the two actors overlap
  // in [1.5, 2], where each computes at half speed.
  Program program = handProgram();
  SimCosts costs = handCosts(program);
  costs.coreGroup = {0, 0};
  costs.groupCores = {1};
  SimResult r = simulate(program, costs);
  auto computeEnds = [&](int32_t actor) {
    std::vector<double> ends;
    for (size_t i = 0; i < program.actors[actor].size(); ++i)
      if (isCompute(program.actors[actor][i].kind))
        ends.push_back(r.end[actor][i]);
    return ends;
  };
  // [0,1] actor 0's F0 alone; [1,1.5] its F1 alone (activation 0 on its
  // way); from 1.5 both at half speed: F1 ends at 2.5, actor 1's F0 has 1.5
  // left and ends alone at 4. B0 [4,7] on actor 1, then its F1 alone until
  // gradient 0 arrives (7.5) and at half speed with actor 0's B0 from then:
  // F1 ends at 10.5, B0 at 11.5, actor 1's B1 at 14, actor 0's B1 (gradient
  // at 14.5) at 16.5.
  CHECK(computeEnds(0) == std::vector<double>{1, 2.5, 11.5, 16.5});
  CHECK(computeEnds(1) == std::vector<double>{4, 7, 10.5, 14});
  CHECK(r.iterationTime == Approx(16.5));
  CHECK(r.busy == std::vector<double>{1 + 1.5 + 4 + 2, 2.5 + 3 + 3.5 + 3.5});
  // Two cores, but two computations at once slow each other twofold: the
  // same.
  costs.groupCores = {2};
  costs.groupSlowdown = {{{1, 1, 2}}};
  r = simulate(program, costs);
  CHECK(computeEnds(0) == std::vector<double>{1, 2.5, 11.5, 16.5});
  CHECK(computeEnds(1) == std::vector<double>{4, 7, 10.5, 14});
  costs.groupCores = {1};
  costs.groupSlowdown.clear();
  // One core and free messages: the core never idles while work is left.
  costs.latency = {0, 0, 0, 0};
  r = simulate(program, costs);
  CHECK(r.iterationTime == Approx(2 * (1 + 2) + 2 * (2 + 3)));

  // Enough cores: the same times as without sharing, for many programs
  // and costs; fewer: between that and the work over the cores.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.2, 3.0);
  for (int32_t pp : {2, 3, 5}) {
    for (int32_t m : {1, 3, 2 * pp + 1}) {
      for (auto [kind, chunks] :
           {std::pair{PlacementKind::OneToOne, int64_t(1)},
            std::pair{PlacementKind::Circular, int64_t(2)},
            std::pair{PlacementKind::VShape, int64_t(2)}}) {
        Program p =
            programFor(pp, m, kind, chunks, Cttp::BwdFirst, kDepth, kBreadth,
                       chunks == 1 ? oneF1BLimits(pp) : std::vector<int64_t>{});
        SimCosts c = unitCosts(p);
        for (auto &d : c.duration)
          d = {cost(rng), cost(rng), 1, 1};
        c.latency.assign(static_cast<size_t>(pp) * pp, 0.3);
        c.bandwidth.assign(static_cast<size_t>(pp) * pp, 0);
        const SimResult alone = simulate(p, c);
        c.coreGroup.assign(pp, 0);
        c.groupCores = {static_cast<double>(pp)};
        const SimResult plenty = simulate(p, c);
        INFO("pp " << pp << " m " << m << " chunks " << chunks);
        CHECK(plenty.iterationTime == Approx(alone.iterationTime));
        for (int32_t a = 0; a < pp; ++a) {
          CHECK(plenty.busy[a] == Approx(alone.busy[a]));
          for (size_t i = 0; i < alone.end[a].size(); ++i)
            CHECK(plenty.end[a][i] == Approx(alone.end[a][i]));
        }
        for (double cores : {1.0, 1.5, pp - 0.5}) {
          c.groupCores = {cores};
          const SimResult shared = simulate(p, c);
          CHECK(shared.iterationTime >= alone.iterationTime * (1 - 1e-9));
          CHECK(shared.iterationTime >= alone.busyTotal() / cores * (1 - 1e-9));
          // No computation runs slower than cores / pp of a core.
          CHECK(shared.iterationTime <=
                alone.iterationTime * pp / cores * (1 + 1e-9));
          CHECK(shared.peakActivation == alone.peakActivation);
        }
      }
    }
  }
}

namespace {
/// 1F1B of a 4-layer GPT on 2 actors (2 blocks each; the embedding on the
/// first, the head on the last) and a CPU cluster of `devices` devices.
struct TwoStageGpt {
  Program program = programFor(2, 4, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                               kDepth, kBreadth, {});
  ModuleModel gpt{"gpt", 4, 64, 4, 32, 256, true};
  ModelConfig model;
  ClusterConfig cluster;
  explicit TwoStageGpt(int64_t devices) {
    model.microBatchSize = 1;
    model.globalBatchSize = 4;
    model.modules = {gpt};
    program.moduleNames = {"gpt"};
    program.stageMeta = {{0, 2, true, false}, {0, 2, false, true}};
    cluster.deviceKind = "cpu";
    cluster.devices = cluster.devicesPerNode = devices;
    cluster.peakFlops = 1e9;
  }
};
} // namespace

TEST_CASE("every instruction takes the runtime's overhead on top",
          "[simulator]") {
  Program program = handProgram();
  SimCosts costs = handCosts(program);
  costs.instructionOverhead = 0.25;
  SimResult r = simulate(program, costs);
  // The hand case above with 0.25 more per instruction: a computation
  // computes that much longer, a send ends that much later (its message
  // leaves at its start), a receive ends that much after its message.
  // Actor 0: F0 [0,1.25], send [1.25,1.5] (arrives 1.75), F1 [1.5,2.75],
  //          send [2.75,3] (arrives 3.25).
  // Actor 1: recv -> 2, F0 [2,4.25], B0 [4.25,7.5], send (arrives 8) ends
  //          7.75, recv -> 8, F1 [8,10.25], B1 [10.25,13.5], send (14).
  // Actor 0: recv -> 8.25, B0 [8.25,10.5], recv -> 14.25, B1 [14.25,16.5].
  CHECK(r.iterationTime == Approx(16.5));
  // Busy: the computations and each send's and receive's overhead (4 of
  // each actor), which the runtime spends on its core, not idle.
  CHECK(r.busy == std::vector<double>{8, 12});
  // What sets it: measured runs at the job's ranks (points without a
  // shape, interpolated), or a run's own profile, which wins.
  TwoStageGpt setup(4);
  ClusterConfig &cluster = setup.cluster;
  cluster.name = "measured";
  cluster.memoryBytes = 4e9;
  cluster.intraNode = cluster.interNode = {1.5e9, 5e-7};
  cluster.measured.coresPerNode = 2;
  cluster.measured.contention = {{1, 1.0}, {2, 1.0}, {4, 1.0}};
  cluster.measured.contention[0].instruction = 1e-6;
  cluster.measured.contention[1].instruction = 2e-6;
  cluster.measured.contention[2].instruction = 6e-6;
  cluster.jobDevices = 3;
  CHECK(instructionOverhead(cluster) == Approx(4e-6));
  cluster.jobDevices = 2;
  SimCosts priced;
  REQUIRE(llvm::toString(modelCosts(setup.program, setup.model, cluster,
                                    nullptr, {0, 1}, priced)) == "");
  CHECK(priced.instructionOverhead == Approx(2e-6));
  Profile own;
  own.instructionOverhead = 5e-7;
  REQUIRE(llvm::toString(modelCosts(setup.program, setup.model, cluster, &own,
                                    {0, 1}, priced)) == "");
  CHECK(priced.instructionOverhead == Approx(5e-7));
  REQUIRE(llvm::toString(profileCosts(setup.program, own, priced)) == "");
  CHECK(priced.instructionOverhead == Approx(5e-7));
  // A registered operation: one unit alone, free with a model, the run's
  // mean where its profile timed them.
  CHECK(priced.execTime == 1.0);
  own.execSeconds = 2e-5;
  REQUIRE(llvm::toString(profileCosts(setup.program, own, priced)) == "");
  CHECK(priced.execTime == Approx(2e-5));
  REQUIRE(llvm::toString(modelCosts(setup.program, setup.model, cluster, &own,
                                    {0, 1}, priced)) == "");
  CHECK(priced.execTime == Approx(2e-5));
  // An analytic cluster has none.
  CHECK(instructionOverhead(ClusterConfig()) == 0.0);
  // Both files carry it.
  const std::string text = formatProfile(own);
  Profile read;
  REQUIRE(llvm::toString(loadProfile("p.yaml", read, &text)) == "");
  CHECK(read.instructionOverhead == own.instructionOverhead);
  CHECK(read.execSeconds == own.execSeconds);
  const std::string file = formatCluster(cluster);
  ClusterConfig back;
  REQUIRE(llvm::toString(loadCluster("c.yaml", back, &file)) == "");
  CHECK(back.measured.contention[2].instruction == 6e-6);
  CHECK(formatCluster(back) == file);
}

TEST_CASE("a rank that waited does not hold its shared core through its "
          "next instructions",
          "[simulator]") {
  // Stages 0 -> 1 -> 2 and a stage 3 alone; actors 1 and 3 share a core
  // that they take turns on. Actor 1 waits for its second input until 16,
  // then sends the first micro-batch on: the core is actor 3's meanwhile.
  Program p = makeProgram(4, 4, 2, {{0, 1}, {1, 2}});
  using K = OpKind;
  p.actors = {{{K::Fwd, 0, 0},
               {K::SendAct, 0, 0, 1},
               {K::Fwd, 0, 1},
               {K::SendAct, 0, 1, 1}},
              {{K::RecvAct, 1, 0, 0},
               {K::Fwd, 1, 0},
               {K::RecvAct, 1, 1, 0},
               {K::SendAct, 1, 0, 2},
               {K::Fwd, 1, 1},
               {K::SendAct, 1, 1, 2}},
              {{K::RecvAct, 2, 0, 1},
               {K::Fwd, 2, 0},
               {K::RecvAct, 2, 1, 1},
               {K::Fwd, 2, 1}},
              {{K::Fwd, 3, 0}, {K::Fwd, 3, 1}}};
  SimCosts c = unitCosts(p);
  c.unit = "s";
  c.duration = {{8, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, {10, 1, 1, 1}};
  c.latency.assign(16, 0);
  c.bandwidth.assign(16, 0);
  c.coreGroup = {-1, 0, -1, 0};
  c.groupCores = {1.0};
  c.groupSlice = 0.5;
  for (double overhead : {0.0, 1e-3}) {
    c.instructionOverhead = overhead;
    SimResult r = simulate(p, c);
    INFO("overhead " << overhead);
    // Actor 3's two forwards take turns with actor 1's first one only:
    // the first ends at 11 (19.5 when actor 1 held the core from 9.5 to
    // 16 while it waited).
    CHECK(r.end[3][0] == Approx(11).epsilon(1e-3));
    CHECK(r.iterationTime == Approx(22).epsilon(1e-3));
  }
}

TEST_CASE("a measured cluster's oversubscribed ranks share cores",
          "[costmodel]") {
  // pp 2 x dp 2 on a node of 2 cores: the two simulated actors (replica 0)
  // have one core between them, the other replica the other core.
  TwoStageGpt setup(4);
  Program &program = setup.program;
  const ModelConfig &model = setup.model;
  ClusterConfig &cluster = setup.cluster;
  cluster.measured.coresPerNode = 2;
  cluster.jobDevices = 4;
  SimCosts costs;
  REQUIRE(llvm::toString(modelCosts(program, model, cluster, nullptr, {0, 2},
                                    costs)) == "");
  CHECK(costs.coreGroup == std::vector<int32_t>{0, 0});
  CHECK(costs.groupCores == std::vector<double>{1.0});
  CHECK(costs.groupSlice == 0.0); // none measured: processor sharing
  cluster.measured.timeSlice = 2.5e-3;
  REQUIRE(llvm::toString(modelCosts(program, model, cluster, nullptr, {0, 2},
                                    costs)) == "");
  CHECK(costs.groupSlice == 2.5e-3);
  cluster.measured.timeSlice = 0;
  // Two ranks on two cores share nothing, unless they slow each other.
  cluster.jobDevices = 2;
  REQUIRE(llvm::toString(modelCosts(program, model, cluster, nullptr, {0, 1},
                                    costs)) == "");
  CHECK(costs.coreGroup.empty());
  cluster.measured.contention = {{1, 1.0}, {2, 1.5}, {4, 3.0}};
  REQUIRE(llvm::toString(modelCosts(program, model, cluster, nullptr, {0, 1},
                                    costs)) == "");
  CHECK(costs.coreGroup == std::vector<int32_t>{0, 0});
  CHECK(costs.groupCores == std::vector<double>{2.0});
  CHECK(costs.groupSlowdown == Slowdowns{{{1, 1, 1.5}}});
  // With dp 2 on 4 ranks, one of replica 0's actors computing stands for
  // two ranks computing.
  cluster.jobDevices = 4;
  REQUIRE(llvm::toString(modelCosts(program, model, cluster, nullptr, {0, 2},
                                    costs)) == "");
  CHECK(costs.groupCores == std::vector<double>{1.0});
  CHECK(costs.groupSlowdown == Slowdowns{{{1, 1.5, 3}}});
  // The runtime binds the ranks round robin (coreOf): pp 4 on 2 cores puts
  // actors 0 and 2 on one core and 1 and 3 on the other; one replica, so n
  // of the 4 actors computing are n ranks of the node computing (a lone
  // one is not slowed, however many ranks the node has).
  Program four = programFor(4, 4, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                            kDepth, kBreadth, {});
  four.moduleNames = {"gpt"};
  four.stageMeta = {{0, 1, true, false},
                    {0, 1, false, false},
                    {0, 1, false, false},
                    {0, 1, false, true}};
  REQUIRE(llvm::toString(modelCosts(four, model, cluster, nullptr, {0, 1, 2, 3},
                                    costs)) == "");
  CHECK(costs.coreGroup == std::vector<int32_t>{0, 1, 0, 1});
  CHECK(costs.groupCores == std::vector<double>{1.0, 1.0});
  CHECK(costs.groupNode == std::vector<int32_t>{0, 0});
  CHECK(costs.groupSlowdown ==
        Slowdowns{{{1, 1, 1.5, 2.25, 3}}, {{1, 1, 1.5, 2.25, 3}}});
  // With one micro-batch the pipeline computes on one rank at a time, and
  // the contention changes nothing; with four, ranks compute at once and
  // slow each other.
  for (int32_t m : {1, 4}) {
    Program chain = programFor(4, m, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                               kDepth, kBreadth, {});
    chain.moduleNames = four.moduleNames;
    chain.stageMeta = four.stageMeta;
    auto simulated = [&] {
      SimCosts c;
      REQUIRE(llvm::toString(modelCosts(chain, model, cluster, nullptr,
                                        {0, 1, 2, 3}, c)) == "");
      return simulate(chain, c).iterationTime;
    };
    const double contended = simulated();
    const auto measured = cluster.measured.contention;
    cluster.measured.contention = {{1, 1.0}};
    const double free = simulated();
    cluster.measured.contention = measured;
    INFO("m " << m);
    if (m == 1)
      CHECK(contended == Approx(free));
    else
      CHECK(contended > free * 1.2);
  }
  // pp 1 x dp 4: replica 0's one actor shares its core with replica 2's,
  // which computes in step with it: half a core.
  Program one = programFor(1, 4, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                           kDepth, kBreadth, {});
  one.moduleNames = {"gpt"};
  one.stageMeta = {{0, 4, true, true}};
  REQUIRE(llvm::toString(
              modelCosts(one, model, cluster, nullptr, {0}, costs)) == "");
  CHECK(costs.coreGroup == std::vector<int32_t>{0});
  CHECK(costs.groupCores == std::vector<double>{0.5});
  CHECK(costs.groupSlowdown == Slowdowns{{{1, 3}}});
  // A partly used node: 3 ranks on a node of 2 (2 cores each), dp 1; the
  // second node's one rank has a core to itself.
  cluster.measured.contention.clear();
  cluster.devicesPerNode = 2;
  cluster.jobDevices = 3;
  program = programFor(3, 4, PlacementKind::OneToOne, 1, Cttp::BwdFirst, kDepth,
                       kBreadth, {});
  program.moduleNames = {"gpt"};
  program.stageMeta = {
      {0, 2, true, false}, {0, 1, false, false}, {0, 1, false, true}};
  cluster.measured.coresPerNode = 1;
  REQUIRE(llvm::toString(modelCosts(program, model, cluster, nullptr, {0, 1, 2},
                                    costs)) == "");
  CHECK(costs.coreGroup == std::vector<int32_t>{0, 0, -1});
  CHECK(costs.groupCores == std::vector<double>{1.0});
  program = programFor(2, 4, PlacementKind::OneToOne, 1, Cttp::BwdFirst, kDepth,
                       kBreadth, {});
  program.moduleNames = {"gpt"};
  program.stageMeta = {{0, 2, true, false}, {0, 2, false, true}};
  cluster.measured.coresPerNode = 2;
  cluster.devicesPerNode = 4;
  cluster.jobDevices = 4;
  cluster.measured.contention = {{1, 1.0}, {2, 1.5}, {4, 3.0}};
  // With a run's own profile too (it times each computation, not the
  // waits for a core between them).
  Profile profile;
  profile.stages.push_back({});
  REQUIRE(llvm::toString(modelCosts(program, model, cluster, &profile, {0, 2},
                                    costs)) == "");
  CHECK(costs.groupCores == std::vector<double>{1.0});
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

TEST_CASE("the input gradient trades activations for the weight-gradient "
          "state",
          "[simulator]") {
  // One actor, one stage: F0 F1 I0 I1 W0 W1 with activations 10 and a
  // weight-gradient state of 6 (then 14) per micro-batch.
  Program program = makeProgram(1, 1, 2);
  program.actors = {{{OpKind::Fwd, 0, 0},
                     {OpKind::Fwd, 0, 1},
                     {OpKind::Igrad, 0, 0},
                     {OpKind::Igrad, 0, 1},
                     {OpKind::Wgrad, 0, 0},
                     {OpKind::Wgrad, 0, 1}}};
  SimCosts costs = unitCosts(program);
  costs.activationBytes = {10};
  // Not given: the activations stay to the weight gradient.
  CHECK(simulate(program, costs).peakActivation[0] == 20);
  costs.weightGradBytes = {6};
  CHECK(simulate(program, costs).peakActivation[0] == 20);
  costs.weightGradBytes = {14};
  CHECK(simulate(program, costs).peakActivation[0] == 28);
  // Fused: a backward holds the state between its halves, over what the
  // other micro-batch keeps.
  program.actors = {{{OpKind::Fwd, 0, 0},
                     {OpKind::Fwd, 0, 1},
                     {OpKind::Bwd, 0, 0},
                     {OpKind::Bwd, 0, 1}}};
  CHECK(simulate(program, costs).peakActivation[0] == 24);
  costs.weightGradBytes = {6};
  CHECK(simulate(program, costs).peakActivation[0] == 20);
  // Every computation's effect nets to zero over a micro-batch.
  for (double state : {0.0, 6.0, 14.0}) {
    costs.weightGradBytes = {state};
    double split = 0, fused = 0;
    for (OpKind kind : {OpKind::Fwd, OpKind::Igrad, OpKind::Wgrad})
      split += costs.memoryEffect(kind, 0).after;
    for (OpKind kind : {OpKind::Fwd, OpKind::Bwd})
      fused += costs.memoryEffect(kind, 0).after;
    CHECK(split == 0);
    CHECK(fused == 0);
  }
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
  // Vocabulary-parallel: the embedding and head are stages of their own,
  // the layer stages alike (every split but even one was slower).
  CHECK(costBalancedPartition(gpt, 8, /*vocabParallel=*/true) ==
        std::vector<int64_t>(8, 8));
  ModuleModel odd = gpt;
  odd.layers = 66;
  std::vector<int64_t> oddSplit = costBalancedPartition(odd, 8, true);
  CHECK(*std::max_element(oddSplit.begin(), oddSplit.end()) == 9);
  CHECK(std::accumulate(oddSplit.begin(), oddSplit.end(), int64_t(0)) == 66);
  CHECK(transferTime(ClusterConfig{"", 16, 8, 1, 1, 1, {100, 1}, {10, 2}}, 0, 9,
                     100) == Approx(12));
  // Activations per layer: s b h (34 + 5 a s / h) dtype / 2 (Korthikanti);
  // flash attention keeps an fp32 log-sum-exp per query row and head
  // instead of the scores' softmax.
  const double s = 512, h = 2560, a = 64;
  CHECK(stageCost(middle, model, cluster).activationBytes ==
        Approx(8 * s * h * (34 + 5 * a * s / h)));
  model.flashAttention = true;
  CHECK(stageCost(middle, model, cluster).activationBytes ==
        Approx(8 * (s * h * 34 + 4 * a * s)));
  // The weight-gradient state: 20 s b h values per layer (the products'
  // and LayerNorms' inputs and output gradients); the head adds its input,
  // the final norm's and the logits' gradient, b s (3 h + V); the
  // embedding its output's gradient.
  const double v = 1e6, d = 2;
  CHECK(stageCost(middle, model, cluster).weightGradBytes ==
        Approx(8 * 20 * s * h * d));
  CHECK(stageCost(last, model, cluster).weightGradBytes ==
        Approx(8 * 20 * s * h * d + s * (3 * h + v) * d));
  CHECK(stageCost(first, model, cluster).weightGradBytes ==
        Approx(8 * 20 * s * h * d + s * h * d));
  // A tower's end (no LM head): its final norm's input, and its gradient
  // from the input gradient on.
  ModuleModel tower = gpt;
  tower.lmHead = false;
  StageShape towerEnd{&tower, 8, false, true};
  CHECK(stageCost(towerEnd, model, cluster).activationBytes ==
        Approx(stageCost(middle, model, cluster).activationBytes + s * h * d));
  CHECK(stageCost(towerEnd, model, cluster).weightGradBytes ==
        Approx(8 * 20 * s * h * d + 2 * s * h * d));
}

TEST_CASE("a measured cluster prices layers, contention and the optimizer",
          "[costmodel]") {
  ModuleModel gpt{"gpt", 8, 64, 4, 32, 256, true};
  ModelConfig model;
  model.dtypeBytes = 4;
  model.modules = {gpt};
  ClusterConfig cluster;
  cluster.devices = cluster.devicesPerNode = 6;
  cluster.peakFlops = 1e9;
  MachineProfile &m = cluster.measured;
  // Blocks measured at micro-batches 1 and 4, the head at 2 only; the
  // embedding not at all.
  m.layers = {
      {MeasuredLayer::Block, 64, 4, 32, 0, 4, 0.4, 0.5, 0.3},
      {MeasuredLayer::Block, 64, 4, 32, 0, 1, 0.1, 0.2, 0.1},
      {MeasuredLayer::Head, 64, 0, 32, 256, 2, 0.02, 0.04, 0.06},
      // Another shape: never used for this module.
      {MeasuredLayer::Block, 64, 8, 32, 0, 1, 9, 9, 9},
  };
  auto block = [&](int64_t b) {
    return *m.layer(MeasuredLayer::Block, gpt, b);
  };
  // Linear between the points, extrapolated beyond them, proportional from
  // a single point.
  CHECK(block(1).fwd == Approx(0.1));
  CHECK(block(2).fwd == Approx(0.2));
  CHECK(block(2).igrad == Approx(0.3));
  CHECK(block(8).fwd == Approx(0.8));
  CHECK(m.layer(MeasuredLayer::Head, gpt, 4)->wgrad == Approx(0.12));
  CHECK_FALSE(m.layer(MeasuredLayer::Embedding, gpt, 1));
  {
    // Noisy points whose segment falls: beyond them a larger batch is not
    // faster than the last point, a smaller one not slower than the first
    // (nor under its time scaled down), and no time reaches 0.
    MachineProfile noisy;
    noisy.layers = {
        {MeasuredLayer::Block, 64, 4, 32, 0, 4, 2e-3, 2e-3, 1e-3},
        {MeasuredLayer::Block, 64, 4, 32, 0, 8, 1.5e-3, 1e-3, 1e-3}};
    const MeasuredLayer big = *noisy.layer(MeasuredLayer::Block, gpt, 32);
    CHECK(big.fwd == Approx(1.5e-3));
    CHECK(big.igrad == Approx(1e-3));
    CHECK(big.wgrad == Approx(1e-3)); // flat: the nearest point's
    const MeasuredLayer small = *noisy.layer(MeasuredLayer::Block, gpt, 1);
    CHECK(small.fwd == Approx(2e-3)); // rising towards smaller: capped
    CHECK(small.wgrad == Approx(1e-3));
    // Rising faster than in proportion: extrapolated above, and below the
    // first point not under its time scaled down.
    noisy.layers[1].fwd = 8e-3;
    CHECK(noisy.layer(MeasuredLayer::Block, gpt, 16)->fwd == Approx(20e-3));
    CHECK(noisy.layer(MeasuredLayer::Block, gpt, 2)->fwd == Approx(1e-3));
  }

  // A stage's durations: its blocks and head measured, the embedding (not
  // measured) analytic, which has no FLOPs.
  model.microBatchSize = 2;
  StageShape last{&gpt, 3, true, true};
  StageCost c = stageCost(last, model, cluster);
  CHECK(c.fwd == Approx(3 * 0.2 + 0.02));
  CHECK(c.igrad == Approx(3 * 0.3 + 0.04));
  CHECK(c.wgrad == Approx(3 * (0.1 + 0.2 / 3) + 0.06));
  CHECK(c.bwd == Approx(c.igrad + c.wgrad));
  // A module whose blocks were not measured falls back to FLOPs.
  ModuleModel wide = gpt;
  wide.hidden = 128;
  StageShape other{&wide, 1, false, false};
  CHECK(stageCost(other, model, cluster).fwd ==
        Approx(stageFlops(other, 2).fwd / 1e9));

  // Contention: measured at 1, 2 and 4 ranks running at once; the job's
  // devices on a node pick the point (interpolated, the last one beyond).
  // The optimizer step also takes turns on the cores: 3 ranks on 2 cores.
  m.coresPerNode = 2;
  m.contention = {{1, 1.0}, {2, 1.1}, {4, 2.3}};
  m.optimizerPerParameter = 1e-8;
  cluster.jobDevices = 1;
  CHECK(computeSlowdown(cluster) == Approx(1.0));
  cluster.jobDevices = 3;
  CHECK(computeSlowdown(cluster) == Approx(1.7));
  CHECK(computeSlowdown(cluster, &gpt, 2) == Approx(1.1));
  CHECK(computeSlowdown(cluster, &gpt, 1.5) == Approx(1.05));
  CHECK(computeSlowdown(cluster, &gpt, 9) == Approx(2.3));
  // A stage's durations are its time alone; the simulator slows it by the
  // ranks computing beside it.
  CHECK(stageCost(last, model, cluster).fwd == Approx(0.6 + 0.02));
  // Bound round robin, 3 ranks put 2 on the busiest core.
  CHECK(coreOversubscription(cluster) == Approx(2));
  CHECK(optimizerStepTime(cluster, &gpt, 1e6) == Approx(1.7 * 2 * 1e-2));
  cluster.jobDevices = 2;
  CHECK(coreOversubscription(cluster) == Approx(1));
  cluster.jobDevices = 3;
  // Points of a module's own shape take precedence for its computation;
  // message latency comes from the points without a shape.
  m.contention[1].latency = 1e-4;
  m.contention[2].latency = 3e-4;
  ModuleModel big{"gpt", 8, 256, 4, 128, 1024, true};
  m.contention.push_back({1, 1.0, 0, 0, 256, 4, 128});
  m.contention.push_back({4, 3.0, 0, 0, 256, 4, 128});
  CHECK(computeSlowdown(cluster, &big) == Approx(1 + 2.0 * 2 / 3));
  CHECK(computeSlowdown(cluster, &gpt) == Approx(1.7));
  CHECK(messageLatency(cluster, cluster.intraNode) == Approx(2e-4));
  CHECK(iterationOverhead(cluster) == 0.0);
  m.contention[2].overhead = 4e-3;
  CHECK(iterationOverhead(cluster) == Approx(2e-3));
  CHECK(transferTime(cluster, 0, 1, 0) == Approx(2e-4));
  m.contention.resize(3);
  cluster.jobDevices = 0; // the cluster's 6 devices
  CHECK(computeSlowdown(cluster) == Approx(2.3));
  CHECK(coreOversubscription(cluster) == Approx(3));
  cluster.devicesPerNode = 2; // ranks beyond a node run on other nodes
  CHECK(computeSlowdown(cluster) == Approx(1.1));
  CHECK(coreOversubscription(cluster) == 1.0);
  // An analytic cluster models neither.
  ClusterConfig analytic;
  CHECK(computeSlowdown(analytic) == 1.0);
  CHECK(coreOversubscription(analytic) == 1.0);
  CHECK(optimizerStepTime(analytic, &gpt, 1e9) == 0.0);
  CHECK(iterationOverhead(analytic) == 0.0);
}

TEST_CASE("a measured cluster file reads back as written", "[costmodel]") {
  ClusterConfig cluster;
  cluster.name = "cpu-measured";
  cluster.deviceKind = "cpu";
  cluster.devices = cluster.devicesPerNode = 4;
  cluster.peakFlops = 5.3e10;
  cluster.efficiency = 0.8;
  cluster.memoryBytes = 4e9;
  cluster.intraNode = cluster.interNode = {1.5e9, 5e-7};
  cluster.measured.coresPerNode = 2;
  cluster.measured.timeSlice = 2.5e-3;
  cluster.measured.handoff = 1.5e-5;
  cluster.measured.optimizerPerParameter = 1.25e-8;
  cluster.measured.allReduce = {7.5e8, 2.5e-6};
  cluster.measured.contention = {
      {1, 1.0}, {3, 2.125, 1e-4, 2e-3}, {1, 1.0, 0, 0, 256, 4, 128}};
  cluster.measured.layers = {
      {MeasuredLayer::Block, 64, 4, 32, 0, 2, 1e-4, 2e-4, 3e-4},
      {MeasuredLayer::Embedding, 64, 0, 32, 256, 1, 1e-6, 2e-7, 1e-6},
      {MeasuredLayer::Head, 64, 0, 32, 256, 8, 4e-4, 5e-4, 2e-4}};
  const std::string text = formatCluster(cluster);
  ClusterConfig back;
  REQUIRE(llvm::toString(loadCluster("measured.yaml", back, &text)) == "");
  CHECK(formatCluster(back) == text);
  CHECK(back.measured.layers.size() == 3);
  CHECK(back.measured.layers[2].kind == MeasuredLayer::Head);
  CHECK(back.measured.contention[1].slowdown == 2.125);
  CHECK(back.measured.allReduce.bandwidth == 7.5e8);
  CHECK(back.measured.timeSlice == 2.5e-3);
  CHECK(back.measured.handoff == 1.5e-5);
  // The measured all-reduce prices every ring step within a node; a ring
  // over two nodes, and pipeline messages, keep the links.
  CHECK(allReduceTime(back, {0, 1}, 1.5e6) ==
        Approx(2 * (2.5e-6 + 0.75e6 / 7.5e8)));
  CHECK(transferTime(back, 0, 1, 1.5e9) == Approx(1.0).epsilon(1e-3));
  CHECK(transferTime(back, 0, 1, 1.5e9, true) == Approx(2.5e-6 + 2.0));
  back.devicesPerNode = 2;
  CHECK(allReduceTime(back, {0, 2}, 1.5e6) ==
        Approx(2 * (5e-7 + 0.75e6 / 1.5e9)));

  // Located errors in the measured section.
  auto error = [](const std::string &yaml) {
    ClusterConfig c;
    return llvm::toString(loadCluster("c.yaml", c, &yaml));
  };
  const std::string head =
      "devices: 1\ndevices_per_node: 1\npeak_flops: 1\nefficiency: 1\n"
      "memory_bytes: 1\nintra_node: {bandwidth_bytes_per_s: 1, latency_s: "
      "0}\ninter_node: {bandwidth_bytes_per_s: 1, latency_s: 0}\n";
  CHECK(error(head + "measured:\n  layers:\n    - {kind: mlp, hidden: 1, "
                     "seq: 1, micro_batch: 1, fwd_s: 0, igrad_s: 0, "
                     "wgrad_s: 0}\n") ==
        "c.yaml:10:14: error: key 'kind' must be block, embedding or head, "
        "got 'mlp'");
  CHECK(error(head + "measured:\n  contention:\n    - {hidden: 1, heads: 1, "
                     "seq: 1, ranks: 1, slowdown: 1, instruction_s: 1e-6}\n") ==
        "c.yaml:10:75: error: key 'instruction_s' belongs to the points "
        "without a shape (hidden, heads, seq), which every model shares; a "
        "shaped point's would be ignored");
  CHECK(error(head + "measured:\n  contention:\n    - {ranks: 1, slowdown: "
                     "1}\n    - {ranks: 1, slowdown: 1}\n") ==
        "c.yaml:11:7: error: contention points of one shape must have "
        "increasing ranks");
  // From ranks 1: below its first point a shape is priced at that point.
  CHECK(error(head + "measured:\n  contention:\n    - {ranks: 2, slowdown: "
                     "1.5}\n") ==
        "c.yaml:10:7: error: a shape's contention points start at ranks 1 (a "
        "rank computing alone), not 2");
  CHECK(error(head + "measured:\n  layers:\n    - {kind: block, hidden: 1, "
                     "seq: 1, micro_batch: 1, fwd_s: 0, igrad_s: 0, "
                     "wgrad_s: 0}\n") ==
        "c.yaml:10:7: error: missing key 'heads' in a measured layer");
}

TEST_CASE("a wait on a send ends when its message is in the receive",
          "[simulator][async]") {
  // The hand program's actor 0: F0, send 0, F1, send 1, recv grad 0, B0,
  // recv grad 1, B1. Its second send gets a wait right after it.
  Program program = handProgram();
  auto &ops = program.actors[0];
  REQUIRE(ops[3].kind == OpKind::SendAct);
  ops[3].token = 0;
  ProgOp wait{OpKind::Wait};
  wait.token = 0;
  ops.insert(ops.begin() + 4, wait);
  REQUIRE_FALSE(verify(program).has_value());
  // Actor 1 posts the receive of activation 1 after B0, at 6.5 (the
  // hand-computed case's times): the message moves then and takes 0.5, so
  // actor 0 leaves the wait at 7, not when it sent at 2.
  SimResult r = simulate(program, handCosts(program));
  CHECK(r.start[0][4] == Approx(2));
  CHECK(r.start[0][5] == Approx(7));
  CHECK(r.iterationTime == Approx(14));
}

TEST_CASE("receives posted early keep the program and help rendezvous",
          "[simulator][async]") {
  // The hand program's actor 1: recv F0, F0, B0, send grad 0, recv F1, F1,
  // B1, send grad 1. With lookahead 1 the second receive is posted before
  // the computation before it (B0) and waited for where it was.
  Program program = handProgram();
  Program async = program;
  CHECK(postReceivesEarly(async, 1) == 4);
  auto shape = [](const std::vector<ProgOp> &ops) {
    std::string out;
    for (const ProgOp &op : ops)
      out +=
          std::string(opKindName(op.kind)) + (op.token >= 0 ? "*" : "") + " ";
    return out;
  };
  CHECK(shape(async.actors[1]) == "recv_act* wait* fwd recv_act* bwd "
                                  "send_grad wait* fwd bwd send_grad ");
  // Tokens are fresh and each wait names its receive's.
  std::set<int32_t> posted;
  for (const auto &ops : async.actors)
    for (const ProgOp &op : ops)
      if (isReceive(op.kind))
        CHECK(posted.insert(op.token).second);
  for (const auto &ops : async.actors)
    for (const ProgOp &op : ops)
      if (op.kind == OpKind::Wait)
        CHECK(posted.erase(op.token) == 1);
  CHECK(posted.empty());
  // Nothing left to post.
  CHECK(postReceivesEarly(async, 1) == 0);
  CHECK_FALSE(verify(async).has_value());

  // Rendezvous messages leave when both sides are posted: early posts are
  // never later, and here actor 1's first forward starts as soon as the
  // activation can arrive.
  SimCosts costs = handCosts(program);
  costs.rendezvous = true;
  const double blocking = simulate(program, costs).iterationTime;
  const double early = simulate(async, costs).iterationTime;
  CHECK(early <= blocking + 1e-12);
}

TEST_CASE("early posts verify at sizes and lookaheads the tests did not "
          "choose",
          "[simulator][async]") {
  for (int32_t pp : {3, 5, 6}) {
    for (int32_t m : {1, 7, 9}) {
      for (int64_t lookahead : {1, 2, 5}) {
        Program program =
            programFor(pp, m, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                       kBreadth, kBreadth, oneF1BLimits(pp));
        int64_t receives = 0;
        for (const auto &ops : program.actors)
          for (const ProgOp &op : ops)
            receives += isReceive(op.kind);
        Program async = program;
        INFO("pp " << pp << " m " << m << " lookahead " << lookahead);
        CHECK(postReceivesEarly(async, lookahead) == receives);
        CHECK_FALSE(verify(async).has_value());
        // The computations keep their order on every actor.
        for (int32_t a = 0; a < pp; ++a) {
          std::vector<std::pair<OpKind, int32_t>> before, after;
          for (const ProgOp &op : program.actors[a])
            if (isCompute(op.kind))
              before.push_back({op.kind, op.mb});
          for (const ProgOp &op : async.actors[a])
            if (isCompute(op.kind))
              after.push_back({op.kind, op.mb});
          CHECK(before == after);
        }
      }
    }
  }
}

TEST_CASE("a run's own profile prices the optimizer step of the actors it "
          "lists",
          "[costmodel]") {
  TwoStageGpt setup(2);
  const ModelConfig &model = setup.model;
  ClusterConfig &cluster = setup.cluster;
  const ModuleModel &gpt = setup.gpt;
  cluster.measured.optimizerPerParameter = 1e-9;
  const StageLayout layout = stageLayoutOf(setup.program);
  const ActorHoldings held = actorHoldings(layout, model, cluster);
  const double step0 = optimizerStepTime(cluster, &gpt, held.parameters[0]),
               step1 = optimizerStepTime(cluster, &gpt, held.parameters[1]);
  REQUIRE(step0 > 0);
  REQUIRE(step1 > 0);
  // Without a profile, or with none measured: the rate's, the slowest
  // actor counting.
  CHECK(afterPipeline(layout, held, 1, model, cluster).step ==
        std::max(step0, step1));
  Profile profile;
  CHECK(afterPipeline(layout, held, 1, model, cluster, &profile).step ==
        std::max(step0, step1));
  // Measured for both actors: the slowest counts, whatever the rate says.
  profile.optimizerStep = {0.5, 0.25};
  CHECK(afterPipeline(layout, held, 1, model, cluster, &profile).step == 0.5);
  // Measured for actor 0 only: actor 1 keeps the rate's step.
  profile.optimizerStep = {0.0};
  CHECK(afterPipeline(layout, held, 1, model, cluster, &profile).step == step1);
  // The YAML round trip.
  profile.optimizerStep = {0.0015, 0.0025};
  Profile read;
  const std::string text = formatProfile(profile);
  REQUIRE(llvm::toString(loadProfile("p.yaml", read, &text)) == "");
  CHECK(read.optimizerStep == profile.optimizerStep);
}

TEST_CASE("a profile's empty messages list prices every message, and is "
          "written back",
          "[profile]") {
  // `messages: []` is a list of no pairs: every message takes
  // default_message_s, 0 without it, not the cluster's links.
  const std::string text = "stages: []\nmessages: []\n";
  Profile read;
  REQUIRE(llvm::toString(loadProfile("p.yaml", read, &text)) == "");
  CHECK(read.listsMessages);
  CHECK(read.pricesMessages());
  CHECK(read.messageTime(0, 1) == 0.0);
  CHECK(formatProfile(read).find("messages: []\n") != std::string::npos);
  const std::string none = "stages: []\n";
  Profile links;
  REQUIRE(llvm::toString(loadProfile("p.yaml", links, &none)) == "");
  CHECK_FALSE(links.pricesMessages());
}

TEST_CASE("a profile fits only the job it measured: its stages' actors, "
          "roles and layers, its micro-batch size and model, where it "
          "records them",
          "[profile]") {
  const std::string text =
      "micro_batch_size: 2\nmodules:\n"
      "  - {hidden: 64, heads: 4, seq: 32, vocab: 256}\nstages:\n"
      "  - {stage: 0, layers: 2, first: true, last: false, actors: [0], "
      "fwd_s: 1, bwd_s: 2}\n"
      "  - {stage: 1, layers: 2, fwd_s: 1, bwd_s: 2}\n";
  Profile read;
  REQUIRE(llvm::toString(loadProfile("p.yaml", read, &text)) == "");
  REQUIRE(read.microBatchSize == 2);
  REQUIRE(read.stages[1].layers == 2);
  CHECK_FALSE(read.stages[1].first.has_value());
  CHECK(read.stages[0].actors == std::vector<int64_t>{0});
  CHECK(read.stages[1].actors.empty());
  // Written back as read.
  Profile again;
  const std::string printed = formatProfile(read);
  REQUIRE(llvm::toString(loadProfile("p.yaml", again, &printed)) == "");
  CHECK(formatProfile(again) == printed);
  CHECK(printed.find("layers: 2, first: true, last: false, actors: [0]") !=
        std::string::npos);
  CHECK(printed.find("- {hidden: 64, heads: 4, seq: 32, vocab: 256}") !=
        std::string::npos);

  StageLayout job;
  job.numActors = 2;
  job.actorsOf = {{0}, {1}};
  job.meta.resize(2);
  job.meta[0].layers = job.meta[1].layers = 2;
  job.meta[0].first = job.meta[1].last = true;
  ModuleModel gpt;
  gpt.hidden = 64;
  gpt.heads = 4;
  gpt.seq = 32;
  gpt.vocab = 256;
  // `mbs`: the model's micro-batch size; none: no model.
  auto fits = [&](const StageLayout &layout, std::optional<int64_t> mbs,
                  const ModuleModel &module) {
    ModelConfig model;
    model.microBatchSize = mbs.value_or(1);
    model.modules = {module};
    return llvm::toString(
        checkProfileFits(read, layout, mbs ? &model : nullptr));
  };
  CHECK(fits(job, 2, gpt) == "");
  CHECK(fits(job, std::nullopt, gpt) == "");
  // No stage_info: roles and layers not compared.
  StageLayout bare = job;
  bare.meta.clear();
  CHECK(fits(bare, 2, gpt) == "");
  // Stage 1's `last` is not recorded: any fits.
  StageLayout unlisted = job;
  unlisted.meta[1].last = false;
  CHECK(fits(unlisted, 2, gpt) == "");
  StageLayout more = job;
  more.meta[0].layers = 4;
  CHECK(fits(more, 2, gpt) ==
        "the profile 'p.yaml' lists stage 0 holding 2 layers (at "
        "p.yaml:5:5), but the schedule's stage 0 holds 4: was it measured "
        "on another job?");
  // Without a model the schedule's layer counts are the spec's, which the
  // run's model may have replaced: not compared; first and last are.
  CHECK(fits(more, std::nullopt, gpt) == "");
  StageLayout notFirst = job;
  notFirst.meta[0].first = false;
  CHECK(fits(notFirst, std::nullopt, gpt) ==
        "the profile 'p.yaml' lists stage 0 as first (at p.yaml:5:5), but "
        "the schedule's stage 0 is neither first nor last: was it measured "
        "on another job?");
  // Another actor (a circular schedule's stages of a V-shape's layers).
  StageLayout moved = job;
  moved.actorsOf = {{1}, {0}};
  CHECK(fits(moved, std::nullopt, gpt) ==
        "the profile 'p.yaml' lists stage 0 run by actors [0] (at "
        "p.yaml:5:5), but the schedule runs it on actors [1]: was it "
        "measured on another job?");
  // A stage no actor computes (a registered stage's collectives): not
  // compared.
  StageLayout collective = job;
  collective.actorsOf[0].clear();
  CHECK(fits(collective, 2, gpt) == "");
  CHECK(fits(job, 1, gpt) == "the profile 'p.yaml' was measured at "
                             "micro-batch size 2 (at p.yaml:1:19), but the "
                             "job's is 1: was it measured on another job?");
  ModuleModel wide = gpt;
  wide.hidden = 256;
  CHECK(fits(job, 2, wide) ==
        "the profile 'p.yaml' was measured on modules of hidden 64, heads 4, "
        "seq 32, vocab 256 (at p.yaml:3:3), but the model file's are hidden "
        "256, heads 4, seq 32, vocab 256: was it measured on another job?");
}

TEST_CASE("times print in s or ms, below a millisecond with 4 significant "
          "digits and no exponent",
          "[report]") {
  CHECK(formatSeconds(1.5) == "1.500 s");
  // Rounding that carries into the next unit goes there.
  CHECK(formatSeconds(0.9999996) == "1.000 s");
  CHECK(formatSeconds(0.5) == "500.000 ms");
  CHECK(formatSeconds(0.99995e-3) == "1.000 ms");
  CHECK(formatSeconds(0.0999996e-3) == "0.1000 ms");
  CHECK(formatSeconds(1.049e-6) == "0.001049 ms");
  CHECK(formatSeconds(8.216e-5) == "0.08216 ms");
  CHECK(formatSeconds(4.369e-11) == "0.00000004369 ms");
  CHECK(formatSeconds(-0.0005) == "-0.5000 ms");
  // Nothing and floating-point noise read as 0; digits do not run away.
  CHECK(formatSeconds(0) == "0.000 ms");
  CHECK(formatSeconds(-1e-20) == "0.000 ms");
  CHECK(formatSeconds(1e-300) == "0.000 ms");
  CHECK(formatSeconds(std::nan("")) == "nan ms");
  // However long: 1.2e62 s lost its last digits and decimals (64 bytes).
  CHECK(formatSeconds(1.2e62).size() == 63 + 4 + 2);
  CHECK(llvm::StringRef(formatSeconds(1.2e62)).ends_with(".000 s"));
}

TEST_CASE("a collective with blocking and posting members ends once for all",
          "[simulator][async]") {
  // docs/Runtime.md's two towers: actor 0 joins the all-gather blocking,
  // actor 1 posts it and waits. Stage 0's forward takes 1, stage 1's 3, the
  // all-gather 0.5: it ends at 3.5 for both, whichever arrives last (the
  // blocking member waited for a post that never counted as an arrival, and
  // its group ended before it began).
  for (bool postLast : {false, true}) {
    CAPTURE(postLast);
    Program program = makeProgram(2, 3, 2);
    program.groups = {{0, 1}};
    for (int32_t mb = 0; mb < 2; ++mb) {
      ProgOp blocking{OpKind::AllGather, 2, mb};
      blocking.group = 0;
      ProgOp post = blocking;
      post.token = mb;
      ProgOp wait{OpKind::Wait};
      wait.token = mb;
      const int32_t b = postLast ? 0 : 1, p = 1 - b; // actor 1 arrives last
      program.actors.resize(2);
      program.actors[b].insert(
          program.actors[b].end(),
          {{OpKind::Fwd, b, mb}, blocking, {OpKind::Bwd, b, mb}});
      program.actors[p].insert(
          program.actors[p].end(),
          {{OpKind::Fwd, p, mb}, post, wait, {OpKind::Bwd, p, mb}});
    }
    REQUIRE_FALSE(verify(program).has_value());
    SimCosts costs = unitCosts(program);
    costs.duration = {{1, 1, 1, 1}, {3, 1, 1, 1}, {0, 0, 0, 0}};
    costs.collectiveTime = 0.5;
    SimResult r = simulate(program, costs);
    for (int32_t a = 0; a < 2; ++a)
      for (size_t i = 0; i < program.actors[a].size(); ++i)
        CHECK(r.end[a][i] >= r.start[a][i]);
    // Micro-batch 0: both backwards start when the all-gather ends.
    const size_t bwd0 = program.actors[0][2].kind == OpKind::Bwd ? 2 : 3;
    const size_t bwd1 = program.actors[1][2].kind == OpKind::Bwd ? 2 : 3;
    CHECK(r.start[0][bwd0] == Approx(3.5));
    CHECK(r.start[1][bwd1] == Approx(3.5));
    // Then stage 1's forward of micro-batch 1 (3) and its all-gather (0.5)
    // after its backward (1): 8, and the last backward 1 more.
    CHECK(r.iterationTime == Approx(9));
    // The critical path goes through stage 1's forward and its all-gather
    // (the last to arrive: a post when the blocking member came first),
    // not through an op its actor ran after posting.
    std::string path;
    for (auto [actor, index] : r.criticalPath) {
      const ProgOp &op = program.actors[actor][index];
      path += std::to_string(actor) + opKindName(op.kind) + " ";
    }
    CHECK(path.rfind("1fwd 1all_gather ", 0) == 0);
  }
  // The post arrives last and its actor goes on to a registered instruction
  // (5) before its wait; actor 0's long backward (10) ends the iteration.
  // Its all-gather was decided by the post, not by that instruction.
  Program program = makeProgram(2, 3, 1);
  program.groups = {{0, 1}};
  program.instructions = {"probe"};
  ProgOp blocking{OpKind::AllGather, 2, 0};
  blocking.group = 0;
  ProgOp post = blocking;
  post.token = 0;
  ProgOp exec{OpKind::Exec, 1, 0};
  exec.inst = 0;
  ProgOp wait{OpKind::Wait};
  wait.token = 0;
  program.actors = {
      {{OpKind::Fwd, 0, 0}, blocking, {OpKind::Bwd, 0, 0}},
      {{OpKind::Fwd, 1, 0}, post, exec, wait, {OpKind::Bwd, 1, 0}}};
  REQUIRE_FALSE(verify(program).has_value());
  SimCosts costs = unitCosts(program);
  costs.duration = {{1, 10, 1, 1}, {3, 1, 1, 1}, {0, 0, 0, 0}};
  costs.collectiveTime = 0.5;
  costs.execTime = 5;
  SimResult r = simulate(program, costs);
  CHECK(r.iterationTime == Approx(13.5));
  std::string path;
  for (auto [actor, index] : r.criticalPath)
    path += std::to_string(actor) +
            opKindName(program.actors[actor][index].kind) + " ";
  CHECK(path == "1fwd 1all_gather 0all_gather 0bwd ");
}

TEST_CASE("a registered stage is a module of its own, not an empty stage",
          "[simulator][model]") {
  // Module 0's stage 1 holds no layers (partition [2, 0, 2]); module 1 is
  // a registered stage (flexpipe.stage); module 2 is first and last.
  std::vector<StageMeta> meta = {{0, 2, true, false},
                                 {0, 0},
                                 {0, 2, false, true},
                                 {1, 0},
                                 {2, 0, true, true}};
  markRegistered(meta);
  std::vector<bool> registered;
  for (const StageMeta &m : meta)
    registered.push_back(m.isRegistered());
  CHECK(registered == std::vector<bool>{false, false, false, true, false});
}

TEST_CASE("a module's layers are counted along its chain of stages",
          "[simulator][model]") {
  // Module 0: stages 0 -> 1 -> 2 (2 + 3 + 1 layers) and a second direction
  // 3 -> 4 (4 + 2); module 1 (stage 5, 7 layers) takes module 0's output
  // (edge 2 -> 5, another module: it does not shift module 1's layers).
  // Stage 6 is a registered stage.
  std::vector<StageMeta> meta = {{0, 2, true, false},
                                 {0, 3},
                                 {0, 1, false, true},
                                 {0, 4, true, false},
                                 {0, 2, false, true},
                                 {1, 7, true, true},
                                 {2, 0}};
  std::vector<std::pair<int32_t, int32_t>> edges = {
      {0, 1}, {1, 2}, {3, 4}, {2, 5}};
  CHECK(stageFirstLayers(meta, edges) ==
        std::vector<int64_t>{0, 2, 5, 0, 4, 0, 0});
  // A join starts after its deepest predecessor.
  edges.push_back({0, 2});
  CHECK(stageFirstLayers(meta, edges)[2] == 5);
  edges.push_back({3, 2});
  CHECK(stageFirstLayers(meta, edges)[2] == 5);
  edges.push_back({4, 2});
  CHECK(stageFirstLayers(meta, edges)[2] == 6);

  Program program;
  program.numStages = 7;
  program.stageMeta = meta;
  program.moduleNames = {"gpt", "head", "sync"};
  program.edges = {{0, 1}, {1, 2}, {3, 4}, {2, 5}};
  CHECK(moduleLayers(program) == std::vector<int64_t>{6, 7, 0});
  program.stageMeta.pop_back(); // no metadata for every stage: unknown
  CHECK(moduleLayers(program) == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("first and last stages are where a module's chains start and end",
          "[simulator][model]") {
  Program program;
  program.numStages = 4;
  program.moduleNames = {"gpt"};
  // Two directions: 0 -> 1 and 2 -> 3.
  program.stageMeta = {{0, 2, true, false},
                       {0, 2, false, true},
                       {0, 2, true, false},
                       {0, 2, false, true}};
  program.edges = {{0, 1}, {2, 3}};
  CHECK(!llvm::errorToBool(checkStageChains(program)));
  // A start that is not first.
  program.stageMeta[2].first = false;
  CHECK(llvm::toString(checkStageChains(program)) ==
        "stage 2 of module 'gpt' is not a first stage (stage_info), but no "
        "stage of its module feeds it");
  // An end that is not last.
  program.stageMeta[2].first = true;
  program.stageMeta[1].last = false;
  CHECK(llvm::toString(checkStageChains(program)) ==
        "stage 1 of module 'gpt' is not a last stage (stage_info), but it "
        "feeds no stage of its module");
  // A first stage in the middle of a chain: one first too many.
  program.stageMeta[1] = {0, 2, true, true};
  CHECK(llvm::toString(checkStageChains(program)) ==
        "module 'gpt' has 3 first and 2 last stages (stage_info); a module "
        "has one of each per direction");
  // Without metadata there is nothing to check.
  program.stageMeta.clear();
  CHECK(!llvm::errorToBool(checkStageChains(program)));
}

TEST_CASE("two messages over one actor pair that no transfer tells apart",
          "[verify]") {
  using Edges = std::vector<std::pair<int32_t, int32_t>>;
  // A join: stages 0 and 1 on actor 0 feed stage 2 on actor 1.
  std::optional<MessageClash> join =
      findMessageClash(Edges{{0, 2}, {1, 2}}, {{0}, {0}, {1}});
  REQUIRE(join);
  CHECK(join->join);
  CHECK(std::tie(join->stage, join->first, join->second, join->actor,
                 join->peer) == std::make_tuple(2, 0, 1, 0, 1));
  // The same on one actor, or with the sources on two actors: no message
  // or one per pair.
  CHECK(!findMessageClash(Edges{{0, 2}, {1, 2}}, {{0}, {0}, {0}}));
  CHECK(!findMessageClash(Edges{{0, 2}, {1, 2}}, {{0}, {2}, {1}}));
  // A fan-out: stage 0 (actor 0) feeds stages 1 and 2 (actor 3).
  std::optional<MessageClash> fan =
      findMessageClash(Edges{{0, 1}, {0, 2}}, {{0}, {3}, {3}, {}});
  REQUIRE(fan);
  CHECK(!fan->join);
  CHECK(std::tie(fan->stage, fan->first, fan->second, fan->actor, fan->peer) ==
        std::make_tuple(0, 1, 2, 3, 0));
  // A shared stage (slices on actors 0 and 1) fed by two stages on actor 0:
  // actor 1's slice would receive both.
  std::optional<MessageClash> shared =
      findMessageClash(Edges{{0, 2}, {1, 2}}, {{0}, {0}, {0, 1}});
  REQUIRE(shared);
  CHECK(shared->peer == 1);
}

TEST_CASE("a hand-over must stay below what a slice gets done at the "
          "largest slowdown",
          "[simulator][eventcore]") {
  MachineProfile m;
  // No slices: no turns, no limit.
  CHECK(m.handoffLimit() == std::numeric_limits<double>::infinity());
  m.timeSlice = 1e-3;
  CHECK(m.handoffLimit() == 1e-3);
  // The slowest point decides, shaped or not (1 ms at 1/1.25 of the rate).
  m.contention.push_back({1, 1.0});
  m.contention.push_back({4, 1.25});
  MachineProfile::Contention shaped;
  shaped.ranks = 4;
  shaped.slowdown = 1.1;
  shaped.hidden = 64;
  m.contention.push_back(shaped);
  CHECK(m.handoffLimit() == Approx(0.8e-3));
}
