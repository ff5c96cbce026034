//===- Host.cpp - The process a CPU rank runs in --------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Host.h"

#include <cblas.h>

#include <climits>
#ifdef __GLIBC__
#include <malloc.h>
#endif

void flexpipe::rt::prepareHostProcess() {
  openblas_set_num_threads(1);
#ifdef __GLIBC__
  // A micro-batch's activations and gradients are freed when its backward
  // ends and allocated again by the next one's forward. By default glibc
  // returns such blocks to the kernel (mmap above a threshold that adapts
  // slowly, trimming the heap's top), and every iteration pays the page
  // faults again: about 11,000 per iteration on the last rank of a 4-stage
  // hidden-256 GPT. The largest threshold glibc accepts (32 MiB) keeps them
  // in the heap, and the heap is never trimmed: a rank keeps its peak,
  // which it reaches again every iteration.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}
