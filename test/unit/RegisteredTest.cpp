//===- RegisteredTest.cpp - Registered instructions and scheduler hooks ---===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/Scheduler.h"
#include "flexpipe/Scheduling/Simulator.h"

#include <catch2/catch.hpp>

#include <string>

using namespace flexpipe::sched;

namespace {

/// Two one-stage towers: part 0 on actor 0, part 1 on actor 1, `mbs`
/// micro-batches, unit costs, and a registered instruction on both actors
/// after both forwards and before both backwards.
Problem twoTowers(int32_t mbs, InstMode mode, double duration) {
  Problem p;
  p.numActors = 2;
  p.numMicrobatches = mbs;
  for (int32_t a = 0; a < 2; ++a) {
    StagePart part;
    part.stage = a;
    part.actor = a;
    part.mbEnd = mbs;
    part.cost[0] = a == 0 ? 1 : 3; // tower 1 is slower
    part.cost[1] = a == 0 ? 2 : 6;
    p.parts.push_back(part);
  }
  p.policies.assign(2, ActorPolicy{});
  p.actorLimits.assign(2, kNoLimit);
  Registered sync;
  sync.name = "sync";
  sync.stage = 2;
  sync.actors = {0, 1};
  sync.mode = mode;
  sync.runtime =
      mode == InstMode::Local ? InstRuntime::Exec : InstRuntime::AllGather;
  sync.duration = duration;
  sync.after = {{CompKind::Fwd, 0}, {CompKind::Fwd, 1}};
  sync.before = {{CompKind::Bwd, 0}, {CompKind::Bwd, 1}};
  p.registered.push_back(sync);
  return p;
}

/// Actor `a`'s items as "F0 S0 B0 ..." (S for a registered instance).
std::string order(const ScheduleResult &r, int32_t a) {
  std::string out;
  for (const ScheduledItem &item : r.actors[a]) {
    if (!out.empty())
      out += ' ';
    out += item.isRegistered() ? "S" : compKindName(item.kind);
    out += std::to_string(item.mb);
  }
  return out;
}

const ScheduledItem &find(const ScheduleResult &r, int32_t a, bool registered,
                          CompKind kind, int32_t mb) {
  for (const ScheduledItem &item : r.actors[a])
    if (item.isRegistered() == registered && item.mb == mb &&
        (registered || item.kind == kind))
      return item;
  FAIL("item not found");
  return r.actors[a].front();
}

} // namespace

TEST_CASE("a blocking collective starts when the slower member arrives",
          "[scheduler][registered]") {
  const Problem p = twoTowers(2, InstMode::Collective, 0.5);
  const ScheduleResult r = schedule(p, TimeModel::Cost);
  REQUIRE(r.ok);
  // Actor 0 finishes its forward at 1 but the sync waits for actor 1's at 3;
  // actor 0 does its second forward first, then joins.
  CHECK(order(r, 0) == "fwd0 fwd1 S0 bwd0 S1 bwd1");
  const ScheduledItem &s0 = find(r, 0, true, CompKind::Fwd, 0);
  const ScheduledItem &s1 = find(r, 1, true, CompKind::Fwd, 0);
  CHECK(s0.start == Approx(3));
  CHECK(s1.start == Approx(3));
  CHECK(find(r, 0, false, CompKind::Bwd, 0).start >= s0.end);

  Program program = toProgram(p, r, 3, {}, {});
  REQUIRE(program.groups.size() == 1);
  CHECK(program.actors[0][2].kind == OpKind::AllGather);
  CHECK(program.actors[0][2].stage == 2);
  CHECK_FALSE(verify(program).has_value());
}

TEST_CASE("an asynchronous collective is posted and waited for",
          "[scheduler][registered]") {
  const Problem p = twoTowers(2, InstMode::Async, 0.5);
  const ScheduleResult r = schedule(p, TimeModel::Cost);
  REQUIRE(r.ok);
  // Posting takes no time: the post of actor 0 lies at the end of its
  // forward, and its backward waits until 0.5 after actor 1's post (3).
  const ScheduledItem &post = find(r, 0, true, CompKind::Fwd, 0);
  CHECK(post.start == post.end);
  CHECK(find(r, 0, false, CompKind::Bwd, 0).start == Approx(3.5));

  // The program: a token on the post, a wait right before the backward.
  Program program = toProgram(p, r, 3, {}, {});
  const std::vector<ProgOp> &ops = program.actors[0];
  size_t post0 = 0;
  while (ops[post0].kind != OpKind::AllGather)
    ++post0;
  REQUIRE(ops[post0].token >= 0);
  size_t wait = post0;
  while (ops[wait].kind != OpKind::Wait)
    ++wait;
  CHECK(ops[wait].token == ops[post0].token);
  CHECK(ops[wait + 1].kind == OpKind::Bwd);
  CHECK(ops[wait + 1].mb == 0);
  CHECK_FALSE(verify(program).has_value());

  // The simulator ends the wait 0.5 after the last post, as the scheduler.
  Simulator sim;
  REQUIRE(llvm::toString(sim.prepare(program)) == "");
  SimCosts costs;
  costs.duration = {{1, 2, 1, 1}, {3, 6, 3, 3}, {0, 0, 0, 0}};
  costs.activationBytes.assign(3, 0);
  costs.staticBytes.assign(3, 0);
  costs.messageBytes.assign(3, 0);
  costs.collectiveDuration = {0, 0, 0.5};
  costs.latency.assign(4, 0);
  costs.bandwidth.assign(4, 0);
  const SimResult sr = sim.run(costs);
  CHECK(sr.iterationTime == Approx(r.makespan));
}

TEST_CASE("prev and next group micro-batches into one instance",
          "[scheduler][registered]") {
  Problem p = twoTowers(4, InstMode::Collective, 0);
  p.registered[0].prev = 2;
  p.registered[0].next = 2;
  const ScheduleResult r = schedule(p, TimeModel::Step);
  REQUIRE(r.ok);
  // Two instances (covering micro-batches 0-1 and 2-3); both forwards of a
  // group before it, both backwards after it.
  CHECK(order(r, 0) == "fwd0 fwd1 S0 bwd0 bwd1 fwd2 fwd3 S2 bwd2 bwd3");

  // next larger than prev asks for instances that do not exist.
  p.registered[0].next = 1;
  CHECK(llvm::toString(validate(p))
            .find("has 2 instances (prev 2), but next 1 makes "
                  "micro-batch 3 of stage 0 wait for instance 3") !=
        std::string::npos);
}

TEST_CASE("a scheduling unit waits for that many ready instances",
          "[scheduler][registered]") {
  Problem p = twoTowers(4, InstMode::Local, 0);
  p.registered[0].unit = 2;
  const ScheduleResult r = schedule(p, TimeModel::Step);
  REQUIRE(r.ok);
  // Local: each actor runs its own instances, two at a time.
  CHECK(order(r, 0).find("S0 S1") != std::string::npos);
  CHECK(order(r, 1).find("S0 S1") != std::string::npos);
}

TEST_CASE("a registered instruction without sources is ready at once",
          "[scheduler][registered]") {
  Problem p = twoTowers(2, InstMode::Local, 0);
  p.registered[0].after.clear();
  const ScheduleResult r = schedule(p, TimeModel::Step);
  REQUIRE(r.ok);
  CHECK(order(r, 0).rfind("S0 S1", 0) == 0);
}

TEST_CASE("check functions veto items and custom priorities pick them",
          "[scheduler][hooks]") {
  Problem p = twoTowers(3, InstMode::Local, 0);
  p.registered.clear();
  // GPipe on actor 0 (all forwards first), and a check: no forward of
  // micro-batch 2 before the actor has run three items.
  p.policies[0].cttp = Cttp::FwdFirst;
  CHECK(order(schedule(p, TimeModel::Step), 0) ==
        "fwd0 fwd1 fwd2 bwd0 bwd1 bwd2");
  p.checks.push_back([](const StepView &view, const ReadyItem &item) {
    return !(item.kind == CompKind::Fwd && item.mb == 2 && view.scheduled < 3);
  });
  ScheduleResult r = schedule(p, TimeModel::Step);
  REQUIRE(r.ok);
  CHECK(order(r, 0) == "fwd0 fwd1 bwd0 fwd2 bwd1 bwd2");

  // A priority on actor 1 that always takes the last candidate (the newest
  // backward before any forward).
  p.checks.clear();
  p.customPriorities.assign(2, PriorityFunction());
  p.customPriorities[1] = [](const StepView &,
                             const std::vector<ReadyItem> &ready) {
    return static_cast<int>(ready.size()) - 1;
  };
  r = schedule(p, TimeModel::Step);
  REQUIRE(r.ok);
  CHECK(order(r, 1) == "fwd0 bwd0 fwd1 bwd1 fwd2 bwd2");

  // A priority that returns an index out of range is reported.
  p.customPriorities[1] = [](const StepView &, const std::vector<ReadyItem> &) {
    return 7;
  };
  r = schedule(p, TimeModel::Step);
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("picked candidate 7 of") != std::string::npos);
  // So is a negative one other than -1 (it used to mean "stay idle").
  p.customPriorities[1] = [](const StepView &, const std::vector<ReadyItem> &) {
    return -2;
  };
  r = schedule(p, TimeModel::Step);
  CHECK_FALSE(r.ok);
  CHECK(r.error.find("picked candidate -2 of") != std::string::npos);
}

TEST_CASE("a schedule that hooks stop is explained by the hook",
          "[scheduler][hooks]") {
  Problem p = twoTowers(3, InstMode::Local, 0);
  p.registered.clear();
  // A check that refuses everything: each actor's first forward is ready,
  // and the note says the check holds it (it blamed the stage traversal
  // interval).
  p.checks.push_back([](const StepView &, const ReadyItem &) { return false; });
  ScheduleResult r = schedule(p, TimeModel::Step);
  REQUIRE_FALSE(r.ok);
  REQUIRE_FALSE(r.waits.empty());
  CHECK_THAT(r.waits[0], Catch::EndsWith("is ready, but a plugin check "
                                         "function refuses it"));
  // The explanation asks the checks again: they view the actors' programs
  // as scheduled when the run stopped (the result dropped them first, and
  // the checks read freed memory). This one lets each actor run its first
  // micro-batch and refuses the rest; asked while explaining, it sees two
  // computations on each actor.
  p.checks.clear();
  std::vector<int64_t> seen;
  p.checks.push_back([&](const StepView &view, const ReadyItem &item) {
    seen.push_back(view.scheduled);
    return item.mb == 0;
  });
  r = schedule(p, TimeModel::Step);
  REQUIRE_FALSE(r.ok);
  REQUIRE_FALSE(seen.empty());
  CHECK(seen.back() == 2);
  CHECK(r.actors.empty());
  // A priority that always stays idle.
  p.checks.clear();
  p.customPriorities.assign(
      2, [](const StepView &, const std::vector<ReadyItem> &) { return -1; });
  r = schedule(p, TimeModel::Step);
  REQUIRE_FALSE(r.ok);
  REQUIRE_FALSE(r.waits.empty());
  CHECK_THAT(r.waits[0], Catch::EndsWith("is ready, but the actor's plugin "
                                         "priority chooses to stay idle"));
}
