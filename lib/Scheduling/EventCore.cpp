//===- EventCore.cpp - Time, computations and the tie rule ----------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/EventCore.h"

#include <cmath>
#include <limits>
#include <map>
#include <numeric>

using namespace flexpipe::sched;

EventCore::EventCore(int32_t numActors)
    : group(numActors, -1), dirty(numActors, true), settleAsk(numActors) {}

EventCore::EventCore(int32_t numActors, const SimCosts &costs)
    : cores(costs.groupCores), slowdown(costs.groupSlowdown),
      running(costs.groupCores.size()), slice(costs.groupSlice),
      handoff(costs.groupHandoff), turns(costs.groupCores.size()),
      progressing(costs.groupCores.size()), busyUntil(numActors, 0.0),
      dirty(numActors, true), settleAsk(numActors) {
  const int32_t numGroups = static_cast<int32_t>(cores.size());
  group.assign(numActors, -1);
  for (int32_t a = 0;
       a < numActors && a < static_cast<int32_t>(costs.coreGroup.size()); ++a)
    if (costs.coreGroup[a] >= 0 && costs.coreGroup[a] < numGroups)
      group[a] = costs.coreGroup[a];
  // Nodes numbered from 0; a group without one is a node of its own.
  std::map<int32_t, int32_t> number;
  node.resize(numGroups);
  for (int32_t g = 0; g < numGroups; ++g) {
    const bool given = g < static_cast<int32_t>(costs.groupNode.size()) &&
                       costs.groupNode[g] >= 0;
    const int32_t key = given ? costs.groupNode[g] : -1 - g;
    node[g] =
        number.emplace(key, static_cast<int32_t>(number.size())).first->second;
  }
  onNode.resize(number.size());
}

double EventCore::rate(int32_t g, int32_t shape, size_t n) const {
  const double slow =
      g < static_cast<int32_t>(slowdown.size()) && shape >= 0 &&
              shape < static_cast<int32_t>(slowdown[g].size()) &&
              n < slowdown[g][shape].size()
          ? slowdown[g][shape][n]
          : 1.0;
  // Taking turns, the one computation running has the whole share.
  const double share =
      takesTurns(g) ? 1.0 : static_cast<double>(running[g].size());
  return std::min(1.0, cores[g] / share) / slow;
}

void EventCore::groupRates() {
  std::fill(onNode.begin(), onNode.end(), 0);
  for (size_t g = 0; g < running.size(); ++g)
    onNode[node[g]] += running[g].size();
  for (size_t g = 0; g < running.size(); ++g)
    for (Job &job : running[g])
      job.rate = rate(static_cast<int32_t>(g), job.shape, onNode[node[g]]);
}

double EventCore::maxRate() const {
  // One computation alone in its group, at the least slowdown of its node.
  double fastest = 1;
  for (size_t g = 0; g < cores.size(); ++g)
    for (size_t k = 0; g < slowdown.size() && k < slowdown[g].size(); ++k)
      for (size_t n = 1; n < slowdown[g][k].size(); ++n)
        if (slowdown[g][k][n] > 0)
          fastest =
              std::max(fastest, std::min(1.0, cores[g]) / slowdown[g][k][n]);
  return fastest;
}

void EventCore::computeShared(int32_t actor, int32_t id, double work, double at,
                              bool continuing, int32_t shape) {
  const int32_t g = groupOf(actor);
  // The holder of a core its group takes turns on, on its way from one
  // computation to the next: the time in between is its own work on the
  // core, which nobody else gets meanwhile.
  if (continuing && at > time && takesTurns(g) && turns[g].holder == actor) {
    work += at - time;
    at = time;
  }
  if (at <= time)
    running[g].push_back({actor, id, work, work, shape});
  else
    later.push({at, actor, id, work, shape});
}

void EventCore::wakeAt(double at, int32_t actor) {
  wakes.push(at, actor, actor);
}

double EventCore::settleTurn(size_t g) {
  std::vector<Job> &jobs = running[g];
  Turn &turn = turns[g];
  auto held = std::find_if(jobs.begin(), jobs.end(), [&](const Job &job) {
    return job.actor == turn.holder;
  });
  // A computation whose actor takes the core over from another starts with
  // the switch and caches the other filled (MachineProfile::handoff).
  auto takeOver = [&] {
    if (turn.holder >= 0 && turn.holder != jobs.front().actor)
      jobs.front().left += handoff;
    turn = {jobs.front().actor, time};
  };
  if (held == jobs.end()) {
    // The holder waits (or none yet): the next in line takes the core.
    takeOver();
  } else {
    // The holder goes on: its next computation comes first.
    std::rotate(jobs.begin(), held, held + 1);
  }
  if (jobs.size() == 1)
    return std::numeric_limits<double>::infinity();
  // Alone, the holder's slices were renewed every `slice`: the one running
  // now ends at the next multiple; at it (a slice that just ran out, with
  // the holder's computation unfinished or a new one started), the core
  // passes on.
  const double slices =
      std::max(1.0, std::ceil((time - turn.start) / slice - 1e-9));
  double end = turn.start + slice * slices;
  if (end <= time + 1e-9 * slice) {
    std::rotate(jobs.begin(), jobs.begin() + 1, jobs.end());
    takeOver();
    end = time + slice;
  }
  return end;
}

double EventCore::queuedEvent() const {
  double at = std::numeric_limits<double>::infinity();
  if (!exactEnds.empty())
    at = exactEnds.topTime();
  if (!later.empty())
    at = std::min(at, later.top().time);
  if (!wakes.empty())
    at = std::min(at, wakes.topTime());
  return at;
}

double EventCore::nextEvent() {
  double at = queuedEvent();
  // Per group, how many of its computations progress (the first ones):
  // all, or the one holding the core; and at what rate.
  for (size_t g = 0; g < running.size(); ++g) {
    progressing[g] = running[g].size();
    if (running[g].empty())
      continue;
    if (takesTurns(g)) {
      // A holder between computations, busy with its instructions: the
      // core is its own until then (hold()).
      const int32_t holder = turns[g].holder;
      if (holder >= 0 && busyUntil[holder] > time &&
          std::none_of(running[g].begin(), running[g].end(),
                       [&](const Job &job) { return job.actor == holder; })) {
        at = std::min(at, busyUntil[holder]);
        progressing[g] = 0;
        continue;
      }
      at = std::min(at, settleTurn(g));
      progressing[g] = 1;
    }
    for (size_t j = 0; j < progressing[g]; ++j)
      at = std::min(at, time + running[g][j].left / running[g][j].rate);
  }
  return at;
}

bool EventCore::fastForward() {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Until the first event that is not a slice running out.
  double external = queuedEvent();
  long long round = 1;   // slices in a round common to every turning group
  double longest = kInf; // the time every turning group may run on
  bool turning = false;
  for (size_t g = 0; g < running.size(); ++g) {
    const size_t k = running[g].size();
    if (k == 0)
      continue;
    if (std::any_of(running[g].begin(), running[g].end(),
                    [](const Job &job) { return !(job.rate > 0); }) ||
        (takesTurns(g) && progressing[g] == 0))
      return false; // (a holder between computations: step it)
    if (takesTurns(g) && k > 1) {
      turning = true;
      round = std::lcm(round, static_cast<long long>(k));
      if (round > 1 << 20)
        return false;
      // Each of its computations gets `slice` a round: full rounds while
      // the shortest has more than one slice left (a spare round).
      // (A job counts as done at a slice end within 1e-9 of its work, as
      // advance() ends it: the margin is taken off, so that no slice end
      // skipped would have ended one.)
      double least = kInf;
      for (const Job &job : running[g])
        least = std::min(least, (job.left - 1e-9 * job.work) / job.rate);
      longest = std::min(longest, (std::floor(least / slice) - 1) *
                                      static_cast<double>(k) * slice);
    } else {
      for (size_t j = 0; j < progressing[g]; ++j)
        external =
            std::min(external, time + running[g][j].left / running[g][j].rate);
    }
  }
  if (!turning)
    return false;
  const double unit = static_cast<double>(round) * slice;
  const double rounds =
      std::floor(std::min(longest, external - time - unit) / unit);
  if (!(rounds >= 2))
    return false; // a few events: step them
  const double span = rounds * unit;
  for (size_t g = 0; g < running.size(); ++g) {
    const size_t k = running[g].size();
    if (k == 0)
      continue;
    if (takesTurns(g) && k > 1) {
      // Each took the core over once a round of its group's turns.
      for (Job &job : running[g])
        job.left += handoff * span / (slice * static_cast<double>(k)) -
                    span / static_cast<double>(k) * job.rate;
      turns[g].start += span;
    } else {
      for (size_t j = 0; j < progressing[g]; ++j)
        running[g][j].left -= span * running[g][j].rate;
      if (takesTurns(g))
        turns[g].start += span;
    }
  }
  time += span;
  return true;
}
