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
// is. A priority that picks past the end of its candidates is named too,
// and so are hooks that misbehave only between whole steps.
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
  // Hooks that misbehave only at the cost model's times (fractions of a
  // second), not at the step model's whole steps: the step model's order,
  // which the cost model falls back to, must not hide them.
  auto whole = [](double t) { return t == static_cast<double>(int64_t(t)); };
  registry.addCheck(
      "backwards_at_whole_times",
      [whole](const sched::StepView &view, const sched::ReadyItem &item) {
        return item.kind == sched::CompKind::Fwd || whole(view.now);
      });
  // An in-flight rule whose answer is no limit at all.
  registry.addInflightRule(
      "minus_five",
      [](const plugin::InflightQuery &) -> int64_t { return -5; });
  registry.addPriority("past_the_end_between_steps",
                       [whole](const sched::StepView &view,
                               const std::vector<sched::ReadyItem> &ready) {
                         return whole(view.now)
                                    ? 0
                                    : static_cast<int>(ready.size());
                       });
}
