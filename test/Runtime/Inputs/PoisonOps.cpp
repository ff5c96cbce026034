//===- PoisonOps.cpp - A runtime operation that corrupts activations ------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// For test/Runtime/diverged.mlir: @poison writes a NaN into the first
// element of its stage's output at iteration `at` (attrs {at = N}), as a
// broken operation or an overflow would. The operations' API hands out
// read-only views; this test casts that away on purpose.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Runtime/UserOps.h"

#include <limits>

using flexpipe::rt::OpContext;

FLEXPIPE_OPERATION(poison)(OpContext &ctx) {
  if (ctx.getIteration() != ctx.getInt("at"))
    return;
  flexpipe::rt::TensorView output = ctx.getOutput();
  if (!output.empty())
    const_cast<float *>(output.data)[0] =
        std::numeric_limits<float>::quiet_NaN();
}
