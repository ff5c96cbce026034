//===- TimeModelTest.cpp - Step and cost time models, closed forms --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Properties of the two time models at sizes the other tests did not choose:
// closed forms of 1F1B, GPipe and interleaved 1F1B; the cost model never
// slower than the step model's order under the same (uneven) durations; the
// global in-flight limit counting micro-batches; Algorithm 1's literal rule.
//
// The order of a schedule is timed here by an independent fixed-order replay
// (replayMakespan), not by the scheduler's engine.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/PipelineSpec.h"

#include "TestSpecs.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <set>

using namespace flexpipe::sched;
using flexpipe::sched::test::kBreadth;
using flexpipe::sched::test::kDepth;
using flexpipe::sched::test::makeSpec;
using flexpipe::sched::test::oneF1BLimits;

namespace {

ScheduleResult scheduleSpec(const PipelineSpec &spec, TimeModel model,
                            BuiltProblem *out = nullptr) {
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  ScheduleResult result = schedule(built->problem, model);
  INFO(result.error);
  REQUIRE(result.ok);
  if (out)
    *out = std::move(*built);
  return result;
}

/// Times the per-actor orders of `result` under the parts' durations: each
/// actor runs its items in order, an item starting once its actor is free
/// and its dependencies (the stage DAG forwards, the reversed DAG for
/// backwards, an item's own forward, igrad before wgrad) have ended.
/// Computations only (no registered instructions).
double replayMakespan(const Problem &p, const ScheduleResult &result) {
  using Key = std::tuple<int, int32_t, int32_t>; // kind, part, mb
  std::map<Key, double> end;
  std::vector<std::vector<int32_t>> in(p.parts.size()), out(p.parts.size());
  for (auto [from, to] : p.edges) {
    out[from].push_back(to);
    in[to].push_back(from);
  }
  const CompKind grad = p.splitBackward ? CompKind::Igrad : CompKind::Bwd;
  auto flows = [&](int32_t part, int32_t mb) {
    return mb >= p.parts[part].mbBegin && mb < p.parts[part].mbEnd;
  };
  auto deps = [&](const ScheduledItem &item) {
    std::vector<Key> d;
    if (item.kind == CompKind::Fwd) {
      for (int32_t pred : in[item.part])
        if (flows(pred, item.mb))
          d.push_back({static_cast<int>(CompKind::Fwd), pred, item.mb});
    } else if (item.kind == CompKind::Wgrad) {
      d.push_back({static_cast<int>(CompKind::Igrad), item.part, item.mb});
    } else {
      d.push_back({static_cast<int>(CompKind::Fwd), item.part, item.mb});
      for (int32_t succ : out[item.part])
        if (flows(succ, item.mb))
          d.push_back({static_cast<int>(grad), succ, item.mb});
    }
    return d;
  };
  const size_t numActors = result.actors.size();
  std::vector<size_t> next(numActors, 0);
  std::vector<double> free(numActors, 0);
  double makespan = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t a = 0; a < numActors; ++a) {
      while (next[a] < result.actors[a].size()) {
        const ScheduledItem &item = result.actors[a][next[a]];
        REQUIRE(!item.isRegistered());
        double start = free[a];
        bool ready = true;
        for (const Key &k : deps(item)) {
          auto it = end.find(k);
          if (it == end.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second);
        }
        if (!ready)
          break;
        const double e =
            start + p.parts[item.part].cost[static_cast<int>(item.kind)];
        end[{static_cast<int>(item.kind), item.part, item.mb}] = e;
        free[a] = e;
        makespan = std::max(makespan, e);
        ++next[a];
        progress = true;
      }
    }
  }
  for (size_t a = 0; a < numActors; ++a)
    REQUIRE(next[a] == result.actors[a].size()); // the order cannot deadlock
  return makespan;
}

/// F = 1, B = 2 (I = W = 1) per actor's share: `layers` layers per stage on
/// actors holding `stagesPerActor` stages.
void perActorShare(PipelineSpec &spec, int64_t layersPerStage,
                   int64_t stagesPerActor) {
  const double perLayer = 1.0 / (layersPerStage * stagesPerActor);
  spec.costPerLayer[0] = perLayer;
  spec.costPerLayer[1] = 2 * perLayer;
  spec.costPerLayer[2] = perLayer;
  spec.costPerLayer[3] = perLayer;
}

} // namespace

TEST_CASE("1F1B and GPipe take (m + p - 1)(F + B)", "[timemodel][closed]") {
  for (int32_t pp : {2, 3, 5, 6, 7, 9})
    for (int32_t m : {pp, pp + 1, 2 * pp + 1, 3 * pp}) {
      INFO("pp=" << pp << " m=" << m);
      for (bool gpipe : {false, true}) {
        PipelineSpec spec =
            makeSpec(pp, m, PlacementKind::OneToOne, 1,
                     gpipe ? Cttp::FwdFirst : Cttp::BwdFirst, kBreadth,
                     kBreadth, gpipe ? std::vector<int64_t>{} : oneF1BLimits(pp));
        perActorShare(spec, 2, 1);
        BuiltProblem built;
        const ScheduleResult cost = scheduleSpec(spec, TimeModel::Cost, &built);
        CHECK(cost.makespan == Approx((m + pp - 1) * 3.0));
        CHECK(replayMakespan(built.problem, cost) == Approx(cost.makespan));
        // The step model counts every computation as one step.
        CHECK(scheduleSpec(spec, TimeModel::Step).makespan ==
              2.0 * (m + pp - 1));
      }
    }
}

TEST_CASE("interleaved 1F1B's bubble is (p - 1)(F + B) / v",
          "[timemodel][closed]") {
  for (int32_t pp : {2, 3, 4, 5, 6, 8})
    for (int32_t rounds : {1, 2, 3}) {
      const int32_t m = rounds * pp, v = 2;
      INFO("pp=" << pp << " m=" << m);
      std::vector<int64_t> limits;
      for (int32_t a = 0; a < pp; ++a)
        limits.push_back(v * pp + pp - 2 * a - 1);
      PipelineSpec spec = makeSpec(
          pp, m, PlacementKind::Circular, v, Cttp::Interleaved,
          {StageOrder::BreadthFirst, pp}, {StageOrder::DepthFirst, pp}, limits);
      perActorShare(spec, 2, v);
      const double busy = m * 3.0; // F + B per micro-batch per actor
      for (TimeModel model : {TimeModel::Cost, TimeModel::Step}) {
        BuiltProblem built;
        const ScheduleResult result = scheduleSpec(spec, model, &built);
        // The step model's order, timed under the same durations.
        CHECK(replayMakespan(built.problem, result) ==
              Approx(busy + (pp - 1) * 3.0 / v));
      }
    }
}

TEST_CASE("equal durations give the same order in both time models",
          "[timemodel][property]") {
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 150; ++trial) {
    const int32_t pp = 2 + rng() % 8, m = 1 + rng() % (4 * pp);
    const bool circular = rng() % 2;
    PipelineSpec spec = makeSpec(
        pp, m, circular ? PlacementKind::Circular : PlacementKind::OneToOne,
        circular ? 2 : 1, static_cast<Cttp>(rng() % 3), kBreadth, kDepth);
    spec.splitBackward = rng() % 2;
    for (double &c : spec.costPerLayer)
      c = 0.75; // every computation 1.5
    INFO("trial " << trial << " pp=" << pp << " m=" << m);
    const ScheduleResult step = scheduleSpec(spec, TimeModel::Step);
    const ScheduleResult cost = scheduleSpec(spec, TimeModel::Cost);
    REQUIRE(step.actors.size() == cost.actors.size());
    for (size_t a = 0; a < step.actors.size(); ++a) {
      REQUIRE(step.actors[a].size() == cost.actors[a].size());
      for (size_t i = 0; i < step.actors[a].size(); ++i) {
        CHECK(step.actors[a][i].part == cost.actors[a][i].part);
        CHECK(step.actors[a][i].mb == cost.actors[a][i].mb);
        CHECK(step.actors[a][i].kind == cost.actors[a][i].kind);
      }
    }
    CHECK(cost.makespan == Approx(1.5 * step.makespan));
  }
}

TEST_CASE("with uneven stages the cost model is not slower than the step "
          "model's order",
          "[timemodel][property]") {
  std::mt19937 rng(14);
  int improved = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int32_t pp = 2 + rng() % 8;          // 2..9, not only powers of 2
    const int32_t m = 1 + 2 * (rng() % (2 * pp)); // odd m too
    const int kind = rng() % 4; // 1F1B, GPipe, interleaved, V-shape
    const int64_t chunks = kind >= 2 ? 2 : 1;
    std::vector<int64_t> limits;
    Cttp cttp = Cttp::BwdFirst;
    StagePriority fwd = kBreadth, bwd = kBreadth;
    PlacementKind placement = PlacementKind::OneToOne;
    if (kind == 0) {
      limits = oneF1BLimits(pp);
    } else if (kind == 1) {
      cttp = Cttp::FwdFirst;
    } else if (kind == 2) {
      placement = PlacementKind::Circular;
      cttp = Cttp::Interleaved;
      fwd = {StageOrder::BreadthFirst, pp};
      bwd = {StageOrder::DepthFirst, pp};
      for (int32_t a = 0; a < pp; ++a)
        limits.push_back(m * 2 + 1); // room for every micro-batch
    } else {
      placement = PlacementKind::VShape;
      fwd = kDepth;
      bwd = kDepth;
      limits.assign(pp, 2 * pp);
    }
    PipelineSpec spec = makeSpec(pp, m, placement, chunks, cttp, fwd, bwd,
                                 limits);
    // Uneven stages: 1 to 4 layers each, and per-layer costs that differ
    // between kinds.
    const int64_t stages = pp * chunks;
    spec.modules[0].partition.clear();
    int64_t layers = 0;
    for (int64_t s = 0; s < stages; ++s) {
      spec.modules[0].partition.push_back(1 + rng() % 4);
      layers += spec.modules[0].partition.back();
    }
    spec.modules[0].layers = layers;
    spec.splitBackward = rng() % 3 == 0;
    spec.costPerLayer[0] = 1.0;
    spec.costPerLayer[1] = 1.5 + (rng() % 10) / 10.0;
    spec.costPerLayer[2] = spec.costPerLayer[1] / 2;
    spec.costPerLayer[3] = spec.costPerLayer[1] / 2;
    INFO("trial " << trial << " pp=" << pp << " m=" << m << " kind=" << kind
                  << " split=" << spec.splitBackward);
    BuiltProblem built;
    const ScheduleResult step = scheduleSpec(spec, TimeModel::Step, &built);
    const ScheduleResult cost = scheduleSpec(spec, TimeModel::Cost);
    const double stepOrder = replayMakespan(built.problem, step);
    const double costOrder = replayMakespan(built.problem, cost);
    CHECK(costOrder == Approx(cost.makespan));
    CHECK(costOrder <= stepOrder * 1.01);
    improved += costOrder < stepOrder * (1 - 1e-9);
    // A cutoff at the makespan changes nothing; one below it gives up.
    const ScheduleResult atCut =
        schedule(built.problem, TimeModel::Cost, nullptr, cost.makespan);
    CHECK(atCut.ok);
    CHECK(atCut.makespan == cost.makespan);
    const ScheduleResult below =
        schedule(built.problem, TimeModel::Cost, nullptr, cost.makespan * 0.99);
    CHECK_FALSE(below.ok);
    CHECK(below.cut);
  }
  // The cost-aware order is not only a copy of the step order.
  CHECK(improved > 0);
}

namespace {
/// The most distinct micro-batches in flight at once in `p`'s first global
/// limit, replayed from the schedule: a micro-batch enters with its first
/// source forward and leaves when its last source backward ends.
size_t peakGlobalInflight(const Problem &p, const ScheduleResult &result) {
  REQUIRE(p.globalLimits.size() == 1);
  const std::set<int32_t> sources(p.globalLimits[0].sources.begin(),
                                  p.globalLimits[0].sources.end());
  std::map<int32_t, int> through; // micro-batch -> sources it flows through
  for (int32_t s : sources)
    for (int32_t mb = p.parts[s].mbBegin; mb < p.parts[s].mbEnd; ++mb)
      ++through[mb];
  std::vector<std::tuple<double, int, int32_t>> events; // time, +1/-1, mb
  for (const auto &items : result.actors)
    for (const ScheduledItem &item : items) {
      if (!sources.count(item.part))
        continue;
      if (item.kind == CompKind::Fwd)
        events.push_back({item.start, +1, item.mb});
      else if (item.kind == CompKind::Bwd)
        events.push_back({item.end, -1, item.mb});
    }
  std::sort(events.begin(), events.end()); // releases (-1) first on ties
  std::map<int32_t, int> started, released;
  std::set<int32_t> alive;
  size_t peak = 0;
  for (auto [time, delta, mb] : events) {
    if (delta > 0 && started[mb]++ == 0)
      alive.insert(mb);
    if (delta < 0 && ++released[mb] == through[mb])
      alive.erase(mb);
    peak = std::max(peak, alive.size());
  }
  return peak;
}

void addGlobalLimit(PipelineSpec &spec, int64_t limit) {
  InflightSpec global;
  global.scope = InflightScope::Global;
  global.limits = {limit};
  spec.inflight.push_back(global);
}
} // namespace

TEST_CASE("a global in-flight limit counts micro-batches, not sources",
          "[timemodel][inflight]") {
  for (TimeModel model : {TimeModel::Step, TimeModel::Cost}) {
    SECTION("a shared first stage") {
      // Every micro-batch's forward runs on both parts of stage 0.
      PipelineSpec spec = makeSpec(3, 6, PlacementKind::OneToOne, 1,
                                   Cttp::FwdFirst, kBreadth, kBreadth);
      spec.modules[0].shared.push_back({0, {0, 1}});
      addGlobalLimit(spec, 2);
      BuiltProblem built;
      const ScheduleResult result = scheduleSpec(spec, model, &built);
      REQUIRE(built.problem.globalLimits[0].sources.size() == 2);
      CHECK(peakGlobalInflight(built.problem, result) == 2);
    }
    SECTION("two towers joined by a head") {
      // Two towers on actors 0-1 and 2-3 feed a head on actor 4; every
      // micro-batch enters both towers and counts once.
      PipelineSpec spec;
      spec.actors = 5;
      spec.microbatches = 7;
      for (auto [name, first, count] :
           {std::tuple{"image", 0, 2}, std::tuple{"text", 2, 2},
            std::tuple{"head", 4, 1}}) {
        ModuleSpec module;
        module.name = name;
        module.placement.kind = PlacementKind::OneToOne;
        module.placement.chunks = 1;
        for (int32_t a = first; a < first + count; ++a)
          module.placement.actors.push_back(a);
        module.layers = 2 * count;
        spec.modules.push_back(module);
      }
      spec.modules[2].inputs = {0, 1};
      PrioritySpec priority;
      priority.cttp = Cttp::FwdFirst;
      spec.priorities.push_back(priority);
      addGlobalLimit(spec, 3);
      BuiltProblem built;
      const ScheduleResult result = scheduleSpec(spec, model, &built);
      REQUIRE(built.problem.globalLimits[0].sources.size() == 2);
      CHECK(peakGlobalInflight(built.problem, result) == 3);
    }
  }
}

TEST_CASE("the literal step rule idles where the default moves on",
          "[timemodel][algorithm1]") {
  PipelineSpec spec = makeSpec(4, 8, PlacementKind::OneToOne, 1,
                               Cttp::FwdFirst, kBreadth, kBreadth,
                               oneF1BLimits(4));
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  CHECK(schedule(built->problem, TimeModel::Step).ok);
  built->problem.stepRule = StepRule::Literal;
  const ScheduleResult literal = schedule(built->problem, TimeModel::Step);
  CHECK(!literal.ok);
  CHECK(literal.error.find("literal step rule") != std::string::npos);
  // Backwards first never fetches from a held-back queue first: both agree.
  spec.priorities[0].cttp = Cttp::BwdFirst;
  llvm::Expected<BuiltProblem> again = buildProblem(spec);
  REQUIRE(static_cast<bool>(again));
  const ScheduleResult next = schedule(again->problem, TimeModel::Step);
  again->problem.stepRule = StepRule::Literal;
  const ScheduleResult paper = schedule(again->problem, TimeModel::Step);
  REQUIRE(paper.ok);
  CHECK(paper.makespan == next.makespan);
}
