//===- FlexPipeToEmitC.h - Lowering schedules to EmitC ----------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_CONVERSION_FLEXPIPETOEMITC_FLEXPIPETOEMITC_H
#define FLEXPIPE_CONVERSION_FLEXPIPETOEMITC_FLEXPIPETOEMITC_H

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include "flexpipe/Scheduling/CostModel.h"

#include <memory>

namespace flexpipe {

#define GEN_PASS_DECL
#include "flexpipe/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexpipe/Conversion/Passes.h.inc"

/// The lowering with the model file read once by the caller (`model`; the
/// pass's model option is then not read).
std::unique_ptr<mlir::Pass>
createConvertToEmitCPass(const ConvertToEmitCPassOptions &options,
                         std::shared_ptr<const sched::ModelConfig> model);

} // namespace flexpipe

#endif // FLEXPIPE_CONVERSION_FLEXPIPETOEMITC_FLEXPIPETOEMITC_H
