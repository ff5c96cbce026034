//===- Host.h - The process a CPU rank runs in ------------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// How a process that runs the CPU model is set up, in one place for the rank
// programs, flexpipe-reference and flexpipe-profile, so that what the
// profiler measures is what the ranks run.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_HOST_H
#define FLEXPIPE_RUNTIME_HOST_H

namespace flexpipe::rt {

/// OpenBLAS on one thread (a rank per core), and glibc's allocator keeping
/// freed memory for the next micro-batch instead of returning it to the
/// kernel (docs/Runtime.md, "The built-in model").
void prepareHostProcess();

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_HOST_H
