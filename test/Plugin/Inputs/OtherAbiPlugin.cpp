//===- OtherAbiPlugin.cpp - A plugin built with the old std::string ABI ---===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// A well-formed plugin of this API version, compiled with
// _GLIBCXX_USE_CXX11_ABI=0 (CMakeLists.txt): its std::string is not the
// tools'. Its registration's first add crashed the tool ("LLVM ERROR: out
// of memory" in basic_string); the loader must refuse it without calling it.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"

FLEXPIPE_PLUGIN(registry) {
  registry.addCheck("old_abi",
                    [](const flexpipe::sched::StepView &,
                       const flexpipe::sched::ReadyItem &) { return true; });
}
