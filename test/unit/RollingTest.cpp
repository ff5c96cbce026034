//===- RollingTest.cpp - rollLoops ----------------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Rolling.h"

#include <catch2/catch.hpp>

#include <random>

using namespace flexpipe::sched;

namespace {

enum Shape : uint32_t { Fwd, Bwd, Send, Recv, SendAsync, Wait };

RollCall call(uint32_t shape, std::initializer_list<int64_t> values,
              int64_t tokenFrom = -1) {
  RollCall c;
  c.shape = shape;
  c.values.assign(values);
  c.tokenFrom = tokenFrom;
  return c;
}

/// The calls the loops stand for, written out again.
std::vector<RollCall> unroll(const std::vector<RollCall> &calls,
                             const std::vector<RolledLoop> &loops) {
  std::vector<RollCall> out;
  size_t at = 0;
  for (const RolledLoop &loop : loops) {
    REQUIRE(loop.begin >= at);
    out.insert(out.end(), calls.begin() + at, calls.begin() + loop.begin);
    for (size_t j = 0; j < loop.trips; ++j)
      for (size_t q = 0; q < loop.period; ++q) {
        const RollCall &base = calls[loop.begin + q],
                       &next = calls[loop.begin + loop.period + q];
        RollCall c = base;
        for (size_t v = 0; v < c.values.size(); ++v)
          c.values[v] += static_cast<int64_t>(j) * (next.values[v] - base.values[v]);
        if (c.tokenFrom >= 0)
          c.tokenFrom += static_cast<int64_t>(j * loop.period);
        out.push_back(c);
      }
    at = loop.begin + loop.trips * loop.period;
  }
  out.insert(out.end(), calls.begin() + at, calls.end());
  return out;
}

bool same(const std::vector<RollCall> &x, const std::vector<RollCall> &y) {
  if (x.size() != y.size())
    return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].shape != y[i].shape || x[i].values != y[i].values ||
        x[i].tokenFrom != y[i].tokenFrom)
      return false;
  return true;
}

/// 1F1B's actor 0 of `pp` at `m` micro-batches: warm-up forwards with their
/// sends, the steady state (send, receive, backward, forward), cool-down.
std::vector<RollCall> oneFOneB(int64_t pp, int64_t m) {
  std::vector<RollCall> calls;
  const int64_t warm = std::min(pp, m);
  for (int64_t mb = 0; mb < warm; ++mb) {
    calls.push_back(call(Fwd, {0, mb}));
    calls.push_back(call(Send, {0, mb, 1}));
  }
  for (int64_t mb = 0; mb < m; ++mb) {
    calls.push_back(call(Recv, {0, mb, 1}));
    calls.push_back(call(Bwd, {0, mb}));
    if (mb + warm < m) {
      calls.push_back(call(Fwd, {0, mb + warm}));
      calls.push_back(call(Send, {0, mb + warm, 1}));
    }
  }
  return calls;
}

} // namespace

// The steady state of 1F1B becomes one loop whatever m is, with pp not a
// power of two and m odd; the calls the loops stand for are the input.
TEST_CASE("rollLoops rolls 1F1B's phases", "[rolling]") {
  for (int64_t pp : {3, 5})
    for (int64_t m : {1, 2, 7, 9, 1001}) {
      CAPTURE(pp, m);
      const std::vector<RollCall> calls = oneFOneB(pp, m);
      const std::vector<RolledLoop> loops = rollLoops(calls);
      CHECK(same(unroll(calls, loops), calls));
      size_t rolled = 0;
      for (const RolledLoop &loop : loops)
        rolled += loop.trips * loop.period;
      // Left as they are: fewer calls than three trips of each phase.
      CHECK(calls.size() - rolled <= 3 * 4 * 3);
      if (m == 1001) {
        CHECK(loops.size() <= 3);
        CHECK(llvm::any_of(loops, [](const RolledLoop &loop) {
          return loop.period == 4 && loop.trips >= 900;
        }));
      }
    }
}

// Values must lie on a line; shapes must match.
TEST_CASE("rollLoops keeps what does not repeat", "[rolling]") {
  std::vector<RollCall> calls;
  for (int64_t mb : {0, 1, 2, 4, 8, 16})
    calls.push_back(call(Fwd, {0, mb}));
  std::vector<RolledLoop> loops = rollLoops(calls);
  CHECK(same(unroll(calls, loops), calls));
  REQUIRE(loops.size() == 1);
  CHECK((loops[0].begin == 0 && loops[0].period == 1 && loops[0].trips == 3));

  calls = {call(Fwd, {0, 0}), call(Bwd, {0, 0}), call(Fwd, {0, 1}),
           call(Fwd, {0, 1}), call(Bwd, {0, 2})};
  CHECK(rollLoops(calls).empty());
  CHECK(rollLoops({}).empty());
  // Two trips are too few by default, enough when asked.
  calls = {call(Fwd, {0, 0}), call(Fwd, {0, 1})};
  CHECK(rollLoops(calls).empty());
  CHECK(rollLoops(calls, 64, 2).size() == 1);
}

// A token stays in its trip: an asynchronous send waited in the same trip
// rolls; one waited a trip later does not.
TEST_CASE("rollLoops keeps tokens within a trip", "[rolling]") {
  std::vector<RollCall> calls;
  for (int64_t mb = 0; mb < 6; ++mb) {
    calls.push_back(call(SendAsync, {0, mb, 1}));
    calls.push_back(call(Fwd, {0, mb}));
    calls.push_back(call(Wait, {}, static_cast<int64_t>(calls.size()) - 2));
  }
  std::vector<RolledLoop> loops = rollLoops(calls);
  REQUIRE(loops.size() == 1);
  CHECK((loops[0].period == 3 && loops[0].trips == 6));
  CHECK(same(unroll(calls, loops), calls));

  // Each send waited after the next one's forward.
  calls.clear();
  for (int64_t mb = 0; mb < 6; ++mb) {
    calls.push_back(call(SendAsync, {0, mb, 1}));
    calls.push_back(call(Fwd, {0, mb}));
    if (mb > 0)
      calls.push_back(call(Wait, {}, static_cast<int64_t>(calls.size()) - 5));
  }
  loops = rollLoops(calls);
  CHECK(same(unroll(calls, loops), calls));
  for (const RolledLoop &loop : loops)
    for (size_t i = loop.begin; i < loop.begin + loop.trips * loop.period;
         ++i) {
      const int64_t from = calls[i].tokenFrom;
      if (from < 0)
        continue;
      const size_t trip = (i - loop.begin) / loop.period;
      CHECK(static_cast<size_t>(from) >= loop.begin + trip * loop.period);
    }
  // And a token made in a loop is not taken after it.
  calls = {call(SendAsync, {0, 0, 1}), call(SendAsync, {0, 1, 1}),
           call(SendAsync, {0, 2, 1}), call(Wait, {}, 2)};
  loops = rollLoops(calls);
  for (const RolledLoop &loop : loops)
    CHECK(loop.begin + loop.trips * loop.period <= 2);
}

// Random programs of straight stretches and repeated blocks (steps of any
// sign, tokens waited in their block or later): the loops found stand for
// exactly the calls given, are disjoint and in order, and keep every token
// in its trip.
TEST_CASE("rollLoops stands for its input on random programs", "[rolling]") {
  std::mt19937 random(20261201);
  auto pick = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(random);
  };
  for (int round = 0; round < 300; ++round) {
    std::vector<RollCall> calls;
    for (int part = pick(1, 6); part > 0; --part) {
      std::vector<RollCall> block;
      for (int k = pick(1, 5); k > 0; --k)
        block.push_back(call(pick(0, 3), {pick(0, 2), pick(-5, 5)}));
      const int trips = pick(1, 7);
      const int64_t step = pick(-2, 2);
      const bool async = pick(0, 1), late = pick(0, 1);
      int64_t pending = -1; // a late send's token, waited a trip later
      for (int j = 0; j < trips; ++j) {
        for (RollCall c : block) {
          c.values[1] += j * step;
          calls.push_back(c);
        }
        if (!async)
          continue;
        const int64_t send = static_cast<int64_t>(calls.size());
        calls.push_back(call(SendAsync, {0, j * step, 1}));
        if (pending >= 0 || !late)
          calls.push_back(call(Wait, {}, late ? pending : send));
        pending = send;
      }
      if (async && late)
        calls.push_back(call(Wait, {}, pending));
    }
    CAPTURE(round);
    const std::vector<RolledLoop> loops = rollLoops(calls, 8);
    CHECK(same(unroll(calls, loops), calls));
    size_t end = 0;
    for (const RolledLoop &loop : loops) {
      CHECK(loop.begin >= end);
      CHECK(loop.trips >= 3);
      CHECK((loop.period >= 1 && loop.period <= 8));
      end = loop.begin + loop.trips * loop.period;
      for (size_t i = 0; i < calls.size(); ++i) {
        const int64_t from = calls[i].tokenFrom;
        if (from < 0)
          continue;
        const bool useIn = i >= loop.begin && i < end;
        const bool defIn = static_cast<size_t>(from) >= loop.begin &&
                           static_cast<size_t>(from) < end;
        CHECK(useIn == defIn);
        if (useIn)
          CHECK((i - loop.begin) / loop.period ==
                (static_cast<size_t>(from) - loop.begin) / loop.period);
      }
    }
  }
}
