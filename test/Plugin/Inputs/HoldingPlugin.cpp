//===- HoldingPlugin.cpp - A check that waits for a time
//-------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A check that holds every backward until step 20: once the in-flight
// limits stop the forwards, nothing runs, time does not pass, and the
// schedule cannot finish. The diagnosis must name the check's veto, not the
// in-flight limit the veto leaves reached, and which of several checks it
// is. A priority that picks past the end of its candidates is named too.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"

FLEXPIPE_PLUGIN(registry) {
  using namespace flexpipe;
  registry.addCheck("backwards_from_step_20", [](const sched::StepView &view,
                                                 const sched::ReadyItem &item) {
    return item.kind == sched::CompKind::Fwd || view.now >= 20;
  });
  registry.addCheck(
      "accepts_all",
      [](const sched::StepView &, const sched::ReadyItem &) { return true; });
  registry.addPriority(
      "picks_past_the_end",
      [](const sched::StepView &, const std::vector<sched::ReadyItem> &ready) {
        return static_cast<int>(ready.size());
      });
}
