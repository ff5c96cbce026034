//===- Internal.h - What the emulation's files share ------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Between Emulation.cpp (memory, warps, cuBLAS), Streams.cpp (streams and
// events) and Nccl.cpp (NCCL between processes); not for the backend.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_CUDA_EMULATION_INTERNAL_H
#define FLEXPIPE_TEST_CUDA_EMULATION_INTERNAL_H

#include "cuda_runtime_api.h"

#include <cstddef>
#include <functional>
#include <string>

namespace flexpipe::rt::cuda::emulation {

[[noreturn]] void emulationError(const std::string &message);

/// Checks that [pointer, pointer + bytes) lies in one live allocation
/// (device or page-locked host memory); any thread.
void checkRange(const void *pointer, size_t bytes, const char *what);
/// Whether `pointer` lies in page-locked host memory (cudaMallocHost).
bool isPinnedHost(const void *pointer);

/// Runs `work` on `stream`'s own thread after everything enqueued on it
/// before, as a GPU runs a stream's work in order and streams side by side;
/// the legacy default stream (nullptr) runs it at once on the caller.
void enqueue(cudaStream_t stream, std::function<void()> work);
/// Returns once `stream` has run everything enqueued on it so far.
void drain(cudaStream_t stream);
/// Returns once every stream has run everything enqueued so far (what
/// cudaFree and cudaFreeHost wait for).
void drainAll();

} // namespace flexpipe::rt::cuda::emulation

#endif // FLEXPIPE_TEST_CUDA_EMULATION_INTERNAL_H
