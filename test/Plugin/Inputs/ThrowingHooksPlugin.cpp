//===- ThrowingHooksPlugin.cpp - A plugin whose hooks throw ---------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Registers a check, a priority and an in-flight rule that throw when they
// are called (against docs/Plugins.md): the tools must report which hook
// threw and what it said, not terminate (an exception thrown through the
// scheduler, built without exceptions, aborted the process).
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"

#include <stdexcept>

FLEXPIPE_PLUGIN(registry) {
  using namespace flexpipe;
  registry.addCheck("throwing_check",
                    [](const sched::StepView &,
                       const sched::ReadyItem &) -> bool {
                      throw std::runtime_error("check threw");
                    });
  registry.addPriority("throwing_priority",
                       [](const sched::StepView &,
                          const std::vector<sched::ReadyItem> &) -> int {
                         throw 42;
                       });
  registry.addInflightRule("throwing_rule",
                           [](const plugin::InflightQuery &) -> int64_t {
                             throw std::out_of_range("no limit for this size");
                           });
}
