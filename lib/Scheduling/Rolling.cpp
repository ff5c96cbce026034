//===- Rolling.cpp - Loops from an actor's straight-line calls ------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Rolling.h"

#include <algorithm>
#include <optional>

using namespace flexpipe::sched;

namespace {

/// Whether trip `j` of the loop [begin, begin + period) can follow the
/// trips before it: the same shapes and token links, values on the line
/// through trips 0 and 1.
bool tripMatches(llvm::ArrayRef<RollCall> calls,
                 llvm::ArrayRef<int64_t> tokenTo, size_t begin, size_t period,
                 size_t j) {
  // Each link of a trip, as an offset in it (or -1: none); one outside the
  // trip keeps the call out of any loop.
  auto within = [&](int64_t other, size_t at) -> std::optional<int64_t> {
    const size_t start = begin + (at - begin) / period * period;
    if (other < 0)
      return -1;
    if (static_cast<size_t>(other) < start ||
        static_cast<size_t>(other) >= start + period)
      return std::nullopt;
    return other - static_cast<int64_t>(start);
  };
  for (size_t q = 0; q < period; ++q) {
    const size_t first = begin + q, at = begin + j * period + q;
    const RollCall &base = calls[first], &call = calls[at];
    if (call.shape != base.shape || call.values.size() != base.values.size())
      return false;
    const auto from = within(call.tokenFrom, at),
               to = within(tokenTo[at], at);
    if (!from || !to || from != within(base.tokenFrom, first) ||
        to != within(tokenTo[first], first))
      return false;
    if (j < 2)
      continue; // trip 1 sets each value's step
    const RollCall &next = calls[first + period];
    for (size_t v = 0; v < call.values.size(); ++v) {
      // (Wrapping arithmetic: a step that overflows matches nothing real.)
      const uint64_t step = static_cast<uint64_t>(next.values[v]) -
                            static_cast<uint64_t>(base.values[v]);
      if (static_cast<uint64_t>(call.values[v]) !=
          static_cast<uint64_t>(base.values[v]) + j * step)
        return false;
    }
  }
  return true;
}

} // namespace

std::vector<RolledLoop>
flexpipe::sched::rollLoops(llvm::ArrayRef<RollCall> calls, size_t maxPeriod,
                           size_t minTrips) {
  // The call that takes each call's token, or -1.
  std::vector<int64_t> tokenTo(calls.size(), -1);
  for (size_t i = 0; i < calls.size(); ++i)
    if (calls[i].tokenFrom >= 0 &&
        static_cast<size_t>(calls[i].tokenFrom) < calls.size())
      tokenTo[calls[i].tokenFrom] = static_cast<int64_t>(i);
  std::vector<RolledLoop> loops;
  minTrips = std::max<size_t>(minTrips, 2);
  for (size_t i = 0; i < calls.size();) {
    RolledLoop best;
    for (size_t period = 1;
         period <= maxPeriod && i + minTrips * period <= calls.size();
         ++period) {
      if (calls[i + period].shape != calls[i].shape)
        continue;
      size_t trips = 1;
      while (i + (trips + 1) * period <= calls.size() &&
             tripMatches(calls, tokenTo, i, period, trips))
        ++trips;
      // The first trip must keep its own tokens too (trip 0 against
      // itself).
      if (trips >= minTrips && trips * period > best.trips * best.period &&
          tripMatches(calls, tokenTo, i, period, 0))
        best = {i, period, trips};
    }
    if (best.trips == 0) {
      ++i;
      continue;
    }
    loops.push_back(best);
    i += best.trips * best.period;
  }
  return loops;
}
