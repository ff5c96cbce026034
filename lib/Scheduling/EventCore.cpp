//===- EventCore.cpp - Time, computations and the tie rule ----------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/EventCore.h"

using namespace flexpipe::sched;

EventCore::EventCore(int32_t numActors)
    : group(numActors, -1), dirty(numActors, true), settleAsk(numActors) {}

EventCore::EventCore(int32_t numActors, const SimCosts &costs)
    : cores(costs.groupCores), slowdown(costs.groupSlowdown),
      running(costs.groupCores.size()), dirty(numActors, true),
      settleAsk(numActors) {
  const int32_t numGroups = static_cast<int32_t>(cores.size());
  group.assign(numActors, -1);
  for (int32_t a = 0;
       a < numActors && a < static_cast<int32_t>(costs.coreGroup.size()); ++a)
    if (costs.coreGroup[a] >= 0 && costs.coreGroup[a] < numGroups)
      group[a] = costs.coreGroup[a];
}

double EventCore::rate(int32_t g) const {
  const size_t k = running[g].size();
  const double slow =
      g < static_cast<int32_t>(slowdown.size()) && k < slowdown[g].size()
          ? slowdown[g][k]
          : 1.0;
  return std::min(1.0, cores[g] / static_cast<double>(k)) / slow;
}

double EventCore::maxRate() const {
  double fastest = 1;
  for (size_t g = 0; g < cores.size(); ++g)
    for (size_t k = 1; g < slowdown.size() && k < slowdown[g].size(); ++k)
      if (slowdown[g][k] > 0)
        fastest =
            std::max(fastest, std::min(1.0, cores[g] / k) / slowdown[g][k]);
  return fastest;
}

void EventCore::computeShared(int32_t actor, int32_t id, double work,
                              double at) {
  const int32_t g = groupOf(actor);
  if (at <= time)
    running[g].push_back({actor, id, work, work});
  else
    later.push({at, actor, id, work});
}

void EventCore::wakeAt(double at, int32_t actor) {
  wakes.push(at, actor, actor);
}
