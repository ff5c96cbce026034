//===- Emulation.h - What the test asks of the emulator ---------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TEST_CUDA_EMULATION_EMULATION_H
#define FLEXPIPE_TEST_CUDA_EMULATION_EMULATION_H

#include <cstddef>

namespace flexpipe::rt::cuda::emulation {

/// Device allocations not freed yet.
size_t liveDeviceAllocations();

/// cublasLtMatmul calls so far with `epilogue` (a cublasLtEpilogue_t).
size_t ltMatmulsWith(int epilogue);
/// From now on, cublasLtMatmulAlgoGetHeuristic finds no algorithm for
/// `epilogue` (as cuBLASLt may for some types and GPUs), or again finds
/// one when `refused` is false.
void refuseLtEpilogue(int epilogue, bool refused = true);

} // namespace flexpipe::rt::cuda::emulation

#endif // FLEXPIPE_TEST_CUDA_EMULATION_EMULATION_H
