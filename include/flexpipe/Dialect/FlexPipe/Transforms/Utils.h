//===- Utils.h - Between the dialect and the scheduling library -*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The passes are thin: they read IR into the scheduling library's plain
// structs, call the algorithm, and write the result back. These are the
// readers and writers.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_UTILS_H
#define FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_UTILS_H

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Program.h"

#include "mlir/IR/Builders.h"

#include <vector>

namespace flexpipe {

/// Reads a verified pipeline into the library's spec. Emits a diagnostic and
/// fails on constructs the scheduler does not handle yet.
mlir::FailureOr<sched::PipelineSpec> readPipelineSpec(PipelineOp pipeline);

/// A schedule as flat programs, with the op each entry was read from.
struct ScheduleProgram {
  sched::Program program;
  std::vector<std::vector<mlir::Operation *>> ops;
};
ScheduleProgram readSchedule(ScheduleOp schedule);

/// Creates one instruction op for `op` at the builder's insertion point
/// (tokens are not supported: the created op is blocking).
mlir::Operation *createInstruction(mlir::OpBuilder &builder,
                                   mlir::Location loc,
                                   const sched::ProgOp &op,
                                   const sched::Program &program);

} // namespace flexpipe

#endif // FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_UTILS_H
