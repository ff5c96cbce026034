//===- LoweringTest.cpp - lowerProblem ------------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "TestSpecs.h"

#include "flexpipe/Scheduling/Lowering.h"

using namespace flexpipe::sched;
using namespace flexpipe::sched::test;

namespace {

bool sameOps(const Program &a, const Program &b) {
  if (a.actors.size() != b.actors.size() || a.groups != b.groups ||
      a.instructions != b.instructions)
    return false;
  for (size_t actor = 0; actor < a.actors.size(); ++actor) {
    const std::vector<ProgOp> &x = a.actors[actor], &y = b.actors[actor];
    if (x.size() != y.size())
      return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].kind != y[i].kind || x[i].stage != y[i].stage ||
          x[i].mb != y[i].mb || x[i].peer != y[i].peer ||
          x[i].token != y[i].token || x[i].group != y[i].group ||
          x[i].inst != y[i].inst)
        return false;
  }
  return true;
}

} // namespace

// The finished program lowerProblem returns is the scheduled order lowered
// from scratch and finished (finishProgram with the program's own costs).
// With a model and a cluster the judge finishes both orders and
// lowerProblem reuses the one it keeps: that reuse must give the same
// program, costs and separation figures. Uneven stages (layers that do not
// divide), pp not a power of two, odd m, dp 1 and 2.
TEST_CASE("lowerProblem schedules, prices and finishes once", "[lowering]") {
  struct Case {
    int32_t pp, m;
    PlacementKind kind;
    int64_t chunks;
    Cttp cttp;
    StagePriority fwd, bwd;
  };
  const Case cases[] = {
      {3, 7, PlacementKind::OneToOne, 1, Cttp::BwdFirst, kBreadth, kBreadth},
      {5, 11, PlacementKind::VShape, 2, Cttp::FwdFirst, kDepth, kBreadth},
      {4, 9, PlacementKind::Circular, 2, Cttp::BwdFirst,
       StagePriority{StageOrder::BreadthFirst, 4},
       StagePriority{StageOrder::DepthFirst, 4}},
  };
  int64_t judged = 0;
  for (const Case &c : cases)
    for (bool measured : {false, true})
      for (int64_t dp : {1, 2})
        for (int bubble = 0; bubble < 3; ++bubble) {
          CAPTURE(c.pp, c.m, static_cast<int>(c.kind), measured, dp, bubble);
          PipelineSpec spec =
              makeSpec(c.pp, c.m, c.kind, c.chunks, c.cttp, c.fwd, c.bwd);
          spec.modules.front().layers += 1; // uneven stages
          ModelConfig model;
          model.microBatchSize = 1;
          model.globalBatchSize = c.m;
          model.modules = {
              {"gpt", spec.modules.front().layers, 64, 4, 32, 256, true}};
          ClusterConfig cluster = testCluster(c.pp * dp);
          if (measured) {
            cluster.deviceKind = "cpu";
            cluster.peakFlops = 1e10;
            cluster.measured.coresPerNode = 2;
            cluster.measured.contention = {{1, 1.0}, {2, 1.3}, {4, 2.0}};
          }
          cluster.jobDevices = c.pp * dp;
          spec.model = &model;
          spec.cluster = &cluster;
          llvm::Expected<BuiltProblem> built = buildProblem(spec);
          REQUIRE(static_cast<bool>(built));

          LoweringOptions options;
          options.timeModel = TimeModel::Cost;
          options.model = &model;
          options.cluster = &cluster;
          options.dp = dp;
          options.wantCosts = true;
          options.bubbles.splitBackward = bubble == 1;
          if (bubble == 2)
            options.bubbles.separation.emplace();
          options.bubbles.asyncLookahead = bubble == 1 ? 2 : 0;

          LoweredProgram finished;
          REQUIRE(llvm::toString(lowerProblem(*built, options, finished)) ==
                  "");
          REQUIRE(finished.schedule.ok);
          REQUIRE(finished.costs);
          CHECK(finished.separation.has_value() == (bubble == 2));

          // The same choice of order, not finished, then finished here.
          options.finish = false;
          LoweredProgram scheduled;
          REQUIRE(llvm::toString(lowerProblem(*built, options, scheduled)) ==
                  "");
          REQUIRE(scheduled.schedule.ok);
          CHECK(sameOrder(scheduled.schedule, finished.schedule));
          CHECK(
              sameOps(scheduled.program, programOf(*built, finished.schedule)));
          Program program = scheduled.program;
          SimCosts costs;
          REQUIRE(
              llvm::toString(programCosts(program, &model, &cluster, nullptr,
                                          dp, TimeModel::Cost, costs)) == "");
          SeparationResult figures;
          REQUIRE(llvm::toString(finishProgram(program, costs, options.bubbles,
                                               &figures)) == "");
          CHECK(sameOps(program, finished.program));
          CHECK(costs.duration == finished.costs->duration);
          CHECK(costs.coreGroup == finished.costs->coreGroup);
          if (bubble == 2) {
            CHECK(figures.time == finished.separation->time);
            CHECK(figures.stashed == finished.separation->stashed);
            CHECK(figures.strategy == finished.separation->strategy);
          }
          judged += !costs.coreGroup.empty();
        }
  // The measured cluster puts ranks on shared cores: the judge ran there.
  CHECK(judged > 0);
}

TEST_CASE("lowerProblem reports a schedule it cannot make, not an error",
          "[lowering]") {
  // Circular without an interval: forwards of each actor's first chunk
  // fill its in-flight limit (s + pp - 2a - 1) before any micro-batch
  // reaches the second chunk.
  PipelineSpec spec =
      makeSpec(4, 16, PlacementKind::Circular, 2, Cttp::BwdFirst, kBreadth,
               kBreadth, {11, 9, 7, 5});
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  LoweredProgram out;
  REQUIRE(llvm::toString(lowerProblem(*built, LoweringOptions(), out)) == "");
  CHECK_FALSE(out.schedule.ok);
  CHECK_FALSE(out.schedule.waits.empty());
  CHECK(out.program.actors.empty());
  // Under a cutoff below any schedule's end, the cost model gives up.
  LoweringOptions cut;
  cut.timeModel = TimeModel::Cost;
  cut.cutoff = 1;
  spec = makeSpec(3, 5, PlacementKind::OneToOne, 1, Cttp::BwdFirst, kBreadth,
                  kBreadth, oneF1BLimits(3));
  built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  REQUIRE(llvm::toString(lowerProblem(*built, cut, out)) == "");
  CHECK(out.schedule.cut);
  CHECK_FALSE(out.costs);
}
