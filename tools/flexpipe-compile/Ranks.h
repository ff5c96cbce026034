//===- Ranks.h - flexpipe-compile --emit=cpp|exe ----------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Lowers a verified schedule to one C++ source per rank and, for exe, builds
// the rank executables against a runtime backend and writes the launchers
// (from the files in templates/, embedded at build time).
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_TOOLS_FLEXPIPE_COMPILE_RANKS_H
#define FLEXPIPE_TOOLS_FLEXPIPE_COMPILE_RANKS_H

#include "Options.h"

#include "flexpipe/Scheduling/CostModel.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <memory>

namespace flexpipe {

/// --emit=cpp|exe: the rank sources, the schedule description and build.sh
/// (cpp), or the rank executables and launchers (exe), in the directory -o.
/// `model` is the model file, read once by the driver (null: none).
/// Returns the exit code; errors are reported.
int writeRanks(mlir::MLIRContext &context, mlir::ModuleOp module,
               const CompileOptions &options,
               std::shared_ptr<const sched::ModelConfig> model);

} // namespace flexpipe

#endif // FLEXPIPE_TOOLS_FLEXPIPE_COMPILE_RANKS_H
