//===- LoweringTest.cpp - lowerProblem ------------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "TestSpecs.h"

#include "flexpipe/Scheduling/Export.h"
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

namespace {

ProgOp op(OpKind kind, int32_t stage, int32_t token = -1, int32_t group = -1) {
  ProgOp o{kind};
  o.stage = stage;
  o.token = token;
  o.group = group;
  return o;
}

/// The id of op `index` of `actor`.
int32_t id(const ProgramGraph &graph, int32_t actor, int32_t index) {
  return graph.actorBegin[actor] + index;
}

} // namespace

/// HappensBefore(program, graph).lastOf(actor): one actor's table.
static std::vector<int32_t>
lastOpBefore(const Program &program, const ProgramGraph &graph, int32_t actor) {
  std::vector<int32_t> last;
  HappensBefore(program, graph).lastOf(actor, last);
  return last;
}

TEST_CASE("lastOpBefore follows messages and collectives, not timing",
          "[lowering]") {
  // Stages 0 -> 1 on actors 0 and 1; stage 2 alone on actor 2.
  Program p = makeProgram(3, 3, 1, {{0, 1}});
  p.actors = {{op(OpKind::Fwd, 0), op(OpKind::Bwd, 0)},
              {op(OpKind::Fwd, 1), op(OpKind::Bwd, 1)},
              {op(OpKind::Fwd, 2), op(OpKind::Bwd, 2)}};
  insertCommunication(
      p); // actor 0: F, send, recv, B; actor 1: recv, F, B, send
  ProgramGraph graph;
  REQUIRE(!buildGraph(p, ChannelRule::PerStage, graph));
  const std::vector<int32_t> last = lastOpBefore(p, graph, 0);
  CHECK(last[id(graph, 1, 1)] == id(graph, 0, 1)); // F1 after 0's send
  CHECK(last[id(graph, 0, 3)] == id(graph, 0, 3)); // B0 is its own
  CHECK(last[id(graph, 2, 0)] == -1);              // actor 2 hears nothing
  CHECK(last[id(graph, 2, 1)] == -1);

  // A blocking all-gather of actors 0 and 2 after their forwards: actor 2's
  // backward comes after actor 0's forward. Posted asynchronously before the
  // forward, its wait orders nothing of actor 0's but the post.
  for (bool async : {false, true}) {
    Program q = makeProgram(3, 3, 1);
    q.groups = {{0, 2}};
    const int32_t token = async ? 0 : -1;
    ProgOp gather = op(OpKind::AllGather, 2, token, 0);
    std::vector<ProgOp> zero = {op(OpKind::Fwd, 0), gather, op(OpKind::Bwd, 0)};
    std::vector<ProgOp> two = {op(OpKind::Fwd, 2), gather, op(OpKind::Bwd, 2)};
    if (async) {
      zero = {gather, op(OpKind::Fwd, 0), op(OpKind::Wait, 0, 0),
              op(OpKind::Bwd, 0)};
      two = {gather, op(OpKind::Wait, 0, 0), op(OpKind::Fwd, 2),
             op(OpKind::Bwd, 2)};
    }
    q.actors = {zero, {op(OpKind::Fwd, 1), op(OpKind::Bwd, 1)}, two};
    ProgramGraph g;
    std::optional<VerifyFailure> failure =
        buildGraph(q, ChannelRule::PerStage, g);
    INFO((failure ? failure->message : std::string()));
    REQUIRE(!failure);
    const std::vector<int32_t> before = lastOpBefore(q, g, 0);
    const int32_t backward2 = id(g, 2, async ? 3 : 2);
    CHECK(before[backward2] == id(g, 0, async ? 0 : 1));
    CHECK(before[id(g, 1, 1)] == -1);
    // Actor 0's post is the instance's first member; actor 0 does not wait
    // there for actor 2's post, only at its wait.
    const std::vector<int32_t> fromTwo = lastOpBefore(q, g, 2);
    const int32_t gather2 = id(g, 2, async ? 0 : 1);
    CHECK(fromTwo[id(g, 0, async ? 1 : 2)] == (async ? -1 : gather2));
    CHECK(fromTwo[id(g, 0, async ? 2 : 2)] == gather2);
  }
}

// A global limit over several source actors: looseGlobalLimit says so
// wherever the programs, run with every computation taking one step, let
// more micro-batches be in flight than the limit (it may say so where only
// another timing would), and never where the sources share one actor.
TEST_CASE("looseGlobalLimit finds every limit the programs break",
          "[lowering]") {
  int64_t broken = 0, warned = 0;
  for (int32_t pp : {2, 3, 5})
    for (int32_t m : {4, 5, 7})
      for (int64_t limit : {1, 2, 3, 4})
        for (bool bidirectional : {true, false}) {
          CAPTURE(pp, m, limit, bidirectional);
          PipelineSpec spec =
              makeSpec(pp, m, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                       kBreadth, kBreadth, {}, bidirectional);
          InflightSpec global;
          global.scope = InflightScope::Global;
          global.limits = {limit};
          spec.inflight.push_back(global);
          llvm::Expected<BuiltProblem> built = buildProblem(spec);
          REQUIRE(static_cast<bool>(built));
          LoweredProgram out;
          REQUIRE(llvm::toString(
                      lowerProblem(*built, LoweringOptions(), out)) == "");
          REQUIRE(out.schedule.ok);
          if (!bidirectional) {
            CHECK_FALSE(out.loose);
            continue;
          }
          // Micro-batches in flight at each entry, one step per computation.
          const Program &p = out.program;
          const Timeline t = unitTimeline(p);
          REQUIRE(t.ok);
          std::vector<double> enter(m, 1e300), leave(m, -1);
          for (int32_t part : built->problem.globalLimits.front().sources) {
            const StagePart &s = built->problem.parts[part];
            for (size_t i = 0; i < p.actors[s.actor].size(); ++i) {
              const ProgOp &op = p.actors[s.actor][i];
              if (op.stage != s.stage)
                continue;
              if (op.kind == OpKind::Fwd)
                enter[op.mb] = std::min(enter[op.mb], t.start[s.actor][i]);
              else
                leave[op.mb] = std::max(leave[op.mb], t.end[s.actor][i]);
            }
          }
          bool exceeded = false;
          for (int32_t j = 0; j < m; ++j) {
            int64_t others = 0;
            for (int32_t i = 0; i < m; ++i)
              others += i != j && enter[i] <= enter[j] && leave[i] > enter[j];
            exceeded |= others >= limit;
          }
          broken += exceeded;
          warned += out.loose.has_value();
          if (exceeded)
            CHECK(out.loose);
          if (out.loose)
            CHECK(out.loose->inflight == 0);
        }
  CHECK(broken > 0); // the sweep has programs that break their limit
  CHECK(warned >= broken);
}
