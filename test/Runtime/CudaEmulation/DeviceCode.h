//===- DeviceCode.h - CUDA device code as C++ on the CPU --------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What runtime/backends/cuda/Kernels.cu needs to compile as C++ and run on
// the CPU (Kernels.cpp includes it first): the qualifiers, threadIdx and
// friends, warp shuffles and __syncwarp, and launch(). A launch runs on its
// stream's thread (Streams.cpp), its blocks and warps one after another;
// the lanes of a warp are fibers that meet at every shuffle and __syncwarp,
// so warp-synchronous code runs as on a GPU, and a warp whose lanes diverge
// at a full-mask shuffle is reported.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_CUDA_EMULATION_DEVICECODE_H
#define FLEXPIPE_TEST_CUDA_EMULATION_DEVICECODE_H

#include "cuda_runtime_api.h"

#include <math.h>

#include <cstddef>
#include <cstdint>
#include <functional>

#define __global__
#define __device__
#define __host__

namespace flexpipe::rt::cuda::emulation {

struct Dim3 {
  unsigned x = 0, y = 0, z = 0;
};
/// The running lane's indices.
struct LaneState {
  Dim3 thread, block, blockSize, gridSize;
};
LaneState &lane();
int laneId();
/// Every lane of the warp arrives before any goes on.
void warpBarrier();
/// Leaves `bytes` of `value` for the other lanes / reads lane `source`'s.
void deposit(const void *value, size_t bytes);
void fetch(int source, void *value, size_t bytes);
/// Runs `body` as `blocks` x `threads` lanes on the calling thread;
/// `kernel` identifies it.
void runGrid(const void *kernel, unsigned blocks, unsigned threads,
             const std::function<void()> &body);
/// runGrid when `stream` gets there (Streams.cpp).
void launchOn(cudaStream_t stream, const void *kernel, unsigned blocks,
              unsigned threads, std::function<void()> body);

/// kernel<<<blocks, threads, 0, stream>>>(args...): the arguments are
/// copied at the launch, as CUDA copies them.
template <typename... Params, typename... Args>
void launch(cudaStream_t stream, void (*kernel)(Params...), unsigned blocks,
            unsigned threads, Args... args) {
  launchOn(stream, reinterpret_cast<const void *>(kernel), blocks, threads,
           [=] { kernel(args...); });
}

} // namespace flexpipe::rt::cuda::emulation

#define threadIdx (::flexpipe::rt::cuda::emulation::lane().thread)
#define blockIdx (::flexpipe::rt::cuda::emulation::lane().block)
#define blockDim (::flexpipe::rt::cuda::emulation::lane().blockSize)
#define gridDim (::flexpipe::rt::cuda::emulation::lane().gridSize)

inline void __syncwarp(unsigned = 0xffffffffu) {
  ::flexpipe::rt::cuda::emulation::warpBarrier();
}

template <typename T> T __shfl_sync(unsigned, T value, int source) {
  namespace emulation = ::flexpipe::rt::cuda::emulation;
  emulation::deposit(&value, sizeof(T));
  emulation::warpBarrier();
  T result = value;
  emulation::fetch(source, &result, sizeof(T));
  emulation::warpBarrier();
  return result;
}

template <typename T> T __shfl_down_sync(unsigned, T value, unsigned delta) {
  namespace emulation = ::flexpipe::rt::cuda::emulation;
  emulation::deposit(&value, sizeof(T));
  emulation::warpBarrier();
  T result = value; // lanes past the warp's end keep their value
  const int source = emulation::laneId() + static_cast<int>(delta);
  if (source < 32)
    emulation::fetch(source, &result, sizeof(T));
  emulation::warpBarrier();
  return result;
}

#endif // FLEXPIPE_TEST_CUDA_EMULATION_DEVICECODE_H
