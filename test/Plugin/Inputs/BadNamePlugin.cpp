//===- BadNamePlugin.cpp - A plugin registering an invalid name -----------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Registers the in-flight rule "good_rule", then the priority "1f1b", whose
// name does not start with a letter or an underscore: the load fails and
// "good_rule" is gone again.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"

using namespace flexpipe;

FLEXPIPE_PLUGIN(registry) {
  registry.addInflightRule(
      "good_rule", [](const plugin::InflightQuery &) -> int64_t { return 1; });
  registry.addPriority("1f1b", [](const sched::StepView &,
                                  const std::vector<sched::ReadyItem> &ready) {
    return ready.empty() ? -1 : 0;
  });
}
