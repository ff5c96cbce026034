//===- ThrowingPlugin.cpp - A plugin whose registration throws ------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Its registration throws after registering a check: the loader must report
// it as a load error and undo the registration, not terminate the tool.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"

#include <stdexcept>

FLEXPIPE_PLUGIN(registry) {
  registry.addCheck("throwing_check",
                    [](const flexpipe::sched::StepView &,
                       const flexpipe::sched::ReadyItem &) { return true; });
  throw std::runtime_error("no configuration found");
}
