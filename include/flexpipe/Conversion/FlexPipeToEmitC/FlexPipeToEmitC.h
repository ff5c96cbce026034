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
#include "llvm/Support/CommandLine.h"

#include "flexpipe/Scheduling/CostModel.h"

#include <memory>

namespace flexpipe {

/// A schedule's discardable attribute: per actor, the peak activation bytes
/// the cost model predicts (an array of f64). flexpipe-compile sets it
/// before the lowering when it has a model; the runtime description carries
/// it, and the ranks print it beside the peak they measure.
inline constexpr llvm::StringLiteral kPredictedPeakAttr =
    "flexpipe.predicted_peak_activation";

/// The runtime backend the lowered ranks link (flexpipe-compile --backend):
/// what they can run differs in the message channels a rank may use.
enum class RuntimeBackend { Cpu, Cuda };

inline llvm::cl::ValuesClass runtimeBackendValues() {
  return llvm::cl::values(
      clEnumValN(RuntimeBackend::Cpu, "cpu", "MPI: any number of channels"),
      clEnumValN(RuntimeBackend::Cuda, "cuda",
                 "NCCL (or its CPU emulation): a rank takes part in at most "
                 "31 message channels"));
}

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
