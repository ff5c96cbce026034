//===- HoldingPlugin.cpp - A check that waits for a time -------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A check that holds every forward until step 3: with nothing running, time
// does not pass, and the schedule cannot finish. The diagnosis must name the
// check's veto, not an in-flight limit.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"

FLEXPIPE_PLUGIN(registry) {
  using namespace flexpipe;
  registry.addCheck("forwards_from_step_3",
                    [](const sched::StepView &view, const sched::ReadyItem &item) {
                      return item.kind != sched::CompKind::Fwd || view.now >= 3;
                    });
}
