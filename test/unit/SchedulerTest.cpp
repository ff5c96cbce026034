//===- SchedulerTest.cpp - CSSR scheduler, comm insertion, verification ---===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/Simulator.h"

#include "TestSpecs.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>

using namespace flexpipe::sched;
using flexpipe::sched::test::kBreadth;
using flexpipe::sched::test::kDepth;
using flexpipe::sched::test::makeProgram;
using flexpipe::sched::test::makeSpec;

namespace {

using Rows = std::vector<std::vector<std::string>>;

/// A PyTorch compute_only CSV without idle cells and without actions other
/// than F/B/I/W (REDUCE_GRAD, ...).
Rows readReference(const std::string &name) {
  std::ifstream in(std::string(FLEXPIPE_TEST_DATA_DIR) + "/peer-orders/" +
                   name);
  REQUIRE(in.good());
  static const std::regex cell("^[0-9]+[FBIW][0-9]+$");
  Rows rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    rows.emplace_back();
    std::stringstream ss(line);
    std::string item;
    while (std::getline(ss, item, ','))
      if (std::regex_match(item, cell))
        rows.back().push_back(item);
  }
  return rows;
}

const char *letter(CompKind kind) {
  switch (kind) {
  case CompKind::Fwd:
    return "F";
  case CompKind::Bwd:
    return "B";
  case CompKind::Igrad:
    return "I";
  case CompKind::Wgrad:
    return "W";
  }
  return "?";
}

Rows rowsOf(const Problem &problem, const ScheduleResult &result) {
  Rows rows;
  for (const auto &items : result.actors) {
    rows.emplace_back();
    for (const ScheduledItem &item : items)
      rows.back().push_back(std::to_string(problem.parts[item.part].stage) +
                            letter(item.kind) + std::to_string(item.mb));
  }
  return rows;
}

struct Run {
  BuiltProblem built;
  ScheduleResult result;
};

Run run(const PipelineSpec &spec, TimeModel model = TimeModel::Step) {
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  ScheduleResult result = schedule(built->problem, model);
  std::string why = result.error;
  for (const std::string &wait : result.waits)
    why += "\n  " + wait;
  INFO(why);
  REQUIRE(result.ok);
  return {std::move(*built), std::move(result)};
}

/// `program` with each pair's transfers completing together, as an NCCL
/// group does: a blocking send becomes asynchronous, a blocking receive an
/// asynchronous post, and wherever the receive was waited for (after the
/// pair, or at its wait) the send is waited for too. Pairs whose send is
/// asynchronous already are left as they are.
Program coupleGroups(const Program &program,
                     const std::vector<TransferPair> &pairs) {
  int32_t next = 0;
  for (const auto &ops : program.actors)
    for (const ProgOp &op : ops)
      next = std::max(next, op.token + 1);
  Program coupled = program;
  for (int32_t a = 0; a < program.numActors; ++a) {
    std::set<int32_t> firsts;
    for (const TransferPair &p : pairs)
      if (p.actor == a)
        firsts.insert(p.first);
    const std::vector<ProgOp> &ops = program.actors[a];
    std::map<int32_t, int32_t> alsoWait; // receive token -> send token
    std::vector<ProgOp> out;
    auto wait = [](int32_t token) {
      ProgOp w{OpKind::Wait};
      w.token = token;
      return w;
    };
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == OpKind::Wait && alsoWait.count(ops[i].token))
        out.push_back(wait(alsoWait[ops[i].token]));
      if (!firsts.count(static_cast<int32_t>(i))) {
        out.push_back(ops[i]);
        continue;
      }
      ProgOp x = ops[i], y = ops[i + 1];
      ProgOp &send = isSend(x.kind) ? x : y, &recv = isSend(x.kind) ? y : x;
      ++i;
      if (send.token >= 0) {
        out.push_back(x);
        out.push_back(y);
        continue;
      }
      send.token = next++;
      const bool blocking = recv.token < 0;
      if (blocking)
        recv.token = next++;
      out.push_back(x);
      out.push_back(y);
      if (blocking) {
        out.push_back(wait(send.token));
        out.push_back(wait(recv.token));
      } else {
        alsoWait[recv.token] = send.token;
      }
    }
    coupled.actors[a] = std::move(out);
  }
  return coupled;
}

/// Checks what mirroredTransferPairs promises on a verified `program`: each
/// pair is a send and a receive with one peer, adjacent, a blocking receive
/// only second; no op in two pairs; the peer's receive of the send and its
/// send of the receive are a pair too. Returns the number of pairs.
size_t checkMirroredPairs(const Program &program) {
  ProgramGraph graph;
  REQUIRE(!buildGraph(program, ChannelRule::PerStage, graph));
  const std::vector<TransferPair> pairs = mirroredTransferPairs(program, graph);
  std::set<std::pair<int32_t, int32_t>> starts, used;
  for (const TransferPair &p : pairs)
    starts.insert({p.actor, p.first});
  std::vector<int32_t> takes(graph.numOps(), -1); // receive -> its send
  for (int32_t id = 0; id < graph.numOps(); ++id)
    if (graph.takenBy[id] >= 0)
      takes[graph.takenBy[id]] = id;
  auto actorOf = [&](int32_t id) {
    int32_t a = 0;
    while (graph.actorBegin[a + 1] <= id)
      ++a;
    return a;
  };
  for (const TransferPair &p : pairs) {
    const std::vector<ProgOp> &ops = program.actors[p.actor];
    REQUIRE(p.first + 1 < static_cast<int32_t>(ops.size()));
    const ProgOp &x = ops[p.first], &y = ops[p.first + 1];
    INFO("actor " << p.actor << " op " << p.first);
    CHECK(x.peer == y.peer);
    const bool sendFirst = isSend(x.kind) && isReceive(y.kind);
    CHECK((sendFirst || (isReceive(x.kind) && x.token >= 0 && isSend(y.kind))));
    CHECK(used.insert({p.actor, p.first}).second);
    CHECK(used.insert({p.actor, p.first + 1}).second);
    const int32_t id = graph.actorBegin[p.actor] + p.first;
    const int32_t send = sendFirst ? id : id + 1,
                  recv = sendFirst ? id + 1 : id;
    const int32_t theirRecv = graph.takenBy[send], theirSend = takes[recv];
    REQUIRE(theirRecv >= 0);
    REQUIRE(theirSend >= 0);
    CHECK(actorOf(theirRecv) == x.peer);
    CHECK(std::abs(theirRecv - theirSend) == 1);
    CHECK(starts.count({x.peer, std::min(theirRecv, theirSend) -
                                    graph.actorBegin[x.peer]}) == 1);
  }
  // The pairs' transfers completing together deadlock nothing.
  ProgramGraph coupledGraph;
  std::optional<VerifyFailure> failure = buildGraph(
      coupleGroups(program, pairs), ChannelRule::PerStage, coupledGraph);
  INFO((failure ? failure->message : std::string()));
  CHECK(!failure);
  return pairs.size();
}

/// Inserts communication and verifies; returns the number of transfers.
size_t commAndVerify(const Run &r) {
  Program program = toProgram(r.built.problem, r.result, r.built.numStages,
                              r.built.stageEdges, r.built.sharedStages);
  size_t computes = 0;
  for (const auto &ops : program.actors)
    computes += ops.size();
  insertCommunication(program);
  size_t all = 0;
  for (const auto &ops : program.actors)
    all += ops.size();
  std::optional<VerifyFailure> failure = verify(program);
  INFO((failure ? failure->message : std::string()));
  CHECK(!failure);
  checkMirroredPairs(program);
  // With receives posted ahead, the pairs may differ; the promises hold.
  Program early = program;
  postReceivesEarly(early, 1);
  REQUIRE(!verify(early));
  checkMirroredPairs(early);
  return all - computes;
}

} // namespace

TEST_CASE("1F1B equals PyTorch's Schedule1F1B", "[scheduler][reference]") {
  Run r = run(makeSpec(4, 8, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                       kBreadth, kBreadth, {4, 3, 2, 1}));
  CHECK(rowsOf(r.built.problem, r.result) ==
        readReference("pp4_mb8_1F1B.csv"));
  // 3 inter-actor edges, 8 micro-batches, activation + gradient, send + recv.
  CHECK(commAndVerify(r) == 3 * 8 * 2 * 2);
}

TEST_CASE("GPipe equals PyTorch's ScheduleGPipe", "[scheduler][reference]") {
  Run r = run(makeSpec(4, 8, PlacementKind::OneToOne, 1, Cttp::FwdFirst,
                       kBreadth, kBreadth));
  CHECK(rowsOf(r.built.problem, r.result) ==
        readReference("pp4_mb8_GPipe.csv"));
  commAndVerify(r);
}

TEST_CASE("interleaved 1F1B equals PyTorch's ScheduleInterleaved1F1B",
          "[scheduler][reference]") {
  // Warm-up 2(pp - a - 1) + (v - 1) pp forwards, then one more in steady
  // state: s + pp - 2a - 1 with s = 8 stages.
  PipelineSpec spec = makeSpec(4, 8, PlacementKind::Circular, 2,
                               Cttp::Interleaved, {StageOrder::BreadthFirst, 4},
                               {StageOrder::DepthFirst, 4}, {11, 9, 7, 5});
  // The reference's costs: F = 1 and B = 2 per rank, half per chunk.
  Run r = run(spec, TimeModel::Cost);
  CHECK(rowsOf(r.built.problem, r.result) ==
        readReference("pp4_mb8_Interleaved1F1B_v2.csv"));
  spec.costPerLayer[0] = 0.25;
  spec.costPerLayer[1] = 0.5;
  CHECK(run(spec, TimeModel::Cost).result.makespan == Approx(28.5));
  commAndVerify(r);

  // In the step model (F = B = 1) ranks 1-3 still match; rank 0 takes a
  // ready backward while its next forward is not yet ready (Algorithm 1 falls
  // through to the next reorder queue) where Megatron idles.
  Run step = run(spec, TimeModel::Step);
  Rows rows = rowsOf(step.built.problem, step.result);
  Rows reference = readReference("pp4_mb8_Interleaved1F1B_v2.csv");
  for (int rank = 1; rank < 4; ++rank)
    CHECK(rows[rank] == reference[rank]);
}

TEST_CASE("looped BFS runs PyTorch's forward order", "[scheduler][reference]") {
  Run r = run(makeSpec(4, 8, PlacementKind::Circular, 2, Cttp::FwdFirst,
                       kBreadth, kDepth));
  Rows rows = rowsOf(r.built.problem, r.result);
  Rows reference = readReference("pp4_mb8_LoopedBFS_v2.csv");
  for (int rank = 0; rank < 4; ++rank) {
    // Forwards are identical.
    CHECK(std::vector<std::string>(rows[rank].begin(), rows[rank].begin() + 16) ==
          std::vector<std::string>(reference[rank].begin(),
                                   reference[rank].begin() + 16));
    // Backwards: the same stages in the same order; PyTorch walks each
    // stage's micro-batches from the last one, CSSR from the first (the
    // paper's default). Same makespan, checked below.
    for (int i = 16; i < 32; i += 8) {
      std::vector<std::string> ours(rows[rank].begin() + i,
                                    rows[rank].begin() + i + 8);
      std::vector<std::string> theirs(reference[rank].begin() + i,
                                      reference[rank].begin() + i + 8);
      std::reverse(theirs.begin(), theirs.end());
      CHECK(ours == theirs);
    }
  }
  PipelineSpec spec = makeSpec(4, 8, PlacementKind::Circular, 2,
                               Cttp::FwdFirst, kBreadth, kDepth);
  spec.costPerLayer[0] = 0.25;
  spec.costPerLayer[1] = 0.5;
  CHECK(run(spec, TimeModel::Cost).result.makespan == Approx(28.5));
  commAndVerify(r);
}

TEST_CASE("unit costs make the cost model equal the step model",
          "[scheduler][property]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int32_t pp = 1 + rng() % 6;
    const int32_t m = 1 + rng() % 12;
    const PlacementKind kinds[] = {PlacementKind::OneToOne,
                                   PlacementKind::Circular,
                                   PlacementKind::VShape};
    const PlacementKind kind = kinds[rng() % 3];
    const int64_t chunks = kind == PlacementKind::OneToOne ? 1 : 2;
    const bool bidirectional = m >= 2 && rng() % 4 == 0;
    const Cttp cttp = static_cast<Cttp>(rng() % 3);
    // Intervals in their natural directions (forwards front to back,
    // backwards back to front) on one-directional pipelines, as the tuner
    // explores them; other combinations make actors wait at a stage and can
    // wait forever (see the diagnostics test below).
    StagePriority fwd{static_cast<StageOrder>(rng() % 2), 0};
    StagePriority bwd{static_cast<StageOrder>(rng() % 2), 0};
    if (!bidirectional && rng() % 2)
      fwd = {StageOrder::BreadthFirst, 1 + static_cast<int64_t>(rng() % 3)};
    if (!bidirectional && rng() % 2)
      bwd = {StageOrder::DepthFirst, 1 + static_cast<int64_t>(rng() % 3)};
    // Limits that cannot starve an actor: 1F1B's pp - a when an actor holds
    // one stage; room for every micro-batch of its shallower stages plus one
    // otherwise (a tighter limit can fill up with shallow forwards, see the
    // diagnostics test below).
    const int64_t partsPerActor = chunks * (bidirectional ? 2 : 1);
    std::vector<int64_t> limits;
    if (rng() % 2)
      for (int32_t a = 0; a < pp; ++a)
        limits.push_back(partsPerActor == 1 ? pp - a
                                            : m * (partsPerActor - 1) + 1);
    PipelineSpec spec = makeSpec(pp, m, kind, chunks, cttp, fwd, bwd, limits,
                                 bidirectional);
    spec.splitBackward = rng() % 3 == 0;
    for (double &cost : spec.costPerLayer)
      cost = 1.0 / 2; // two layers per stage: every duration is 1
    INFO("trial " << trial << " pp=" << pp << " m=" << m << " kind="
                  << static_cast<int>(kind) << " bidir=" << bidirectional
                  << " cttp=" << static_cast<int>(cttp) << " fwd="
                  << static_cast<int>(fwd.order) << "/" << fwd.interval
                  << " bwd=" << static_cast<int>(bwd.order) << "/"
                  << bwd.interval << " limits=" << limits.size()
                  << " split=" << spec.splitBackward);
    Run step = run(spec, TimeModel::Step);
    Run cost = run(spec, TimeModel::Cost);
    CHECK(rowsOf(step.built.problem, step.result) ==
          rowsOf(cost.built.problem, cost.result));
    CHECK(step.result.makespan == cost.result.makespan);
    commAndVerify(step);
  }
}

TEST_CASE("every item is scheduled once and after its dependencies",
          "[scheduler][property]") {
  Run r = run(makeSpec(3, 5, PlacementKind::VShape, 2, Cttp::BwdFirst,
                       kDepth, kDepth, {}, /*bidirectional=*/true));
  size_t items = 0;
  for (const auto &actor : r.result.actors)
    items += actor.size();
  // 6 stages per direction x 2 directions, micro-batches split 3 + 2.
  CHECK(items == 6 * (3 + 2) * 2);
  // The two directions hold disjoint micro-batches.
  for (const auto &actor : r.result.actors)
    for (const ScheduledItem &item : actor) {
      const StagePart &part = r.built.problem.parts[item.part];
      CHECK(item.mb >= part.mbBegin);
      CHECK(item.mb < part.mbEnd);
    }
  commAndVerify(r);
}

TEST_CASE("in-flight limits bound the warm-up", "[scheduler]") {
  Run r = run(makeSpec(4, 8, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                       kBreadth, kBreadth, {2, 2, 2, 2}));
  std::vector<int> peaks;
  for (const auto &actor : r.result.actors) {
    int inflight = 0, peak = 0;
    for (const ScheduledItem &item : actor) {
      inflight += item.kind == CompKind::Fwd ? 1 : -1;
      peak = std::max(peak, inflight);
    }
    peaks.push_back(peak);
  }
  // The last actor runs each backward right after its forward.
  CHECK(peaks == std::vector<int>{2, 2, 2, 1});
}

TEST_CASE("a configuration that cannot progress is diagnosed",
          "[scheduler][diagnostics]") {
  // An extra dependency that makes stage 0's forward wait for its own
  // backward can never be satisfied.
  PipelineSpec spec = makeSpec(2, 2, PlacementKind::OneToOne, 1,
                               Cttp::BwdFirst, kBreadth, kBreadth);
  spec.dependencies.push_back({CompKind::Bwd, 0, 1, CompKind::Fwd, 0, 0});
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  // It closes a cycle with the stage graph: said so, with the cycle and
  // the dependency (it used to blame priorities and in-flight limits).
  for (TimeModel model : {TimeModel::Step, TimeModel::Cost}) {
    ScheduleResult result = schedule(built->problem, model);
    CHECK(!result.ok);
    CHECK(result.cycleDependency == 0);
    CHECK(result.error ==
          "the dependency closes a cycle with the stage graph, so none of its "
          "computations can ever run: fwd stage 0 mb 0 (actor 0) -> fwd stage "
          "1 mb 0 (actor 1) -> bwd stage 1 mb 0 (actor 1) -> fwd stage 0 mb 0 "
          "(actor 0)");
  }
  // The other way round, it only repeats what the stage graph says.
  spec.dependencies.back() = {CompKind::Fwd, 0, 0, CompKind::Bwd, 0, 1};
  built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  ScheduleResult result = schedule(built->problem, TimeModel::Step);
  CHECK(result.ok);
  CHECK(result.cycleDependency == -1);
}

TEST_CASE("a check that refuses a ready item is named, not the waits it "
          "causes",
          "[scheduler][diagnostics]") {
  // Actor 0 holds stages 0 and 2; the check refuses stage 2's forwards.
  // Its first unstarted item in stage order, stage 0's first backward,
  // waits (for stage 1's, which waits for stage 2), and the note said only
  // that.
  PipelineSpec spec = makeSpec(2, 2, PlacementKind::Circular, 2,
                               Cttp::BwdFirst, kBreadth, kBreadth);
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  Problem &p = built->problem;
  p.checks.push_back([](const StepView &, const ReadyItem &item) {
    return !(item.kind == CompKind::Fwd && item.stage == 2);
  });
  for (TimeModel model : {TimeModel::Step, TimeModel::Cost}) {
    ScheduleResult result = schedule(p, model);
    REQUIRE_FALSE(result.ok);
    REQUIRE_FALSE(result.waits.empty());
    CHECK(result.waits[0].find("fwd stage 2 mb 0 (actor 0) is ready, but a "
                               "plugin check function refuses it") !=
          std::string::npos);
  }
}

TEST_CASE("a negative or non-finite duration is refused",
          "[scheduler][diagnostics]") {
  PipelineSpec spec = makeSpec(2, 2, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                               kBreadth, kBreadth);
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  for (double bad : {-1.0, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    Problem p = built->problem;
    p.parts[1].cost[static_cast<int>(CompKind::Bwd)] = bad;
    const ScheduleResult result = schedule(p, TimeModel::Cost);
    CHECK(!result.ok);
    CHECK(result.error == "stage 1 has a negative or non-finite duration");
  }
}

TEST_CASE("an in-flight limit that starves a deeper stage is diagnosed",
          "[scheduler][diagnostics]") {
  // Each actor holds two stages. Breadth-first forwards fill actor 0's six
  // slots with stage 0, so its stage 3 never starts and nothing drains.
  PipelineSpec spec = makeSpec(3, 6, PlacementKind::Circular, 2,
                               Cttp::FwdFirst, kBreadth, kBreadth, {6, 5, 4});
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  ScheduleResult result = schedule(built->problem, TimeModel::Step);
  REQUIRE(!result.ok);
  CHECK(result.error == "no actor can make progress at step 6 with 15 of 72 "
                        "computations scheduled; the priorities and in-flight "
                        "limits admit no further step");
  CHECK(result.waits ==
        std::vector<std::string>{
            "actor 0 has 18 computations left: fwd stage 3 mb 0 (actor 0) is "
            "ready but the actor's in-flight limit 6 is reached",
            "actor 1 has 19 computations left: fwd stage 1 mb 5 (actor 1) is "
            "ready but the actor's in-flight limit 5 is reached",
            "actor 2 has 20 computations left: fwd stage 2 mb 4 (actor 2) is "
            "ready but the actor's in-flight limit 4 is reached"});
}

TEST_CASE("an interval traversal that waits forever is diagnosed",
          "[scheduler][diagnostics]") {
  // Forwards depth-first with interval 1 on a bidirectional V: each actor's
  // traversal waits at a deep stage whose input the other actor's traversal
  // holds back.
  PipelineSpec spec = makeSpec(2, 5, PlacementKind::VShape, 2,
                               Cttp::Interleaved, {StageOrder::DepthFirst, 1},
                               kBreadth, {}, /*bidirectional=*/true);
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  REQUIRE(static_cast<bool>(built));
  ScheduleResult result = schedule(built->problem, TimeModel::Step);
  REQUIRE(!result.ok);
  CHECK(result.waits ==
        std::vector<std::string>{
            "actor 0 has 19 computations left: its forward traversal "
            "(interval 1) waits at stage 3 while fwd stage 0 mb 1 (actor 0) "
            "is ready",
            "actor 1 has 19 computations left: its forward traversal "
            "(interval 1) waits at stage 7 while fwd stage 4 mb 4 (actor 1) "
            "is ready"});
}

TEST_CASE("vocabulary slices are outside a stage traversal interval",
          "[scheduler][vocab]") {
  // Interleaved 1F1B with the MLLM placement. Inside the traversal, an
  // actor's head slice waited for the traversal to come round while the
  // forward it held at waited, behind the in-flight limit, for the backward
  // that head starts: no m > 1 could be scheduled.
  for (int32_t pp = 2; pp <= 6; ++pp)
    for (int32_t m = 1; m <= 9; ++m) {
      std::vector<int64_t> limits;
      for (int32_t a = 0; a < pp; ++a)
        limits.push_back(pp + 2 * (pp - a) - 1);
      PipelineSpec spec = makeSpec(
          pp, m, PlacementKind::Circular, 2, Cttp::Interleaved,
          {StageOrder::BreadthFirst, pp}, {StageOrder::DepthFirst, pp}, limits);
      spec.modules[0].vocabParallel = true;
      INFO("pp=" << pp << " m=" << m);
      Run r = run(spec);
      // A slice never waits for the traversal: each actor's head forward of
      // micro-batch 0 comes right after the last stage's forward of it
      // (one step for the activation to arrive).
      const int32_t last = 2 * pp - 1, head = 2 * pp + 1;
      double lastEnd = -1;
      auto is = [&](const ScheduledItem &item, int32_t stage) {
        return !item.isRegistered() && item.kind == CompKind::Fwd &&
               item.mb == 0 && r.built.problem.parts[item.part].stage == stage;
      };
      for (const ScheduledItem &item : r.result.actors[last % pp])
        if (is(item, last))
          lastEnd = item.end;
      int heads = 0;
      for (const auto &items : r.result.actors)
        for (const ScheduledItem &item : items)
          if (is(item, head)) {
            CHECK(item.start == lastEnd);
            ++heads;
          }
      CHECK(heads == pp);
      commAndVerify(r);
    }
}

TEST_CASE("1F1B's steady state posts each send with the receive from the "
          "same peer, mirrored there: pairs for NCCL groups",
          "[verifier]") {
  Run r = run(makeSpec(3, 5, PlacementKind::OneToOne, 1, Cttp::BwdFirst,
                       kBreadth, kBreadth, test::oneF1BLimits(3)));
  Program program = toProgram(r.built.problem, r.result, r.built.numStages,
                              r.built.stageEdges, r.built.sharedStages);
  insertCommunication(program);
  REQUIRE(!verify(program));
  // Actor 0: its last 3 forwards' sends, each with the next gradient's
  // receive; actor 2: 4 gradient sends, each with the next activation's
  // receive; actor 1 mirrors both: 3 + 4 on each side.
  CHECK(checkMirroredPairs(program) == 14);
  ProgramGraph graph;
  REQUIRE(!buildGraph(program, ChannelRule::PerStage, graph));
  const std::vector<TransferPair> pairs = mirroredTransferPairs(program, graph);
  // Actor 0: fwd 2, send_act mb 2 -> 1, recv_grad mb 0 <- 1 (a blocking
  // receive, second); actor 1: bwd 0, send_grad mb 0 -> 0, recv_act mb 2.
  auto has = [&](int32_t actor, OpKind kind, int32_t mb) {
    for (const TransferPair &p : pairs)
      if (p.actor == actor && program.actors[actor][p.first].kind == kind &&
          program.actors[actor][p.first].mb == mb)
        return true;
    return false;
  };
  CHECK(has(0, OpKind::SendAct, 2));
  CHECK(has(1, OpKind::SendGrad, 0));
  CHECK(has(1, OpKind::SendAct, 1));
  CHECK(has(2, OpKind::SendGrad, 0));
  CHECK(!has(0, OpKind::SendAct, 0)); // warm-up: no receive follows
  // A receive that blocks first would wait before its send is posted: not
  // a pair, and neither then is its mirror.
  Program swapped = makeProgram(2, 2, 2, {{0, 1}});
  swapped.actors = {{{OpKind::Fwd, 0, 0},
                     {OpKind::SendAct, 0, 0, 1},
                     {OpKind::Fwd, 0, 1},
                     {OpKind::SendAct, 0, 1, 1},
                     {OpKind::RecvGrad, 0, 0, 1},
                     {OpKind::Bwd, 0, 0},
                     {OpKind::RecvGrad, 0, 1, 1},
                     {OpKind::Bwd, 0, 1}},
                    {{OpKind::RecvAct, 1, 0, 0},
                     {OpKind::Fwd, 1, 0},
                     {OpKind::Bwd, 1, 0},
                     {OpKind::RecvAct, 1, 1, 0},
                     {OpKind::SendGrad, 1, 0, 0},
                     {OpKind::Fwd, 1, 1},
                     {OpKind::Bwd, 1, 1},
                     {OpKind::SendGrad, 1, 1, 0}}};
  REQUIRE(!verify(swapped));
  CHECK(checkMirroredPairs(swapped) == 0);
  // Posted ahead (a token and a later wait), the same receive may go first.
  swapped.actors[1][3].token = 0;
  swapped.actors[1].insert(swapped.actors[1].begin() + 5,
                           ProgOp{OpKind::Wait, 0, 0, -1, 0});
  REQUIRE(!verify(swapped));
  CHECK(checkMirroredPairs(swapped) == 2);
}

TEST_CASE("the verifier finds deadlocks and mismatched channels",
          "[verifier][diagnostics]") {
  Program program = makeProgram(2, 2, 1, {{0, 1}});
  // Actor 1 waits for the activation before actor 0 has sent it, and actor 0
  // waits for the gradient first: a cycle.
  program.actors = {
      {{OpKind::Fwd, 0, 0},
       {OpKind::RecvGrad, 0, 0, 1},
       {OpKind::SendAct, 0, 0, 1},
       {OpKind::Bwd, 0, 0}},
      {{OpKind::RecvAct, 1, 0, 0},
       {OpKind::Fwd, 1, 0},
       {OpKind::Bwd, 1, 0},
       {OpKind::SendGrad, 1, 0, 0}},
  };
  std::optional<VerifyFailure> failure = verify(program);
  REQUIRE(failure);
  CHECK(failure->message ==
        "the programs deadlock: actors 0 1 wait for each other in a cycle");
  REQUIRE(failure->at.size() == 2);
  CHECK(failure->at[0].actor == 0);
  CHECK(failure->at[0].index == 1);

  // Two micro-batches received in the opposite order of their sends.
  program.numMicrobatches = 2;
  program.actors = {
      {{OpKind::Fwd, 0, 0},
       {OpKind::SendAct, 0, 0, 1},
       {OpKind::Fwd, 0, 1},
       {OpKind::SendAct, 0, 1, 1},
       {OpKind::RecvGrad, 0, 1, 1},
       {OpKind::Bwd, 0, 1},
       {OpKind::RecvGrad, 0, 0, 1},
       {OpKind::Bwd, 0, 0}},
      {{OpKind::RecvAct, 1, 1, 0},
       {OpKind::Fwd, 1, 1},
       {OpKind::Bwd, 1, 1},
       {OpKind::SendGrad, 1, 1, 0},
       {OpKind::RecvAct, 1, 0, 0},
       {OpKind::Fwd, 1, 0},
       {OpKind::Bwd, 1, 0},
       {OpKind::SendGrad, 1, 0, 0}},
  };
  failure = verify(program);
  REQUIRE(failure);
  CHECK(failure->message ==
        "recv_act stage 1 mb 1 from 0 on actor 1 would receive the message of "
        "send_act stage 0 mb 0 to 1 on actor 0: sends and receives between "
        "two actors must match one to one and in the same order");

  // A computation before its input arrives; in a program without any
  // transfer, the message says to insert them.
  program.numMicrobatches = 1;
  program.actors = {{{OpKind::Fwd, 0, 0}, {OpKind::Bwd, 0, 0}},
                    {{OpKind::Fwd, 1, 0}, {OpKind::Bwd, 1, 0}}};
  failure = verify(program);
  REQUIRE(failure);
  CHECK(failure->message ==
        "bwd stage 0 mb 0 on actor 0 runs before the gradient from stage 1 mb "
        "0 is computed or received here (the program has no sends or "
        "receives: insert communication first, -flexpipe-insert-comm); every "
        "dependency must be satisfied in program order");
  program.actors[0] = {{OpKind::Fwd, 0, 0}};
  failure = verify(program);
  REQUIRE(failure);
  CHECK(failure->message ==
        "stage 0 micro-batch 0 runs a forward but never completes its "
        "backward; every forward needs a bwd (or igrad and wgrad)");
}

TEST_CASE("the verifier checks each micro-batch's path through the stages",
          "[verify]") {
  // Two directions of one module (a bidirectional pipeline): stages 0 -> 1
  // and 2 -> 3, micro-batch 0 down, 1 up.
  Program program = makeProgram(2, 4, 2, {{0, 1}, {2, 3}});
  program.moduleNames = {"gpt"};
  program.stageMeta.assign(4, StageMeta{0, 1, false, false});
  program.actors = {{{OpKind::Fwd, 0, 0},
                     {OpKind::Fwd, 3, 1},
                     {OpKind::Bwd, 3, 1},
                     {OpKind::Bwd, 0, 0}},
                    {{OpKind::Fwd, 2, 1},
                     {OpKind::Fwd, 1, 0},
                     {OpKind::Bwd, 1, 0},
                     {OpKind::Bwd, 2, 1}}};
  CHECK_FALSE(verifyComputations(program));

  // Micro-batch 0 also going up counts its gradient twice.
  Program both = program;
  both.actors[1].insert(both.actors[1].begin(), {OpKind::Fwd, 2, 0});
  both.actors[0].insert(both.actors[0].begin() + 1, {OpKind::Fwd, 3, 0});
  both.actors[0].insert(both.actors[0].begin() + 2, {OpKind::Bwd, 3, 0});
  both.actors[1].push_back({OpKind::Bwd, 2, 0});
  std::optional<VerifyFailure> failure = verifyComputations(both);
  REQUIRE(failure);
  CHECK(failure->message ==
        "micro-batch 0 runs stage 0 and stage 2 of module 'gpt', which no "
        "stage edge connects (two directions of a bidirectional pipeline); a "
        "micro-batch takes one");
  REQUIRE(failure->at.size() == 2);
  CHECK(failure->at[0].actor == 1);
  CHECK(failure->at[1].actor == 0);

  // Two modules (two towers) are two parts a micro-batch takes both of.
  Program towers = program;
  towers.moduleNames = {"image", "text"};
  towers.stageMeta[2].module = towers.stageMeta[3].module = 1;
  towers.actors.assign(2, {});
  for (int32_t mb = 0; mb < 2; ++mb) {
    for (int32_t stage : {0, 3})
      towers.actors[0].insert(
          towers.actors[0].end(),
          {{OpKind::Fwd, stage, mb}, {OpKind::Bwd, stage, mb}});
    for (int32_t stage : {2, 1})
      towers.actors[1].insert(
          towers.actors[1].end(),
          {{OpKind::Fwd, stage, mb}, {OpKind::Bwd, stage, mb}});
  }
  CHECK_FALSE(verifyComputations(towers));
  // ... and must take: micro-batch 1 leaving out the text tower.
  Program oneTower = program;
  oneTower.moduleNames = {"image", "text"};
  oneTower.stageMeta[2].module = oneTower.stageMeta[3].module = 1;
  failure = verifyComputations(oneTower);
  REQUIRE(failure);
  CHECK(failure->message == "micro-batch 0 runs no stage of module 'text'; "
                            "every micro-batch runs each module");

  // Skipping a stage of the part it entered.
  Program skips = program;
  skips.actors[1] = {{OpKind::Fwd, 2, 1}, {OpKind::Bwd, 2, 1}};
  failure = verifyComputations(skips);
  REQUIRE(failure);
  CHECK(failure->message == "micro-batch 0 runs 1 of the 2 stages connected "
                            "to stage 0; it needs its forward and backward "
                            "on every one");

  // A backward without its forward is reported at the backward.
  Program backOnly = program;
  backOnly.actors[1].erase(backOnly.actors[1].begin() + 1);
  failure = verifyComputations(backOnly);
  REQUIRE(failure);
  CHECK(failure->message == "stage 1 micro-batch 0 completes a backward but "
                            "runs no forward; every backward needs its "
                            "forward");
  CHECK(failure->at[0].actor == 1);
  CHECK(failure->at[0].index == 1);

  // A shared stage: every member computes every micro-batch.
  Program shared = makeProgram(2, 1, 2);
  shared.sharedStages = {0};
  shared.actors = {{{OpKind::Fwd, 0, 0},
                    {OpKind::Fwd, 0, 1},
                    {OpKind::Bwd, 0, 0},
                    {OpKind::Bwd, 0, 1}},
                   {{OpKind::Fwd, 0, 0}, {OpKind::Bwd, 0, 0}}};
  failure = verifyComputations(shared);
  REQUIRE(failure);
  CHECK(failure->message ==
        "stage 0 micro-batch 1 runs its forward on actor 0 only, but the "
        "stage is shared by actors 0 and 1; every member computes its part "
        "for every micro-batch");
  shared.actors[1] = shared.actors[0];
  CHECK_FALSE(verifyComputations(shared));

  // The most stages and micro-batches a schedule may declare, few used:
  // memory by computations (stages x micro-batches cells were 2^40).
  Program sparse = makeProgram(1, 1 << 20, 1 << 20);
  sparse.actors.resize(1);
  for (int32_t mb = 0; mb < sparse.numMicrobatches; ++mb) {
    sparse.actors[0].push_back({OpKind::Fwd, mb % 2, mb});
    sparse.actors[0].push_back({OpKind::Bwd, mb % 2, mb});
  }
  CHECK_FALSE(verifyComputations(sparse)); // no edges: each stage alone
}

namespace {

/// A PyTorch order (compute cells only) as a compute program over a chain of
/// stages.
Program programOf(const Rows &rows, int32_t numMicrobatches) {
  static const std::regex cell("^([0-9]+)([FBIW])([0-9]+)$");
  Program program;
  program.numActors = static_cast<int32_t>(rows.size());
  program.numMicrobatches = numMicrobatches;
  program.actors.resize(rows.size());
  for (size_t a = 0; a < rows.size(); ++a)
    for (const std::string &text : rows[a]) {
      std::smatch m;
      REQUIRE(std::regex_match(text, m, cell));
      const OpKind kind = m[2] == "F"   ? OpKind::Fwd
                          : m[2] == "B" ? OpKind::Bwd
                          : m[2] == "I" ? OpKind::Igrad
                                        : OpKind::Wgrad;
      const int32_t stage = std::stoi(m[1]);
      program.numStages = std::max(program.numStages, stage + 1);
      program.actors[a].push_back({kind, stage, std::stoi(m[3])});
    }
  for (int32_t s = 0; s + 1 < program.numStages; ++s)
    program.edges.push_back({s, s + 1});
  return program;
}

struct Figures {
  double makespan;
  int64_t peak;
};

/// Makespan with free communication and per-rank costs F = 1, B = 2 (a rank
/// holding v stages spends 1/v of that on each), and peak in-flight.
/// The largest number of forwards not yet released by their backward (bwd,
/// or wgrad after a split) that any actor holds at once: peak activation
/// memory in stage-micro-batch units.
int64_t peakInflight(const Program &program) {
  int64_t peak = 0;
  for (const auto &ops : program.actors) {
    const bool split = llvm::any_of(
        ops, [](const ProgOp &op) { return op.kind == OpKind::Wgrad; });
    int64_t held = 0;
    for (const ProgOp &op : ops) {
      if (op.kind == OpKind::Fwd)
        peak = std::max(peak, ++held);
      else if (op.kind == (split ? OpKind::Wgrad : OpKind::Bwd))
        --held;
    }
  }
  return peak;
}

Figures figures(Program program) {
  const double v =
      static_cast<double>(program.numStages) / program.numActors;
  insertCommunication(program);
  REQUIRE(!verify(program));
  Simulator simulator;
  REQUIRE(llvm::toString(simulator.prepare(program)) == "");
  SimCosts costs = unitCosts(program);
  for (auto &d : costs.duration)
    d = {1 / v, 2 / v, 1 / v, 1 / v};
  SimResult r = simulator.run(costs);
  return {r.iterationTime, peakInflight(program)};
}

} // namespace

TEST_CASE("where the order differs from PyTorch's it is no worse",
          "[scheduler][reference]") {
  struct Case {
    const char *file;
    PipelineSpec spec;
    TimeModel model;
    double referenceMakespan; // from the reference README
  };
  std::vector<Case> cases = {
      {"pp4_mb8_1F1B.csv",
       makeSpec(4, 8, PlacementKind::OneToOne, 1, Cttp::BwdFirst, kBreadth,
                kBreadth, {4, 3, 2, 1}),
       TimeModel::Step, 33},
      {"pp4_mb8_GPipe.csv",
       makeSpec(4, 8, PlacementKind::OneToOne, 1, Cttp::FwdFirst, kBreadth,
                kBreadth),
       TimeModel::Step, 33},
      {"pp4_mb8_Interleaved1F1B_v2.csv",
       makeSpec(4, 8, PlacementKind::Circular, 2, Cttp::Interleaved,
                {StageOrder::BreadthFirst, 4}, {StageOrder::DepthFirst, 4},
                {11, 9, 7, 5}),
       TimeModel::Step, 28.5},
      {"pp4_mb8_LoopedBFS_v2.csv",
       makeSpec(4, 8, PlacementKind::Circular, 2, Cttp::FwdFirst, kBreadth,
                kDepth),
       TimeModel::Step, 28.5},
  };
  for (const Case &c : cases) {
    INFO(c.file);
    Run r = run(c.spec, c.model);
    Figures ours = figures(toProgram(r.built.problem, r.result,
                                     r.built.numStages, r.built.stageEdges,
                                     r.built.sharedStages));
    Figures theirs = figures(programOf(readReference(c.file), 8));
    INFO(c.file << ": makespan ours " << ours.makespan << " vs "
                << theirs.makespan << ", peak in-flight ours " << ours.peak
                << " vs " << theirs.peak);
    CHECK(theirs.makespan == Approx(c.referenceMakespan));
    CHECK(ours.makespan <= theirs.makespan + 1e-9);
    CHECK(ours.peak <= theirs.peak);
  }
}

TEST_CASE("module inputs that two transfers between one actor pair would "
          "serve are refused at the module",
          "[spec]") {
  // Modules on the given actors; the last takes the others' outputs when
  // `join`, else every module after the first takes the first's.
  auto spec = [](std::vector<std::vector<int64_t>> actors, bool join) {
    PipelineSpec s;
    s.actors = 0;
    s.microbatches = 3;
    for (size_t m = 0; m < actors.size(); ++m) {
      ModuleSpec module;
      module.name = "m" + std::to_string(m);
      module.placement.kind = PlacementKind::OneToOne;
      module.placement.chunks = 1;
      module.placement.actors = actors[m];
      module.layers = static_cast<int64_t>(actors[m].size());
      for (int64_t a : actors[m])
        s.actors = std::max<int32_t>(s.actors, static_cast<int32_t>(a) + 1);
      s.modules.push_back(module);
    }
    for (size_t m = 1; m < actors.size(); ++m)
      if (!join)
        s.modules[m].inputs = {0};
    if (join)
      for (size_t m = 0; m + 1 < actors.size(); ++m)
        s.modules.back().inputs.push_back(static_cast<int32_t>(m));
    PrioritySpec priority;
    priority.cttp = Cttp::FwdFirst;
    s.priorities.push_back(priority);
    return s;
  };
  // Where the error is, or -1 when the spec is accepted.
  auto refusedAt = [](const PipelineSpec &s) {
    int32_t module = -1;
    llvm::Expected<BuiltProblem> built = buildProblem(s);
    if (!built)
      llvm::handleAllErrors(built.takeError(), [&](const StatementError &e) {
        CHECK(e.site == StatementError::Site::Module);
        module = e.index;
      });
    return module;
  };
  // Joins: inputs ending on one other actor clash; on different actors, or
  // on the joining module's own, they do not.
  CHECK(refusedAt(spec({{0}, {0}, {1}}, true)) == 2);
  CHECK(refusedAt(spec({{0, 1}, {2, 1}, {3}}, true)) == 2);
  CHECK(refusedAt(spec({{0}, {1}, {2}}, true)) == -1);
  CHECK(refusedAt(spec({{0}, {1}, {1}}, true)) == -1);
  CHECK(refusedAt(spec({{0}, {0}, {0}}, true)) == -1);
  // Fan-out: two modules starting on one other actor clash (at the second
  // that takes the input); on different actors, or the input's, they do not.
  CHECK(refusedAt(spec({{0}, {1}, {1}}, false)) == 2);
  CHECK(refusedAt(spec({{0, 1}, {2}, {3, 4}, {2}}, false)) == 3);
  CHECK(refusedAt(spec({{0}, {1}, {2}}, false)) == -1);
  CHECK(refusedAt(spec({{0}, {0}, {1}}, false)) == -1);
}
