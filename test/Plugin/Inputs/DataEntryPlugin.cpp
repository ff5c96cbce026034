//===- DataEntryPlugin.cpp - Entry point names on data --------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Exports FlexPipe's entry point names as variables: the loader must refuse
// them rather than call data.
//
//===----------------------------------------------------------------------===//

extern "C" __attribute__((visibility("default"))) int
    flexpipePluginApiVersion = 1;
extern "C" __attribute__((visibility("default"))) int
    flexpipePluginRegister = 0;
