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
#include "flexpipe/Scheduling/Simulator.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <utility>
#include <vector>

namespace flexpipe {

/// The value of the string pass option `what` of pass `-pass` among
/// `choices`; otherwise emits `unknown WHAT 'V' for -PASS; expected A or B`
/// at `at` and fails. The one reader of enumerated pass options.
template <typename T>
mlir::FailureOr<T>
chooseOption(mlir::Operation *at, llvm::StringRef pass, llvm::StringRef what,
             llvm::StringRef value,
             std::initializer_list<std::pair<llvm::StringRef, T>> choices) {
  std::string expected;
  size_t index = 0;
  for (const auto &[name, result] : choices) {
    if (name == value)
      return result;
    if (index > 0)
      expected += index + 1 == choices.size() ? " or " : ", ";
    expected += name.str();
    ++index;
  }
  at->emitError() << "unknown " << what << " '" << value << "' for -" << pass
                  << "; expected " << expected;
  return mlir::failure();
}

/// Reads a verified pipeline into the library's spec. Emits a diagnostic and
/// fails on constructs the scheduler does not handle yet.
mlir::FailureOr<sched::PipelineSpec> readPipelineSpec(PipelineOp pipeline);

/// A schedule as flat programs, with the op each entry was read from.
struct ScheduleProgram {
  sched::Program program;
  std::vector<std::vector<mlir::Operation *>> ops;
};
ScheduleProgram readSchedule(ScheduleOp schedule);

/// Creates one instruction op for `op` at the builder's insertion point.
/// With `tokens`, ops the program gives a token produce a !flexpipe.token
/// (recorded there) and waits use it; without, they are created blocking
/// and waits are skipped (nullptr).
mlir::Operation *
createInstruction(mlir::OpBuilder &builder, mlir::Location loc,
                  const sched::ProgOp &op, const sched::Program &program,
                  llvm::DenseMap<int32_t, mlir::Value> *tokens = nullptr);

/// Creates a flexpipe.schedule named `name` at the builder's insertion point
/// holding `program`: its sizes, its edges when they are not the default
/// chain, its shared stages, its stage_info (when the program has stage
/// metadata) and every actor's instructions, tokens included. The one writer
/// of a whole program (the scheduler's output and imported schedules).
ScheduleOp createSchedule(mlir::OpBuilder &builder, mlir::Location loc,
                          mlir::StringAttr name, const sched::Program &program);

/// Rebuilds each actor's body in the order of `program`: entries read from
/// an op of the same kind move that op, others are created; ops no entry
/// refers to any more are erased.
void rewriteSchedule(ScheduleOp schedule, const ScheduleProgram &read,
                     const sched::Program &program);

/// Whether a pass should transform `schedule`: always, unless
/// `requestedOnly`, in which case only when the spec's `flexpipe.optimize`
/// (kept on the schedule as the `flexpipe.optimize` attribute) names
/// `optimization`.
bool shouldOptimize(ScheduleOp schedule, llvm::StringRef optimization,
                    bool requestedOnly);

/// The costs a pass times a schedule with: the cost model's when `modelFile`
/// and `clusterFile` are given (with a measured `profileFile` on top), else
/// the profile's, else unit costs: `step` (every instruction one step, one
/// unit of activation memory per stage) or `cost` (sched::layerCosts).
/// Messages are priced on sched::replicaDevices(actors, dp).
/// Emits an error at `at` and fails on bad files or options.
mlir::FailureOr<sched::SimCosts>
resolveCosts(mlir::Operation *at, const sched::Program &program,
             llvm::StringRef passName, llvm::StringRef timeModel,
             llvm::StringRef modelFile, llvm::StringRef clusterFile,
             llvm::StringRef profileFile, int64_t dp);

} // namespace flexpipe

#endif // FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_UTILS_H
