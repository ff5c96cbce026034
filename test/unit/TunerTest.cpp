//===- TunerTest.cpp - Collectives, vocabulary parallelism, the tuner -----===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "TestSpecs.h"

#include "flexpipe/Scheduling/GradientSeparation.h"
#include "flexpipe/Scheduling/Tuner.h"

#include <catch2/catch.hpp>

#include <functional>
#include <limits>
#include <set>

using namespace flexpipe::sched;
using flexpipe::sched::test::valueOf;

namespace {

ModelConfig gptModel(int64_t layers, int64_t vocab) {
  ModelConfig model;
  model.name = "gpt-test";
  model.globalBatchSize = 16;
  ModuleModel m;
  m.name = "gpt";
  m.layers = layers;
  m.hidden = 1024;
  m.heads = 16;
  m.seq = 512;
  m.vocab = vocab;
  m.lmHead = true;
  model.modules.push_back(m);
  return model;
}
/// `options` resolved for the model and cluster (the test stops if not).
TuneOptions resolved(const ModelConfig &model, const ClusterConfig &cluster,
                     TuneOptions options) {
  llvm::Expected<TuneOptions> r =
      resolveOptions(model, cluster, std::move(options));
  REQUIRE(static_cast<bool>(r));
  return *r;
}

/// Why the space of `options` is empty (the test stops if it is not).
std::string emptySpaceReason(const ModelConfig &model,
                             const ClusterConfig &cluster,
                             TuneOptions options) {
  llvm::Expected<std::vector<Candidate>> space =
      enumerateCandidates(model, resolved(model, cluster, std::move(options)));
  REQUIRE_FALSE(static_cast<bool>(space));
  return llvm::toString(space.takeError());
}

} // namespace

TEST_CASE("a collective starts on all members at once and gates their "
          "backwards",
          "[scheduler][sync]") {
  // Stage 0 on actor 0, stage 1 on actor 1, stage 2 shared by both (a head
  // with a collective after its forward).
  Problem p;
  p.numActors = 2;
  p.numMicrobatches = 3;
  for (auto [stage, actor, depth] :
       {std::tuple{0, 0, 0}, {1, 1, 1}, {2, 0, 2}, {2, 1, 2}}) {
    StagePart part;
    part.stage = stage;
    part.actor = actor;
    part.depth = depth;
    part.mbEnd = 3;
    part.countsInflight = stage != 2;
    p.parts.push_back(part);
  }
  p.edges = {{0, 1}, {1, 2}, {1, 3}};
  p.policies.assign(2, ActorPolicy{});
  p.actorLimits = {2, 1};
  Registered sync;
  sync.name = "stats";
  sync.stage = 2;
  sync.actors = {0, 1};
  sync.duration = 0.5;
  sync.after = {{CompKind::Fwd, 2}, {CompKind::Fwd, 3}};
  sync.before = {{CompKind::Bwd, 2}, {CompKind::Bwd, 3}};
  p.registered.push_back(sync);
  const ScheduleResult r = schedule(p, TimeModel::Cost);
  REQUIRE(r.ok);

  for (int32_t mb = 0; mb < 3; ++mb) {
    double start[2] = {-1, -1}, headFwdEnd[2] = {-1, -1},
           headBwdStart[2] = {-1, -1};
    for (int32_t a = 0; a < 2; ++a)
      for (const ScheduledItem &item : r.actors[a]) {
        if (item.mb != mb ||
            (!item.isRegistered() && p.parts[item.part].stage != 2))
          continue;
        if (item.isRegistered()) {
          start[a] = item.start;
          CHECK(item.end - item.start == Approx(0.5));
        } else if (item.kind == CompKind::Fwd) {
          headFwdEnd[a] = item.end;
        } else {
          headBwdStart[a] = item.start;
        }
      }
    REQUIRE(start[0] >= 0);
    CHECK(start[0] == start[1]);
    for (int a = 0; a < 2; ++a) {
      CHECK(start[a] >= std::max(headFwdEnd[0], headFwdEnd[1]));
      CHECK(headBwdStart[a] >= start[a] + 0.5);
    }
  }

  // The program with its all_gathers verifies (no deadlock) and simulates.
  Program program = toProgram(p, r, 3, {{0, 1}, {1, 2}}, {2});
  insertCommunication(program);
  REQUIRE(program.groups.size() == 1);
  CHECK(program.groups[0] == std::vector<int32_t>{0, 1});
  CHECK_FALSE(verify(program).has_value());
}

TEST_CASE("the vocabulary-parallel placement adds a shared embedding and "
          "head",
          "[spec][vocab]") {
  PipelineSpec spec = test::makeSpec(4, 8, PlacementKind::OneToOne, 1,
                                     Cttp::BwdFirst, {}, {}, {4, 3, 2, 1});
  spec.modules[0].vocabParallel = true;
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  CHECK(built->numStages == 6);
  CHECK(built->sharedStages == std::vector<int32_t>{4, 5});
  CHECK(built->modules[0].embeddingStages == std::vector<int32_t>{4});
  CHECK(built->modules[0].headStages == std::vector<int32_t>{5});
  CHECK(built->stageMeta[0].first == false);
  CHECK(built->stageMeta[3].last == false);
  CHECK((built->stageMeta[4].layers == 0 && built->stageMeta[4].first));
  CHECK((built->stageMeta[5].layers == 0 && built->stageMeta[5].last));
  REQUIRE(built->problem.registered.size() == 1);
  CHECK(built->problem.registered[0].actors ==
        std::vector<int32_t>{0, 1, 2, 3});
  CHECK(built->problem.registered[0].stage == 5);
  const std::vector<std::pair<int32_t, int32_t>> edges = {
      {0, 1}, {1, 2}, {2, 3}, {4, 0}, {3, 5}};
  CHECK(built->stageEdges == edges);

  // The 1F1B limits still hold for the transformer stages: actor 3 never has
  // two of its own forwards in flight, whatever its head slices do.
  const ScheduleResult r = schedule(built->problem, TimeModel::Step);
  REQUIRE(r.ok);
  int inflight = 0, peak = 0;
  for (const ScheduledItem &item : r.actors[3]) {
    if (item.isRegistered() || built->problem.parts[item.part].stage != 3)
      continue;
    inflight += item.kind == CompKind::Fwd ? 1 : -1;
    peak = std::max(peak, inflight);
  }
  CHECK(peak == 1);
}

TEST_CASE("the tuner's options are resolved or refused with advice",
          "[tuner]") {
  const ModelConfig model = gptModel(8, 32000);
  const ClusterConfig c = test::testCluster(8);
  TuneOptions o;
  llvm::Expected<TuneOptions> r = resolveOptions(model, c, o);
  REQUIRE(static_cast<bool>(r));
  CHECK(r->gpus == 8);
  CHECK(r->globalBatch == 16);
  CHECK(r->pp == std::vector<int64_t>{1, 2, 4, 8});
  CHECK(r->mbs == std::vector<int64_t>{1, 2, 4, 8, 16});

  o.pp = {3};
  llvm::Expected<TuneOptions> bad = resolveOptions(model, c, o);
  REQUIRE_FALSE(static_cast<bool>(bad));
  CHECK(llvm::toString(bad.takeError()) ==
        "pp = 3 does not divide the 8 GPUs; pp x dp must equal the number of "
        "GPUs");

  // Not powers of two: every divisor, pp at most the layers.
  o.pp.clear();
  o.gpus = 6;
  o.globalBatch = 12;
  llvm::Expected<TuneOptions> six = resolveOptions(model, c, o);
  REQUIRE(static_cast<bool>(six));
  CHECK(six->pp == std::vector<int64_t>{1, 2, 3, 6});
  CHECK(six->mbs == std::vector<int64_t>{1, 2, 3, 4, 6, 12});
  llvm::Expected<std::vector<Candidate>> sixSpace =
      enumerateCandidates(model, *six);
  REQUIRE(static_cast<bool>(sixSpace));
  std::set<std::pair<int64_t, int64_t>> shapes; // (pp, mbs)
  for (const Candidate &candidate : *sixSpace) {
    CHECK(candidate.pp * candidate.dp == 6);
    CHECK(12 % (candidate.dp * candidate.mbs) == 0);
    shapes.insert({candidate.pp, candidate.mbs});
  }
  CHECK(shapes.count({3, 3})); // dp 2, m 2
  CHECK(shapes.count({6, 3})); // dp 1, m 4
  CHECK(shapes.count({2, 2})); // dp 3, m 2
  llvm::Expected<TuneOptions> shallow =
      resolveOptions(gptModel(4, 32000), c, o);
  REQUIRE(static_cast<bool>(shallow));
  CHECK(shallow->pp == std::vector<int64_t>{1, 2, 3});

  // 6 devices and 16 sequences with pp 1 or 2: dp 6 or 3 divides no batch.
  o.globalBatch = 16;
  o.pp = {1, 2};
  CHECK(emptySpaceReason(model, c, o) ==
        "the search space is empty for 6 devices and a global batch of 16 "
        "(pp tried: 1, 2); pp 1 x dp 6 with micro-batch size 1: dp x mbs = 6 "
        "does not divide the global batch 16; pp 2 x dp 3 with micro-batch "
        "size 1: dp x mbs = 3 does not divide the global batch 16; use a "
        "global batch divisible by dp x mbs");

  // Each pp says why it has no candidate: the batch, or the layers.
  o.gpus = 5;
  o.globalBatch = 8;
  o.pp.clear();
  o.placements = {TunePlacement::VShape};
  CHECK(emptySpaceReason(model, c, o) ==
        "the search space is empty for 5 devices and a global batch of 8 (pp "
        "tried: 1, 5); pp 1 x dp 5 with micro-batch size 1: dp x mbs = 5 does "
        "not divide the global batch 8; pp 5 with vshape: 10 stages of one "
        "layer at least, but the model has 8 layers; use a global batch "
        "divisible by dp x mbs");
  o.placements.clear();

  // The vocabulary is split over two actors at least: one actor's spec
  // would not compile (its all_gather needs a group of two).
  llvm::Expected<std::vector<Candidate>> space = enumerateCandidates(model, *r);
  REQUIRE(static_cast<bool>(space));
  size_t vocab = 0;
  for (const Candidate &candidate : *space) {
    CHECK((!candidate.vocabParallel || candidate.pp >= 2));
    vocab += candidate.vocabParallel;
  }
  CHECK(vocab > 0);
  std::optional<Evaluation> t1f1b = bestBaseline(model, c, *r, true);
  REQUIRE(t1f1b);
  CHECK(t1f1b->candidate.pp >= 2);
}

TEST_CASE("pruning by bound never loses the best candidate", "[tuner]") {
  const ModelConfig model = gptModel(8, 64000);
  const ClusterConfig c = test::testCluster(4);
  TuneOptions o;
  o.gpus = 4;
  o.threads = 2;
  o.mbs = {1, 2};
  // Only the sound bound: no window, no top-k limit on separation variants.
  o.separationWindow = 0;
  o.separationTop = 0;
  llvm::Expected<TuneOptions> r = resolveOptions(model, c, o);
  REQUIRE(static_cast<bool>(r));
  llvm::Expected<TuneResult> tuned = tune(model, c, *r);
  REQUIRE(static_cast<bool>(tuned));
  REQUIRE_FALSE(tuned->ranked.empty());
  // Ranked by time; times apart by rounding only (1e-9 relative) tie, and
  // memory decides.
  for (size_t i = 1; i < tuned->ranked.size(); ++i) {
    const Evaluation &a = tuned->ranked[i - 1], &b = tuned->ranked[i];
    CHECK(a.iterationTime <= b.iterationTime * (1 + 1e-9));
    if (b.iterationTime - a.iterationTime <= 1e-12 * b.iterationTime)
      CHECK(a.peakBytes <= b.peakBytes);
  }

  // Exhaustively: every candidate of the space, none skipped.
  llvm::Expected<std::vector<Candidate>> space = enumerateCandidates(model, *r);
  REQUIRE(static_cast<bool>(space));
  CHECK(space->size() == tuned->candidates);
  double best = std::numeric_limits<double>::infinity();
  for (const Candidate &candidate : *space) {
    const Evaluation e = evaluate(candidate, model, c, *r);
    if (e.ok() && e.fitsMemory)
      best = std::min(best, e.iterationTime);
  }
  CHECK(tuned->ranked.front().iterationTime == Approx(best).epsilon(1e-12));

  // The baselines are in the space, so the best is at least as fast.
  for (bool vp : {false, true}) {
    std::optional<Evaluation> base = bestBaseline(model, c, *r, vp);
    REQUIRE(base.has_value());
    CHECK(tuned->ranked.front().iterationTime <= base->iterationTime);
  }
}

TEST_CASE("the lower bound never exceeds a simulated iteration time",
          "[tuner]") {
  // Every candidate of several spaces: fused and separated, every
  // placement, with and without the MLLM placement, dp > 1, pp up to 8, a
  // layer count that does not divide evenly and an odd micro-batch count.
  struct Space {
    int64_t layers, vocab, gpus, batch;
  };
  size_t checked = 0, tight = 0;
  for (const Space &space : {Space{8, 64000, 4, 16}, Space{12, 256000, 8, 16},
                             Space{7, 32000, 6, 9}}) {
    ModelConfig model = gptModel(space.layers, space.vocab);
    model.globalBatchSize = space.batch;
    const ClusterConfig c = test::testCluster(space.gpus);
    TuneOptions o;
    o.gpus = space.gpus;
    if (space.gpus == 6)
      o.pp = {3, 6}; // not a power of two
    llvm::Expected<TuneOptions> r = resolveOptions(model, c, o);
    REQUIRE(static_cast<bool>(r));
    llvm::Expected<std::vector<Candidate>> all = enumerateCandidates(model, *r);
    REQUIRE(static_cast<bool>(all));
    for (size_t i = 0; i < all->size(); i += 3) { // a third, for time
      const Candidate &candidate = (*all)[i];
      const Evaluation e = evaluate(candidate, model, c, *r);
      if (!e.ok() || e.iterationTime <= 0)
        continue;
      const double bound = iterationLowerBound(candidate, model, c, *r);
      INFO(describe(candidate)
           << " pp " << candidate.pp << " dp " << candidate.dp << " m "
           << candidate.microbatches);
      CHECK(bound > 0);
      CHECK(bound <= e.iterationTime * (1 + 1e-9));
      ++checked;
      tight += bound >= 0.9 * e.iterationTime;
    }
  }
  CHECK(checked > 300);
  // Not vacuous: the bound is within 10% for many of them.
  CHECK(tight > checked / 10);
}

/// Separates the gradients of every 7th fused candidate for 8 GPUs and checks
/// that the re-timer's fused and separated times are the simulated times of
/// the programs it returns, under the evaluation's costs changed by `adjust`.
static void
checkSeparationAgainstSimulator(const std::function<void(SimCosts &)> &adjust) {
  const ModelConfig model = gptModel(16, 256000);
  const ClusterConfig c = test::testCluster(8);
  TuneOptions o;
  o.gpus = 8;
  const TuneOptions r = resolved(model, c, o);
  llvm::Expected<std::vector<Candidate>> all = enumerateCandidates(model, r);
  REQUIRE(static_cast<bool>(all));
  size_t checked = 0, collectives = 0, faster = 0;
  for (size_t i = 0; i < all->size(); i += 7) {
    Candidate candidate = (*all)[i];
    candidate.separation = false;
    EvaluationDetail detail;
    const Evaluation e = evaluate(candidate, model, c, r, &detail);
    if (!e.ok())
      continue;
    INFO(describe(candidate) << " pp " << candidate.pp << " dp " << candidate.dp
                             << " m " << candidate.microbatches);
    adjust(detail.costs);
    Program split = detail.program;
    bool gathers = false;
    for (std::vector<ProgOp> &ops : split.actors) {
      std::vector<ProgOp> kept;
      for (const ProgOp &op : ops)
        if (isCompute(op.kind) || op.kind == OpKind::AllGather) {
          kept.push_back(op);
          gathers |= op.kind == OpKind::AllGather;
        }
      ops = std::move(kept);
    }
    splitBackward(split);
    SeparationOptions options;
    options.maxRounds = 20;
    const SeparationResult sep =
        valueOf(separateGradients(split, detail.costs, options));
    auto simulate = [&](Program program) {
      insertCommunication(program);
      Simulator simulator;
      REQUIRE(llvm::toString(simulator.prepare(program)) == "");
      return simulator.run(detail.costs).iterationTime;
    };
    CHECK(sep.fusedTime == Approx(simulate(split)).epsilon(1e-9));
    CHECK(sep.time == Approx(simulate(sep.program)).epsilon(1e-9));
    CHECK(sep.time <= sep.fusedTime * (1 + 1e-12));
    ++checked;
    collectives += gathers;
    faster += sep.time < sep.fusedTime * (1 - 1e-6);
  }
  CHECK(checked > 20);
  CHECK(collectives > 5);
  CHECK(faster > 5); // not vacuous: separation moved weight gradients
}

TEST_CASE("gradient separation times programs as the simulator does",
          "[tuner][separation]") {
  // With real message costs, dp > 1 and the vocabulary-parallel head's
  // blocking collectives (each member waits for the last to arrive).
  checkSeparationAgainstSimulator([](SimCosts &) {});
}

TEST_CASE("gradient separation times shared cores as the simulator does",
          "[tuner][separation]") {
  // Pairs of actors share 1.5 cores and slow each other by 10% when both
  // compute (a measured cluster's oversubscribed node): the re-timer runs on
  // the simulator's event core, so its times are the simulated ones, whose
  // computations now end only when the cores let them.
  checkSeparationAgainstSimulator([](SimCosts &costs) {
    const int32_t actors = 8;
    costs.coreGroup.resize(actors);
    for (int32_t a = 0; a < actors; ++a)
      costs.coreGroup[a] = a / 2;
    costs.groupCores.assign(actors / 2, 1.5);
    costs.groupSlowdown.assign(actors / 2, {{1.0, 1.0, 1.1}});
  });
}

TEST_CASE("skipping by lower bound keeps the exact fastest candidates",
          "[tuner]") {
  const ModelConfig model = gptModel(16, 128000);
  const ClusterConfig c = test::testCluster(8);
  TuneOptions o;
  o.gpus = 8;
  o.threads = 2;
  o.separation = TuneOptions::Choice::Off;
  o.exact = 6;
  const TuneOptions r = resolved(model, c, o);
  llvm::Expected<TuneResult> bounded = tune(model, c, r);
  TuneOptions all = r;
  all.exact = 0;
  llvm::Expected<TuneResult> exhaustive = tune(model, c, all);
  REQUIRE(static_cast<bool>(bounded));
  REQUIRE(static_cast<bool>(exhaustive));
  CHECK(exhaustive->bounded == 0);
  CHECK(bounded->bounded > 0); // it skips something here
  // Every candidate counted once: simulated (within memory; those running
  // a better-ranked one's schedule too), skipped, pruned, or rejected over
  // memory or unschedulable.
  for (const TuneResult *result : {&*bounded, &*exhaustive}) {
    size_t rejected = 0;
    for (const Evaluation &e : result->rejected)
      rejected += !e.skipped && !e.sameSchedule;
    CHECK(result->simulated + result->bounded + result->pruned + rejected ==
          result->candidates);
  }
  REQUIRE(bounded->ranked.size() >= 6);
  for (size_t i = 0; i < 6; ++i) {
    CHECK(bounded->ranked[i].candidate == exhaustive->ranked[i].candidate);
    CHECK(bounded->ranked[i].iterationTime ==
          exhaustive->ranked[i].iterationTime);
  }
  // Skipped candidates say why (their bound, or their schedule given up at
  // the cutoff) and are not counted as failures.
  size_t byBound = 0, cut = 0;
  for (const Evaluation &e : bounded->rejected)
    if (e.skipped) {
      byBound += e.error.rfind("skipped: its lower bound", 0) == 0;
      cut += e.error.rfind("skipped: its schedule cannot end within", 0) == 0;
    }
  CHECK(byBound > 0);
  CHECK(cut > 0);
  CHECK(byBound + cut == bounded->bounded);
  // The baselines are the same either way.
  for (bool vp : {false, true}) {
    std::optional<Evaluation> a = bestBaseline(model, c, r, vp, &*bounded);
    std::optional<Evaluation> b = bestBaseline(model, c, all, vp, &*exhaustive);
    REQUIRE(a.has_value() == b.has_value());
    if (a)
      CHECK(a->iterationTime == b->iterationTime);
  }
}

TEST_CASE("the ranking has one row per schedule", "[tuner]") {
  // At pp 1 every stage order and cttp schedule one stage the same way:
  // each such candidate after the first is set aside, naming the rank it
  // repeats (the top listed them all).
  const ModelConfig model = gptModel(16, 128000);
  const ClusterConfig c = test::testCluster(4);
  TuneOptions o;
  o.gpus = 4;
  o.threads = 2;
  o.pp = {1, 2};
  const TuneOptions r = resolved(model, c, o);
  llvm::Expected<TuneResult> result = tune(model, c, r);
  REQUIRE(static_cast<bool>(result));
  std::set<uint64_t> seen;
  for (const Evaluation &e : result->ranked) {
    CHECK(e.schedule != 0);
    CHECK(seen.insert(e.schedule).second);
  }
  size_t aside = 0;
  for (const Evaluation &e : result->rejected)
    if (e.sameSchedule) {
      ++aside;
      CHECK(e.ok() == false);
      CHECK(seen.count(e.schedule) == 1);
      CHECK(e.error.rfind("the same schedule as rank ", 0) == 0);
    }
  CHECK(aside > 0);
}

TEST_CASE("a bounded search with separation keeps the exact fastest "
          "candidates",
          "[tuner]") {
  // GPT 5B with a 64K vocabulary on 7 devices: separation variants make the
  // top several times, and each must be tried while it can still enter the
  // top 16, not only while it can beat the best.
  ModelConfig model = gptModel(64, 64000);
  model.globalBatchSize = 128;
  model.modules.front().hidden = 2560;
  model.modules.front().heads = 64;
  const ClusterConfig c = test::a800Cluster(7);
  TuneOptions o;
  o.threads = 1; // the order in which the threshold falls, fixed
  const TuneOptions r = resolved(model, c, o);
  REQUIRE(r.exact == 16);
  TuneOptions all = r;
  all.exact = 0;
  llvm::Expected<TuneResult> exhaustive = tune(model, c, all);
  REQUIRE(static_cast<bool>(exhaustive));
  REQUIRE(exhaustive->ranked.size() >= 16);
  for (int threads : {1, 2}) {
    TuneOptions t = r;
    t.threads = threads;
    llvm::Expected<TuneResult> bounded = tune(model, c, t);
    REQUIRE(static_cast<bool>(bounded));
    REQUIRE(bounded->ranked.size() >= 16);
    size_t separated = 0;
    for (size_t i = 0; i < 16; ++i) {
      CHECK(bounded->ranked[i].candidate == exhaustive->ranked[i].candidate);
      CHECK(bounded->ranked[i].iterationTime ==
            exhaustive->ranked[i].iterationTime);
      separated += bounded->ranked[i].candidate.separation;
    }
    // Three variants tie for the best time, more follow.
    CHECK(separated >= 4);
  }
}

TEST_CASE("a candidate's spec text names what its PipelineSpec holds",
          "[tuner]") {
  const ModelConfig model = gptModel(16, 32000);
  Candidate c;
  c.pp = 4;
  c.dp = 2;
  c.microbatches = 8;
  c.placement = TunePlacement::Circular;
  c.chunks = 2;
  c.vocabParallel = true;
  c.cttp = Cttp::Interleaved;
  c.fwd = {StageOrder::BreadthFirst, 4};
  c.bwd = {StageOrder::DepthFirst, 4};
  CHECK(specText(c, model, "best") ==
        "flexpipe.pipeline @best actors(4) microbatches(8) {\n"
        "  flexpipe.module @gpt layers(16) placement(circular) chunks(2) "
        "vocab_parallel\n"
        "  flexpipe.priority cttp<interleaved> fstp<breadth_first, 4> "
        "bstp<depth_first, 4>\n"
        "  flexpipe.inflight per_actor affine_map<(a)[pp, s, m] -> (s + pp - "
        "a * 2 - 1)>\n"
        "}\n");
  const PipelineSpec spec = pipelineSpec(c, model);
  REQUIRE(spec.inflight.size() == 1);
  // s = 8 stages: 8 + 4 - 2a - 1.
  CHECK(spec.inflight[0].limits == std::vector<int64_t>{11, 9, 7, 5});
  CHECK(describe(c) == "circular v2 +vocab, interleaved bf:4/df:4");
}

TEST_CASE("gradient separation handles the vocabulary-parallel slices and "
          "their all-gathers",
          "[separation][vocab]") {
  PipelineSpec spec =
      test::makeSpec(4, 8, PlacementKind::OneToOne, 1, Cttp::BwdFirst, {},
                     {StageOrder::DepthFirst, 0}, {4, 3, 2, 1});
  spec.modules[0].vocabParallel = true;
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  const ScheduleResult r = schedule(built->problem, TimeModel::Cost);
  REQUIRE(r.ok);
  Program program = toProgram(built->problem, r, built->numStages,
                              built->stageEdges, built->sharedStages);
  program.stageMeta = built->stageMeta;
  program.moduleNames = built->moduleNames;
  SimCosts costs = layerCosts(program);
  costs.collectiveTime = 0.1;

  Program fused = program;
  insertCommunication(fused);
  Simulator before;
  REQUIRE(llvm::toString(before.prepare(fused)) == "");

  splitBackward(program);
  const SeparationResult separated =
      valueOf(separateGradients(program, costs, {}));
  Program out = separated.program;
  // Every all-gather kept, each shared stage's parts still on every actor.
  int gathers = 0;
  for (const auto &ops : out.actors)
    for (const ProgOp &op : ops)
      gathers += op.kind == OpKind::AllGather;
  CHECK(gathers == 4 * 8);
  insertCommunication(out);
  CHECK_FALSE(verify(out).has_value());
  Simulator after;
  REQUIRE(llvm::toString(after.prepare(out)) == "");
  CHECK(after.run(costs).iterationTime <=
        before.run(costs).iterationTime * (1 + 1e-9));
}

TEST_CASE("after the pipeline, copies of a stage exchange their gradients "
          "and shared stages do not",
          "[tuner][costmodel]") {
  // A bidirectional pipeline holds each stage on two actors (a and
  // pp - 1 - a) that add their gradients after the pipeline, as the runtime
  // does; the vocabulary-parallel embedding and head are shared by every
  // actor and summed on the device, so they are not exchanged. Then each
  // actor's gradients are all-reduced over its dp replicas.
  const ModelConfig model = gptModel(16, 256000);
  const ClusterConfig c = test::testCluster(8);
  TuneOptions o;
  o.gpus = 8;
  const TuneOptions r = resolved(model, c, o);
  for (bool vocab : {false, true}) {
    INFO("vocab_parallel " << vocab);
    Candidate candidate;
    candidate.pp = 4;
    candidate.dp = 2;
    candidate.microbatches = 8;
    candidate.placement = TunePlacement::Bidirectional;
    candidate.vocabParallel = vocab;
    EvaluationDetail detail;
    const Evaluation e = evaluate(candidate, model, c, r, &detail);
    INFO(e.error);
    REQUIRE(e.ok());
    const ModelConfig sized = withBatch(model, 1, r.globalBatch);
    const StageLayout layout = stageLayoutOf(detail.program);
    const ActorHoldings all = actorHoldings(layout, sized, c);
    StageLayout unshared = layout;
    for (std::vector<int32_t> &actors : unshared.actorsOf)
      if (actors.size() > 1)
        actors.clear();
    const ActorHoldings own = actorHoldings(unshared, sized, c);
    double exchange = 0, reduce = 0;
    for (int64_t a = 0; a < 4; ++a) {
      exchange = std::max(exchange, transferTime(c, deviceOf(a, 0, 2),
                                                 deviceOf(3 - a, 0, 2),
                                                 own.gradBytes[a], true));
      reduce = std::max(reduce,
                        allReduceTime(c, {deviceOf(a, 0, 2), deviceOf(a, 1, 2)},
                                      all.gradBytes[a]));
    }
    CHECK(exchange > 0);
    CHECK(e.gradSyncTime ==
          Approx(exchange + reduce + iterationOverhead(c)).epsilon(1e-12));
    // Not vacuous: with the vocabulary split, an actor's own stages hold
    // less than all it holds.
    if (vocab)
      CHECK(own.gradBytes[0] < 0.9 * all.gradBytes[0]);
    else
      CHECK(own.gradBytes[0] == Approx(all.gradBytes[0]));
  }
}
