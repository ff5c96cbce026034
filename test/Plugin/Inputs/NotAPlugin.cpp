//===- NotAPlugin.cpp - A shared library without FlexPipe's entry points --===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Loads, but exports only flexpipePluginRegister (no API version): the
// loader must name the missing entry point.
//
//===----------------------------------------------------------------------===//

namespace flexpipe::plugin {
class Registry;
} // namespace flexpipe::plugin

extern "C" __attribute__((visibility("default"))) void
flexpipePluginRegister(flexpipe::plugin::Registry &) {}
