//===- flexpipe-reference.cpp - Single-process training -------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Trains the same model on the same data as a compiled pipeline, in one
// process and without pipelining (runtime/lib/Reference.cpp). Pipelined runs
// must match its losses and final weights.
//
// Usage: flexpipe-reference SCHEDULE.txt [--iterations N] [--lr X]
//                           [--losses FILE] [--weights FILE]
//        flexpipe-reference --list-operations
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Host.h"
#include "flexpipe/Runtime/Reference.h"

#include <new>

int main(int argc, char **argv) {
  try {
    return flexpipe::rt::runReference(argc, argv);
  } catch (const std::bad_alloc &) {
    return flexpipe::rt::outOfHostMemory();
  }
}
