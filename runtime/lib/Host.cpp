//===- Host.cpp - The process a CPU rank runs in --------------------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/Host.h"

#include <cblas.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <thread>
#ifdef __GLIBC__
#include <malloc.h>
#endif

int flexpipe::rt::outOfHostMemory() {
  std::fputs("flexpipe: out of host memory: an allocation failed; the "
             "model's weights, optimizer state and activations do not fit "
             "this machine (flexpipe-compile --emit=report with --model and "
             "--cluster prices each rank's memory): use a smaller model or "
             "micro-batch, or more ranks\n",
             stderr);
  return 1;
}

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

int flexpipe::rt::allowedCpus() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    return CPU_COUNT(&allowed);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::string flexpipe::rt::bindToCore(int64_t core) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
    return std::string("cannot read the CPU affinity: ") + std::strerror(errno);
  const int count = CPU_COUNT(&allowed);
  if (count == 0)
    return "no CPU to bind to";
  const int64_t wanted = core % count;
  int cpu = -1;
  for (int64_t seen = -1; seen < wanted && cpu + 1 < CPU_SETSIZE;)
    seen += CPU_ISSET(++cpu, &allowed) ? 1 : 0;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0)
    return "cannot bind to CPU " + std::to_string(cpu) + ": " +
           std::strerror(errno);
  return "";
}
