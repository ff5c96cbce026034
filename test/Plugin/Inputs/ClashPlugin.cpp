//===- ClashPlugin.cpp - A plugin whose names clash with the example's ----===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Registers the priority "clash_fresh" (a new name), then the check
// "max_two_inflight", which the example plugin registers too. Loaded after
// the example plugin it must fail and leave "clash_fresh" unregistered;
// loaded alone it succeeds.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"

using namespace flexpipe;

FLEXPIPE_PLUGIN(registry) {
  registry.addPriority(
      "clash_fresh",
      [](const sched::StepView &, const std::vector<sched::ReadyItem> &ready) {
        return ready.empty() ? -1 : 0;
      });
  registry.addCheck(
      "max_two_inflight",
      [](const sched::StepView &, const sched::ReadyItem &) { return true; });
}
