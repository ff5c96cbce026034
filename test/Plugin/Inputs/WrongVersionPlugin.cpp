//===- WrongVersionPlugin.cpp - A plugin built for another API version ----===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Exports both entry points, but claims the next API version: the loader
// must refuse it without calling its registration function.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"

extern "C" __attribute__((visibility("default"))) int
flexpipePluginApiVersion() {
  return flexpipe::plugin::kPluginApiVersion + 1;
}

extern "C" __attribute__((visibility("default"))) void
flexpipePluginRegister(flexpipe::plugin::Registry &registry) {
  registry.addCheck("from_the_future",
                    [](const flexpipe::sched::StepView &,
                       const flexpipe::sched::ReadyItem &) { return true; });
}
