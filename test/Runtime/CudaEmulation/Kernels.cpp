//===- Kernels.cpp - The CUDA backend's kernels, compiled for the CPU -----===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The very source of runtime/backends/cuda/Kernels.cu, as C++ with the
// emulated device code of DeviceCode.h.
//
//===----------------------------------------------------------------------===//

#define FLEXPIPE_KERNELS_ON_HOST 1
#include "DeviceCode.h"

#include "Kernels.cu"
