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
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Scheduling/Lowering.h"
#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/Simulator.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"

#include <memory>
#include <utility>
#include <vector>

namespace flexpipe {

/// Reads a verified pipeline into the library's spec. Emits a diagnostic and
/// fails on constructs the scheduler does not handle yet.
mlir::FailureOr<sched::PipelineSpec> readPipelineSpec(PipelineOp pipeline);

/// Emits `error`, a failure of the library on `pipeline`'s spec, as an
/// error at the statement it is about (sched::StatementError: a module, a
/// registered instruction, a dependency, the optimize request) or else at
/// the pipeline.
void emitSpecError(PipelineOp pipeline, llvm::Error error);

/// A schedule as flat programs, with the op each entry was read from.
struct ScheduleProgram {
  sched::Program program;
  std::vector<std::vector<mlir::Operation *>> ops;
};
ScheduleProgram readSchedule(ScheduleOp schedule);

/// sched::verify on a schedule read with readSchedule (without `replay`,
/// sched::verifyComputations, which compute-only schedules pass): a failure
/// is reported at the op it names, with a note at each other one.
/// -flexpipe-verify-schedule is this; the passes that would otherwise time,
/// separate or lower an invalid schedule (simulate and convert-to-emitc;
/// gradient-separation, on compute-only schedules, without `replay`) call it
/// first.
mlir::LogicalResult verifyRead(ScheduleOp schedule, const ScheduleProgram &read,
                               sched::ChannelRule rule, bool replay = true);

/// Reports `problem` (of `read.program`) as verifyRead does: an error at
/// the op it names first (the schedule when none), a note at each other.
/// Always failure().
mlir::LogicalResult reportFailure(ScheduleOp schedule,
                                  const ScheduleProgram &read,
                                  const sched::VerifyFailure &problem);

/// The `stage_info` of `program`'s stages (what each holds, for the cost
/// model and the runtime); null when the program does not say.
mlir::ArrayAttr stageInfoAttr(mlir::Builder &builder,
                              const sched::Program &program);

/// Creates a flexpipe.schedule named `name` at the builder's insertion point
/// holding `program`: its sizes, its edges when they are not the default
/// chain, its shared stages, its stage_info (when the program has stage
/// metadata) and every actor's instructions, tokens included. The one writer
/// of a whole program (the scheduler's output and imported schedules). Each
/// instruction is at `locate(op)` where given, else at `loc`.
ScheduleOp createSchedule(
    mlir::OpBuilder &builder, mlir::Location loc, mlir::StringAttr name,
    const sched::Program &program,
    llvm::function_ref<mlir::Location(const sched::ProgOp &)> locate = {});

/// Rebuilds each actor's body in the order of `program`: entries read from
/// an op of the same kind (and with a token where it has one) move that op,
/// others are created, at the location of the op their `source` names when
/// they have one; waits find the tokens of the ops kept or created before
/// them. Ops no entry refers to any more are erased, and so is a
/// `flexpipe.simulation` prediction (-flexpipe-simulate) of the old program.
void rewriteSchedule(ScheduleOp schedule, const ScheduleProgram &read,
                     const sched::Program &program);

/// Whether a pass should transform `schedule`: always, unless
/// `requestedOnly`, in which case only when the spec's `flexpipe.optimize`
/// (kept on the schedule as the `flexpipe.optimize` attribute) names
/// `optimization`.
bool shouldOptimize(ScheduleOp schedule, llvm::StringRef optimization,
                    bool requestedOnly);

/// The stash-and-insert settings a `flexpipe.optimize` request sets
/// (memory_bound, max_rounds) over `options`; a null request sets nothing.
void applySeparationRequest(mlir::DictionaryAttr requested,
                            sched::SeparationOptions &options);

/// Records what gradient separation did on `schedule` (its
/// `flexpipe.separation` attribute: times and peaks before and after, the
/// memory bound, the weight gradients stashed, the strategy, the costs'
/// unit).
void setSeparationFigures(ScheduleOp schedule,
                          const sched::SeparationResult &result,
                          llvm::StringRef unit);

/// The bubble optimizations `requested` (a `flexpipe.optimize` request, or
/// null) asks for, with their passes' defaults, as -flexpipe-schedule{finish}
/// applies them (sched::finishProgram) and judges the cost model's orders.
/// Separation attempts run on `pool` when given.
sched::BubbleOptimizations
requestedOptimizations(mlir::DictionaryAttr requested,
                       llvm::ThreadPoolInterface *pool);

/// The model file a pass sizes with, the same way: `shared` when its creator
/// read it, else the file the option names (none: std::nullopt).
mlir::FailureOr<std::optional<sched::ModelConfig>>
passModel(mlir::MLIRContext *context, llvm::StringRef passName,
          const sched::ModelConfig *shared, llvm::StringRef modelFile);

/// The cost files a pass prices with: `shared` when its creator read them
/// once for the whole pipeline (flexpipe-compile), else the files the pass
/// options name, read now. Fails on bad files with an error where the file
/// has it (FILE:LINE:COLUMN), or on options that do not go together.
mlir::FailureOr<std::shared_ptr<const sched::CostInputs>>
passCostInputs(mlir::MLIRContext *context, llvm::StringRef passName,
               std::shared_ptr<const sched::CostInputs> shared,
               llvm::StringRef modelFile, llvm::StringRef clusterFile,
               llvm::StringRef profileFile);

/// Refuses pipelines and schedules in modules nested in `root`, with an
/// error at each: the passes read those of `root` only, and one nested
/// deeper would pass unread (a deadlocking schedule "verified"). A pass that
/// works on schedules names itself (`schedulePass`): a module that holds
/// specs and no schedule is then refused at its first spec (the pass would
/// leave it as it is, "verified", "simulated" or "lowered").
mlir::LogicalResult checkTopLevel(mlir::ModuleOp root,
                                  llvm::StringRef schedulePass = {});

/// An error about a pass's options or the files they name, not the IR: no
/// location, and no dump of the module (an error at the module op prints
/// all of it). The caller writes the message, starting with "-pass-name".
mlir::InFlightDiagnostic optionError(mlir::MLIRContext *context);

/// Whether a pass's `dp` option is a replica count the tools handle (1 to
/// kMaxActors, InputLimits.h); emits an unlocated error naming the pass
/// otherwise.
mlir::LogicalResult checkReplicas(mlir::MLIRContext *context,
                                  llvm::StringRef passName, int64_t dp);

/// The costs a pass times a schedule with (sched::programCosts: the cost
/// model's, the profile's, or unit costs by `withoutFiles`), messages priced
/// on sched::replicaDevices(actors, dp). Emits an error at `at` and fails on
/// a bad dp or costs that do not fit the program.
mlir::FailureOr<sched::SimCosts>
resolveCosts(mlir::Operation *at, llvm::StringRef passName,
             const sched::Program &program, const sched::CostInputs &inputs,
             int64_t dp, sched::TimeModel withoutFiles);

} // namespace flexpipe

#endif // FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_UTILS_H
