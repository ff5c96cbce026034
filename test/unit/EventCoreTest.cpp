//===- EventCoreTest.cpp - The shared event core's tie rule and time ------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/EventCore.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace flexpipe::sched;

TEST_CASE("the event core's tie rule: lower actors first, sweeps until none "
          "acts, then the settled ones",
          "[simulator][eventcore]") {
  // Actor 0 needs what actor 2 makes at time 0; actor 1 only fills a bubble
  // once everybody else has acted at that time.
  EventCore core(3, SimCosts());
  bool made = false, consumed = false, filled = false;
  std::vector<std::string> log;
  auto step = [&](int32_t a, bool settled) {
    const std::string at = "@" + std::to_string(core.now());
    if (a == 0 && !consumed && made) {
      consumed = true;
      log.push_back("0 consumes" + at);
      core.compute(0, 0, 2.0, core.now());
      return true;
    }
    if (a == 1 && !filled) {
      if (!settled) {
        core.askWhenSettled(1);
        return false;
      }
      filled = true;
      log.push_back("1 fills (made " + std::to_string(made) + ")" + at);
      core.compute(1, 1, 1.0, core.now());
      return true;
    }
    if (a == 2 && !made) {
      made = true;
      log.push_back("2 makes" + at);
      core.touch(0); // actor 0 waits for it
      core.compute(2, 2, 3.0, core.now());
      return true;
    }
    return false;
  };
  std::vector<std::pair<int32_t, double>> ends;
  const double last = core.run(step, [&](int32_t, int32_t id) {
    ends.push_back({id, core.now()});
  });
  CHECK(log == std::vector<std::string>{"2 makes@0.000000",
                                        "0 consumes@0.000000",
                                        "1 fills (made 1)@0.000000"});
  // Exact ends, in time order (ties by id).
  CHECK(ends ==
        std::vector<std::pair<int32_t, double>>{{1, 1.0}, {0, 2.0}, {2, 3.0}});
  CHECK(last == 3.0);
}

TEST_CASE("equal durations end at exactly the same time",
          "[simulator][eventcore]") {
  EventCore core(2, SimCosts());
  const double d = 0.1 + 0.2; // not exact in binary
  int started = 0;
  std::vector<double> ends;
  core.run(
      [&](int32_t a, bool) {
        if (started > 3 || core.now() != (started / 2) * d)
          return false;
        ++started;
        core.compute(a, started, d, core.now());
        return false;
      },
      [&](int32_t a, int32_t) {
        ends.push_back(core.now());
        core.touch(a);
      });
  REQUIRE(ends.size() == 4);
  CHECK(ends[0] == ends[1]);
  CHECK(ends[2] == ends[3]);
}

TEST_CASE("computations that end at one time are reported by ascending id",
          "[simulator][eventcore]") {
  // Started in a scrambled order, with negative ids too (the scheduler's
  // registered instances come before its computations).
  EventCore core(4);
  const std::vector<int32_t> ids = {7, -2, 3, 12, -5, 0, 9, 4};
  bool posted = false;
  std::vector<int32_t> reported;
  core.run(
      [&](int32_t a, bool) {
        if (posted)
          return false;
        posted = true;
        for (size_t i = 0; i < ids.size(); ++i)
          core.compute(static_cast<int32_t>(i % 4), ids[i], i < 4 ? 1.0 : 2.0,
                       core.now());
        return false;
      },
      [&](int32_t, int32_t id) { reported.push_back(id); });
  CHECK(reported == std::vector<int32_t>{-2, 3, 7, 12, -5, 0, 4, 9});
}

TEST_CASE("computations in a core group share its cores",
          "[simulator][eventcore]") {
  // Actors 0 and 1 share one core, actor 2 has its own: two units of work
  // at once on the shared core take 2 each, the lone one 1; one started
  // later runs alone at full speed once the other has ended.
  SimCosts costs;
  costs.coreGroup = {0, 0, -1};
  costs.groupCores = {1.0};
  EventCore core(3, costs);
  CHECK(core.maxRate() == 1.0);
  bool started = false;
  std::vector<std::pair<int32_t, double>> ends;
  core.run(
      [&](int32_t a, bool) {
        if (started)
          return false;
        if (a == 2) {
          started = true;
          core.compute(0, 0, 1.0, 0.0);
          core.compute(1, 1, 1.0, 0.0);
          core.compute(2, 2, 1.0, 0.0);
          core.compute(0, 3, 1.0, 5.0); // a delayed start
        }
        return false;
      },
      [&](int32_t, int32_t id) {
        ends.push_back({id, core.now()});
      });
  REQUIRE(ends.size() == 4);
  CHECK(ends[0] == std::pair<int32_t, double>{2, 1.0});
  CHECK(ends[1].second == Approx(2.0));
  CHECK(ends[2].second == Approx(2.0));
  CHECK(ends[3] == std::pair<int32_t, double>{3, 6.0});
  // A slowdown below 1 (a speed-up) is the only way past a whole core.
  costs.groupSlowdown = {{{1.0, 0.5}}};
  CHECK(EventCore(3, costs).maxRate() == 2.0);
}

/// Computation i of actor actors[i] (of `numActors`), one unit of work of
/// shape shapes[i] (0 where not given) from starts[i]: the times they end.
static std::vector<double> endTimes(const SimCosts &c, int32_t numActors,
                                    const std::vector<int32_t> &actors,
                                    const std::vector<double> &starts,
                                    const std::vector<int32_t> &shapes = {}) {
  EventCore core(numActors, c);
  std::vector<double> at(actors.size());
  bool started = false;
  core.run(
      [&](int32_t a, bool) {
        if (started || a != 0)
          return false;
        started = true;
        for (size_t i = 0; i < actors.size(); ++i)
          core.compute(actors[i], static_cast<int32_t>(i), 1.0, starts[i],
                       false, i < shapes.size() ? shapes[i] : 0);
        return false;
      },
      [&](int32_t, int32_t id) { at[id] = core.now(); });
  return at;
}

TEST_CASE("groups on one node slow each other by the node's computations",
          "[simulator][eventcore]") {
  // Two one-core groups on one node (actors 0 and 1 on one core, 2 on the
  // other), slowed 1.5x while 2 computations run on the node and 2x while
  // 3 do. Actor 0 alone first: full speed. Then actors 0 and 2 at once
  // (one per core): 1.5x each. A group of its own node (no groupNode)
  // counts only its own computations.
  SimCosts costs;
  costs.coreGroup = {0, 0, 1};
  costs.groupCores = {1.0, 1.0};
  costs.groupNode = {0, 0};
  costs.groupSlowdown = {{{1, 1, 1.5, 2}}, {{1, 1, 1.5, 2}}};
  auto ends = [](const SimCosts &c, std::vector<int32_t> actors,
                 std::vector<double> starts) {
    return endTimes(c, 3, actors, starts);
  };
  auto near = [](const std::vector<double> &at,
                 const std::vector<double> &expected) {
    for (size_t i = 0; i < at.size(); ++i)
      if (at[i] != Approx(expected[i]))
        return false;
    return at.size() == expected.size();
  };
  CHECK(near(ends(costs, {0, 0, 2}, {0, 1, 1}), {1, 2.5, 2.5}));
  costs.groupNode.clear();
  CHECK(near(ends(costs, {0, 0, 2}, {0, 1, 1}), {1, 2, 2}));
  // All three at once: actors 0 and 1 share their core (half each) and
  // the node runs 3, 2x on top; once actor 2 ends (at 2), the other two
  // have half their work left, at half a core 1.5x slower.
  costs.groupNode = {0, 0};
  CHECK(near(ends(costs, {0, 1, 2}, {0, 0, 0}), {3.5, 3.5, 2}));
}

TEST_CASE("each computation is slowed as its shape is",
          "[simulator][eventcore]") {
  // Two actors with two cores in one group: while both compute, shape 1
  // (another module's blocks) is slowed 3x and shape 0 not at all. Each
  // computation ended at its group's one slowdown, the shape of the model
  // file's first module.
  SimCosts costs;
  costs.coreGroup = {0, 0};
  costs.groupCores = {2.0};
  costs.groupSlowdown = {{{1, 1, 1}, {1, 1, 3}}};
  const std::vector<double> at = endTimes(costs, 2, {0, 1}, {0, 0}, {0, 1});
  // Shape 1 does 1/3 while shape 0 finishes, then runs alone, unslowed.
  CHECK(at[0] == Approx(1.0));
  CHECK(at[1] == Approx(1.0 + 2.0 / 3.0));
}

/// Actors 0 and 1 on one core that they take turns on (time slice `slice`,
/// hand-over cost `handoff`).
static SimCosts oneSharedCore(double slice, double handoff = 0) {
  SimCosts costs;
  costs.coreGroup = {0, 0};
  costs.groupCores = {1.0};
  costs.groupSlice = slice;
  costs.groupHandoff = handoff;
  return costs;
}

TEST_CASE("computations of a one-core group with a time slice take turns",
          "[simulator][eventcore]") {
  // Actors 0 and 1 share one core with a slice of 1. Short computations run
  // one after the other (the first ready keeps the core); long ones
  // alternate slice by slice; the holder keeps the core across computations
  // started as its last one ends.
  SimCosts costs = oneSharedCore(1.0);
  auto runWith = [&](std::vector<std::pair<int32_t, double>> first,
                     std::vector<double> next0) {
    EventCore core(2, costs);
    std::vector<std::pair<int32_t, double>> ends;
    bool started = false, idle0 = false;
    size_t chained = 0;
    core.run(
        [&](int32_t actor, bool) {
          if (actor == 0 && idle0 && chained < next0.size()) {
            // Actor 0 goes on at once with its next computation.
            idle0 = false;
            core.compute(0, static_cast<int32_t>(100 + chained), next0[chained],
                         core.now());
            ++chained;
            return true;
          }
          if (started)
            return false;
          started = true;
          for (size_t i = 0; i < first.size(); ++i)
            core.compute(first[i].first, static_cast<int32_t>(i),
                         first[i].second, 0.0);
          return false;
        },
        [&](int32_t actor, int32_t id) {
          ends.push_back({id, core.now()});
          idle0 |= actor == 0;
        });
    return ends;
  };
  using Ends = std::vector<std::pair<int32_t, double>>;
  // Two of 0.5: the first ends at 0.5 (processor sharing: both at 1).
  Ends ends = runWith({{0, 0.5}, {1, 0.5}}, {});
  REQUIRE(ends.size() == 2);
  CHECK(ends[0].first == 0);
  CHECK(ends[0].second == Approx(0.5));
  CHECK(ends[1].second == Approx(1.0));
  // Two of 2.5: 0 runs [0,1) and [2,3) and [4,4.5); 1 runs [1,2), [3,4),
  // [4.5,5).
  ends = runWith({{0, 2.5}, {1, 2.5}}, {});
  REQUIRE(ends.size() == 2);
  CHECK(ends[0] == std::pair<int32_t, double>{0, 4.5});
  CHECK(ends[1].first == 1);
  CHECK(ends[1].second == Approx(5.0));
  // Many slices long: whole rounds at once, the same ends (one event per
  // slice took hours for computations of 1e6 s and more); at 1e12 slices
  // only the fast-forward finishes.
  ends = runWith({{0, 1000.5}, {1, 1000.5}}, {});
  REQUIRE(ends.size() == 2);
  CHECK(ends[0].first == 0);
  CHECK(ends[0].second == Approx(2000.5));
  CHECK(ends[1].second == Approx(2001.0));
  // A computation ends at the slice end where what is left is within 1e-9
  // of its work (here 1000 slices: its 1e12 - 999th slice, ending at
  // 2e12 - 1999), as stepping slice by slice ends it; the other runs alone
  // from there.
  ends = runWith({{0, 1e12 + 0.5}, {1, 3e12}}, {});
  REQUIRE(ends.size() == 2);
  CHECK(ends[0].first == 0);
  CHECK(ends[0].second == Approx(2e12 - 1999).margin(1e-2));
  CHECK(ends[1].second == Approx(4e12 + 0.5 - 999.5).margin(1e-2));
  // Past 2^53 slices a slice no longer moves time (1e17 + 1 == 1e17): the
  // two share the core instead of taking turns, which hung stepping slices
  // that ended where they began.
  ends = runWith({{0, 1e17}, {1, 1e17}}, {});
  REQUIRE(ends.size() == 2);
  CHECK(ends[0].second == Approx(2e17));
  CHECK(ends[1].second == Approx(2e17));
  // Actor 0 chains 0.25 + 0.25 + 0.25 within its slice, then a fourth
  // computation of 0.5 runs past it: at 1 the core passes to actor 1.
  ends = runWith({{0, 0.25}, {1, 0.5}}, {0.25, 0.25, 0.5});
  REQUIRE(ends.size() == 5);
  CHECK(ends[0].first == 0);
  CHECK(ends[0].second == Approx(0.25));
  CHECK(ends[1].first == 100);
  CHECK(ends[1].second == Approx(0.5));
  CHECK(ends[2].first == 101);
  CHECK(ends[2].second == Approx(0.75));
  CHECK(ends[3].first == 1); // actor 1 ran [1, 1.5)
  CHECK(ends[3].second == Approx(1.5));
  CHECK(ends[4].first == 102); // actor 0's last: [0.75, 1) and [1.5, 1.75)
  CHECK(ends[4].second == Approx(1.75));
  // More than one core in the group: processor sharing as before.
  costs.groupCores = {2.0};
  ends = runWith({{0, 0.5}, {1, 0.5}}, {});
  REQUIRE(ends.size() == 2);
  CHECK(ends[0].second == Approx(0.5));
  CHECK(ends[1].second == Approx(0.5));
}

TEST_CASE("a rank that has not blocked keeps its core across the time "
          "between its computations",
          "[simulator][eventcore]") {
  // Actors 0 and 1 share one core with a long slice. Actor 0 computes
  // [0, 1); its next computation (0.5) starts at 1.25, after instructions
  // of its own; actor 1 asks for the core at 1.1 (its message came).
  // `late`: actor 0 knows its next computation only at 1.2 (what it waits
  // for is timed then), its instructions running until 1.25 (hold()).
  const SimCosts costs = oneSharedCore(100.0);
  auto runWith = [&](bool continuing, bool late, bool holds) {
    EventCore core(2, costs);
    std::vector<std::pair<int32_t, double>> ends;
    bool started = false;
    int phase = 0; // 1: actor 0's first computation ended; 2: held
    core.run(
        [&](int32_t actor, bool) {
          if (actor == 0 && phase == 1 && late) {
            phase = 2;
            if (holds)
              core.hold(0, 1.25);
            core.wakeAt(1.2, 0);
            return true;
          }
          if (actor == 0 && (phase == 1 || (phase == 2 && core.now() >= 1.2))) {
            phase = 3;
            core.compute(0, 2, 0.5, 1.25, continuing);
            return true;
          }
          if (started)
            return false;
          started = true;
          core.compute(0, 0, 1.0, 0.0);
          core.compute(1, 1, 1.0, 1.1);
          return false;
        },
        [&](int32_t, int32_t id) {
          ends.push_back({id, core.now()});
          if (id == 0)
            phase = 1;
        });
    return ends;
  };
  using Ends = std::vector<std::pair<int32_t, double>>;
  // Continuing: actor 0 holds the core from 1 (its instructions, then its
  // computation) to 1.75; actor 1 computes [1.75, 2.75).
  const Ends kept{{0, 1.0}, {2, 1.75}, {1, 2.75}};
  // A rank that waited in between lets the other have the core at 1.1.
  const Ends passed{{0, 1.0}, {1, 2.1}, {2, 2.6}};
  CHECK(runWith(true, false, false) == kept);
  CHECK(runWith(false, false, false) == passed);
  // Busy with its instructions until its next computation is known.
  CHECK(runWith(true, true, true) == kept);
  CHECK(runWith(true, true, false) == passed);
}

TEST_CASE("a computation that takes a shared core over starts with the "
          "hand-over's cost",
          "[simulator][eventcore]") {
  // Actors 0 and 1 share one core (long slice), 0.25 each time one takes
  // the core from the other: actor 0 computes [0, 1), actor 1 (ready at
  // 0.5) takes the core at 1 and computes 1 + 0.25, actor 0's second
  // computation (ready at 1.5) takes it back at 2.25 and computes 0.5 +
  // 0.25. Without a previous holder, actor 0's first pays nothing.
  EventCore core(2, oneSharedCore(100.0, 0.25));
  std::vector<std::pair<int32_t, double>> ends;
  bool started = false;
  core.run(
      [&](int32_t, bool) {
        if (started)
          return false;
        started = true;
        core.compute(0, 0, 1.0, 0.0);
        core.compute(1, 1, 1.0, 0.5);
        core.compute(0, 2, 0.5, 1.5);
        return true;
      },
      [&](int32_t, int32_t id) {
        ends.push_back({id, core.now()});
      });
  REQUIRE(ends.size() == 3);
  CHECK(ends[0] == std::pair<int32_t, double>{0, 1.0});
  CHECK(ends[1].first == 1);
  CHECK(ends[1].second == Approx(2.25));
  CHECK(ends[2].first == 2);
  CHECK(ends[2].second == Approx(3.0));
}
