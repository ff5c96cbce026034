//===- Version.cpp - --version of the tools -------------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Its own file: the revision header changes with every commit, and only
// this file recompiles then.
//
//===----------------------------------------------------------------------===//

#include "Version.h"

#include "flexpipe/Config.h"
#include "flexpipe/Revision.h"

std::string flexpipe::versionText(const char *tool) {
  return std::string(tool) + " (FlexPipe " FLEXPIPE_VERSION
                             ", revision " FLEXPIPE_REVISION ")";
}
