//===- ProcessSetup.h - Process-wide settings of the tools ------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The tools schedule, separate and simulate one candidate or program after
// another, each allocating and freeing buffers of a few hundred kilobytes to
// tens of megabytes. glibc serves such sizes with mmap and hands freed memory
// back to the kernel, so every candidate faults its pages in again: the
// 32-GPU tuner search took about 0.3 s of system time in 100,000 page faults
// (0.08 s and 13,000 with the settings below).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TOOLS_PROCESSSETUP_H
#define FLEXPIPE_TOOLS_PROCESSSETUP_H

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace flexpipe {

/// Keeps freed memory in the process for reuse: buffers up to 32 MiB (glibc's
/// largest threshold) come from the heap, and a heap is trimmed only when
/// 512 MiB at its top are free. Does nothing outside glibc.
inline void keepFreedMemory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
#endif
}

} // namespace flexpipe

#endif // FLEXPIPE_TOOLS_PROCESSSETUP_H
