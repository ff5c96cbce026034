//===- GradientSeparationTest.cpp - Stash-and-insert unit tests -----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/GradientSeparation.h"
#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Simulator.h"
#include "flexpipe/Scheduling/TorchFormat.h"

#include "TestSpecs.h"

#include "llvm/Support/ThreadPool.h"

#include <catch2/catch.hpp>

#include <array>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

using namespace flexpipe::sched;
using flexpipe::sched::test::computeProgram;
using flexpipe::sched::test::kBreadth;
using flexpipe::sched::test::kDepth;
using flexpipe::sched::test::makeSpec;
using flexpipe::sched::test::oneF1BLimits;
using flexpipe::sched::test::valueOf;

namespace {

/// Per actor, the computations as PyTorch cells (0F1, 3W0, ...).
std::vector<std::vector<std::string>> cells(const Program &p) {
  std::vector<std::vector<std::string>> out;
  for (const auto &ops : p.actors) {
    out.emplace_back();
    for (const ProgOp &op : ops)
      if (isCompute(op.kind))
        out.back().push_back(std::to_string(op.stage) + opLetter(op.kind) +
                             std::to_string(op.mb));
  }
  return out;
}

Program readReference(const std::string &name) {
  std::ifstream in(std::string(FLEXPIPE_TEST_DATA_DIR) +
                   "/peer-orders/pp4_mb8_" + name + ".csv");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  Program p;
  REQUIRE(llvm::toString(parseTorchCsv(text.str(), p)).empty());
  return p;
}

struct Figures {
  double time, peak;
};

/// Iteration time and largest peak activation memory with layerCosts.
Figures simulateUnits(Program program) {
  insertCommunication(program);
  Simulator sim;
  REQUIRE(llvm::toString(sim.prepare(program)) == "");
  SimResult r = sim.run(layerCosts(program));
  return {r.iterationTime, *std::max_element(r.peakActivation.begin(),
                                             r.peakActivation.end())};
}

} // namespace

TEST_CASE("the reference orders' figures match their README",
          "[separation]") {
  const std::vector<std::pair<const char *, Figures>> expected = {
      {"1F1B", {33, 4}},
      {"GPipe", {33, 8}},
      {"Interleaved1F1B_v2", {28.5, 5.5}},
      {"LoopedBFS_v2", {28.5, 8}},
      {"ZB1P_v1", {27, 4}},
      {"InterleavedZeroBubble_v2", {25.5, 4}},
      {"ZBV_v2", {25.5, 4}},
      {"zbrepo_ZB1", {27, 4}},
      {"zbrepo_ZBV", {25.5, 4}}};
  for (const auto &[name, figures] : expected) {
    INFO(name);
    Figures f = simulateUnits(readReference(name));
    CHECK(f.time == Approx(figures.time));
    CHECK(f.peak == Approx(figures.peak));
  }
}

TEST_CASE("1F1B with gradient separation is ZB-H1", "[separation]") {
  Program program = computeProgram(
      makeSpec(4, 8, PlacementKind::OneToOne, 1, Cttp::BwdFirst, kBreadth,
               kBreadth, oneF1BLimits(4)),
      TimeModel::Cost);
  REQUIRE(splitBackward(program) == 32);
  SeparationResult r =
      valueOf(separateGradients(program, layerCosts(program), {}));
  CHECK(r.fusedTime == Approx(30));
  CHECK(r.time == Approx(27));
  CHECK(r.peak == Approx(4));
  CHECK(r.memoryBound == Approx(4));
  CHECK(cells(r.program) == cells(readReference("ZB1P_v1")));
  CHECK(simulateUnits(r.program).time == Approx(27));
}

TEST_CASE("V-shape with gradient separation matches ZB-V's time and memory",
          "[separation]") {
  Program program = computeProgram(
      makeSpec(4, 8, PlacementKind::VShape, 2, Cttp::FwdFirst, kDepth,
               kBreadth, {8, 8, 8, 8}),
      TimeModel::Cost);
  splitBackward(program);
  SeparationResult r =
      valueOf(separateGradients(program, layerCosts(program), {}));
  CHECK(r.time == Approx(25.5));
  CHECK(r.peak == Approx(4));
  Figures f = simulateUnits(r.program);
  CHECK(f.time == Approx(25.5));
  CHECK(f.peak == Approx(4));
}

TEST_CASE("a memory bound below the fused schedule's peak is diagnosed",
          "[separation]") {
  Program program = computeProgram(makeSpec(
      4, 8, PlacementKind::OneToOne, 1, Cttp::BwdFirst, kBreadth, kBreadth,
      oneF1BLimits(4)));
  splitBackward(program);
  SeparationOptions options;
  options.memoryBound = 3;
  CHECK(llvm::toString(separateGradients(program, layerCosts(program), options)
                           .takeError()) ==
        "the memory bound 3 is below the 4 that actor 0 needs even with "
        "every weight gradient right after its input gradient");
  // A larger bound than needed is allowed and may be used.
  options.memoryBound = 6;
  SeparationResult r =
      valueOf(separateGradients(program, layerCosts(program), options));
  CHECK(r.peak <= 6);
  CHECK(r.time <= 27);
}

TEST_CASE("gradient separation keeps its promises on random configurations",
          "[separation]") {
  std::mt19937 rng(20261121);
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int32_t pp = pick(2, 5), m = pick(1, 10);
    const PlacementKind kind =
        std::array<PlacementKind, 3>{PlacementKind::OneToOne,
                                     PlacementKind::Circular,
                                     PlacementKind::VShape}[pick(0, 2)];
    const int64_t chunks = kind == PlacementKind::OneToOne ? 1 : pick(2, 3);
    const Cttp cttp = static_cast<Cttp>(pick(0, 2));
    const StagePriority fwd{static_cast<StageOrder>(pick(0, 1)), pick(0, 2)};
    const StagePriority bwd{static_cast<StageOrder>(pick(0, 1)), pick(0, 2)};
    std::vector<int64_t> limits;
    if (pick(0, 1))
      for (int32_t a = 0; a < pp; ++a)
        limits.push_back(pick(1, 2 * pp * static_cast<int>(chunks)));
    const bool bidirectional = pick(0, 3) == 0 && m >= 2;
    PipelineSpec spec = makeSpec(pp, m, kind, chunks, cttp, fwd, bwd, limits,
                                 bidirectional);
    llvm::Expected<BuiltProblem> built = buildProblem(spec);
    if (!built) {
      llvm::consumeError(built.takeError());
      continue;
    }
    const TimeModel model = pick(0, 1) ? TimeModel::Step : TimeModel::Cost;
    ScheduleResult result = schedule(built->problem, model);
    if (!result.ok)
      continue; // an unsatisfiable configuration; not ours to test
    Program program = toProgram(built->problem, result, built->numStages,
                                built->stageEdges, built->sharedStages);
    splitBackward(program);
    SimCosts costs = model == TimeModel::Step ? unitCosts(program)
                                              : layerCosts(program);
    // Actors whose static memory differs: the one with less may hold more
    // activations, never past the fused schedule's peak.
    if (pick(0, 1))
      for (double &bytes : costs.staticBytes)
        bytes = pick(0, 6);
    INFO("trial " << trial);
    SeparationResult r = valueOf(separateGradients(program, costs, {}));
    ++checked;
    // Resuming attempts from checkpoints, and not running repeated
    // attempts, change nothing.
    SeparationOptions fromStart;
    fromStart.resume = false;
    fromStart.shortcuts = false;
    const SeparationResult full =
        valueOf(separateGradients(program, costs, fromStart));
    CHECK(full.rounds == r.rounds);
    CHECK(full.time == r.time);
    CHECK(full.strategy == r.strategy);
    auto order = [](const Program &prog) {
      std::vector<std::tuple<int32_t, OpKind, int32_t, int32_t>> ops;
      for (int32_t a = 0; a < prog.numActors; ++a)
        for (const ProgOp &op : prog.actors[a])
          ops.emplace_back(a, op.kind, op.stage, op.mb);
      return ops;
    };
    CHECK(order(full.program) == order(r.program));
    CHECK(r.time <= r.fusedTime + 1e-9);
    CHECK(r.peak <= r.memoryBound + 1e-9);
    // Every W after its I, on the same actor; nothing lost or added.
    for (int32_t a = 0; a < program.numActors; ++a) {
      std::set<std::pair<int32_t, int32_t>> inputs;
      size_t computations = 0;
      for (const ProgOp &op : r.program.actors[a]) {
        computations += isCompute(op.kind);
        if (op.kind == OpKind::Igrad)
          inputs.insert({op.stage, op.mb});
        if (op.kind == OpKind::Wgrad)
          CHECK(inputs.count({op.stage, op.mb}) == 1);
      }
      CHECK(computations == program.actors[a].size());
    }
    // It communicates without deadlock, and the simulator agrees.
    Program withComm = r.program;
    insertCommunication(withComm);
    std::optional<VerifyFailure> failure = verify(withComm);
    CHECK_FALSE(failure.has_value());
    Simulator sim;
    REQUIRE(llvm::toString(sim.prepare(withComm)) == "");
    SimResult simulated = sim.run(costs);
    CHECK(simulated.iterationTime == Approx(r.time));
    CHECK(*std::max_element(simulated.peakActivation.begin(),
                            simulated.peakActivation.end()) <=
          r.memoryBound + 1e-9);
    // The schedule's peak (static plus activations, the largest over
    // actors) is the fused program's or lower.
    Program fusedComm = program;
    insertCommunication(fusedComm);
    Simulator fusedSim;
    REQUIRE(llvm::toString(fusedSim.prepare(fusedComm)) == "");
    const SimResult fused = fusedSim.run(costs);
    CHECK(*std::max_element(simulated.totalBytes.begin(),
                            simulated.totalBytes.end()) <=
          *std::max_element(fused.totalBytes.begin(), fused.totalBytes.end()) +
              1e-9);
  }
  CHECK(checked > 150);
}

TEST_CASE("attempts run on a thread pool give the result of one at a time",
          "[separation]") {
  // Programs of at least 2048 items (below that, attempts stay on the
  // caller's thread): V-shape and 1F1B with uneven stage costs, an odd
  // micro-batch count and pp not a power of two.
  llvm::StdThreadPool pool(llvm::hardware_concurrency(2));
  struct Config {
    int32_t pp, m;
    PlacementKind kind;
    int64_t chunks;
    Cttp cttp;
  };
  for (const Config &c :
       {Config{6, 65, PlacementKind::VShape, 2, Cttp::FwdFirst},
        Config{5, 151, PlacementKind::OneToOne, 1, Cttp::BwdFirst}}) {
    std::vector<int64_t> limits;
    for (int32_t a = 0; a < c.pp; ++a)
      limits.push_back(c.kind == PlacementKind::VShape ? 2 * c.pp : c.pp - a);
    const bool vshape = c.kind == PlacementKind::VShape;
    Program program =
        computeProgram(makeSpec(c.pp, c.m, c.kind, c.chunks, c.cttp,
                                vshape ? kDepth : kBreadth, kBreadth, limits),
                       TimeModel::Cost);
    splitBackward(program);
    SimCosts costs = layerCosts(program);
    for (size_t s = 0; s < costs.duration.size(); ++s)
      for (double &d : costs.duration[s])
        d *= 1.0 + 0.37 * static_cast<double>(s % 3); // uneven stages
    // Rounds end before the limit (all searches together): every attempt
    // made is counted.
    SeparationOptions one;
    one.maxRounds = 10000;
    SeparationOptions parallel = one;
    parallel.pool = &pool;
    INFO("pp " << c.pp << " m " << c.m);
    const SeparationResult a = valueOf(separateGradients(program, costs, one));
    const SeparationResult b =
        valueOf(separateGradients(program, costs, parallel));
    CHECK(a.rounds > 1);
    CHECK(a.rounds < one.maxRounds);
    CHECK(b.rounds == a.rounds);
    CHECK(b.time == a.time);
    CHECK(b.strategy == a.strategy);
    CHECK(b.stashed == a.stashed);
    for (int32_t actor = 0; actor < program.numActors; ++actor) {
      REQUIRE(b.program.actors[actor].size() == a.program.actors[actor].size());
      for (size_t i = 0; i < a.program.actors[actor].size(); ++i) {
        const ProgOp &x = a.program.actors[actor][i],
                     &y = b.program.actors[actor][i];
        CHECK((x.kind == y.kind && x.stage == y.stage && x.mb == y.mb));
      }
    }
  }
}

TEST_CASE("tiny durations and slow messages: no false deadlock, the simulator "
          "agrees",
          "[separation]") {
  // Microsecond-scale costs where a message takes 100 computations: actors
  // wait at many distinct instants, some a rounding error apart.
  Program program = computeProgram(
      makeSpec(4, 8, PlacementKind::VShape, 2, Cttp::FwdFirst, kDepth,
               kBreadth, {8, 8, 8, 8}),
      TimeModel::Cost);
  splitBackward(program);
  SimCosts costs = layerCosts(program);
  for (auto &d : costs.duration)
    for (double &x : d)
      x *= 1.7e-8;
  costs.latency.assign(16, 1.3e-6);
  costs.bandwidth.assign(16, 0);
  SeparationResult r = valueOf(separateGradients(program, costs, {}));
  CHECK(r.time <= r.fusedTime);
  Program withComm = r.program;
  insertCommunication(withComm);
  Simulator sim;
  REQUIRE(llvm::toString(sim.prepare(withComm)) == "");
  CHECK(sim.run(costs).iterationTime == Approx(r.time).epsilon(1e-9));
}
