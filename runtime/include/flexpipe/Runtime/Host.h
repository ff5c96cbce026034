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

#include <cstdint>
#include <string>

namespace flexpipe::rt {

/// OpenBLAS on one thread (a rank per core), and glibc's allocator keeping
/// freed memory for the next micro-batch instead of returning it to the
/// kernel (docs/Runtime.md, "The built-in model").
void prepareHostProcess();

/// What a rank or the reference says when std::bad_alloc reaches its main
/// (a model too large for the machine; an operation's own is reported by
/// its registration); returns the exit code, 1.
int outOfHostMemory();

/// The CPUs this process may run on (its affinity mask), or the machine's
/// online CPUs where the mask cannot be read.
int allowedCpus();

/// Binds the calling process to the `core`-th CPU (from 0, modulo their
/// count) of those it may run on. Returns an error message, or "".
std::string bindToCore(int64_t core);

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_HOST_H
