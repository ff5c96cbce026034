//===- RuntimeDescription.h - A schedule for the runtime --------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What a rank executable needs besides its program: the model's stages,
// the actors of each, the towers and their sync stage, the registered
// operations (docs/Runtime.md). describeForRuntime checks that the runtime
// can run a schedule (located diagnostics at compile time) and fills the
// rt::ScheduleDesc that runtime/lib/Schedule.cpp formats and parses (one
// schema, one object library linked by both sides). The lowering to EmitC
// (ConvertToEmitC.cpp) embeds its text in every rank.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_CONVERSION_FLEXPIPETOEMITC_RUNTIMEDESCRIPTION_H
#define FLEXPIPE_CONVERSION_FLEXPIPETOEMITC_RUNTIMEDESCRIPTION_H

#include "flexpipe/Conversion/FlexPipeToEmitC/FlexPipeToEmitC.h"
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Scheduling/CostModel.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace flexpipe {

/// One flexpipe.exec as the runtime runs it (docs/Runtime.md).
struct ExecInstance {
  /// The micro-batches it covers, [mb, mb + count): up to the next instance
  /// of the same instruction and stage on its actor, the last up to the
  /// schedule's end.
  int64_t count = 1;
  /// Those of them whose forward of the stage runs on the actor before it:
  /// the outputs the operation sees (none on shared and sync stages).
  llvm::SmallVector<int64_t> outputs;
  /// The instruction's attributes, encoded.
  std::string attrs;
};
using ExecInstances = llvm::DenseMap<mlir::Operation *, ExecInstance>;

/// The text of docs/Runtime.md for `schedule` (sized by `model` where
/// given, `dp` replicas, the runtime's `seed`), or a diagnostic at what the
/// runtime (its `backend`) cannot run; `instances` gets what the runtime
/// needs of each flexpipe.exec.
mlir::FailureOr<std::string> describeForRuntime(ScheduleOp schedule,
                                                const sched::ModelConfig *model,
                                                int64_t dp, int64_t seed,
                                                RuntimeBackend backend,
                                                ExecInstances &instances);

} // namespace flexpipe

#endif // FLEXPIPE_CONVERSION_FLEXPIPETOEMITC_RUNTIMEDESCRIPTION_H
