//===- Version.h - --version of the tools -----------------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TOOLS_VERSION_H
#define FLEXPIPE_TOOLS_VERSION_H

#include <string>

namespace flexpipe {

/// What `TOOL --version` prints: "flexpipe-compile (FlexPipe 0.1.0,
/// revision 9f1f4ad0c2b1)", the revision from `git describe` at build time.
std::string versionText(const char *tool);

} // namespace flexpipe

#endif // FLEXPIPE_TOOLS_VERSION_H
