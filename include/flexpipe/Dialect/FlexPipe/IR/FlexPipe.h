//===- FlexPipe.h - FlexPipe dialect ----------------------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The one header that declares the `flexpipe` dialect: its enums, attributes,
// types, interfaces and operations.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_DIALECT_FLEXPIPE_IR_FLEXPIPE_H
#define FLEXPIPE_DIALECT_FLEXPIPE_IR_FLEXPIPE_H

#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Placement.h"
#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/Scheduler.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"

#include <optional>

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOpsDialect.h.inc"

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOpsTypes.h.inc"

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeInterfaces.h.inc"

#define GET_OP_CLASSES
#include "flexpipe/Dialect/FlexPipe/IR/FlexPipeOps.h.inc"

namespace flexpipe {

/// The dialect's enums (ODS, FlexPipeAttrs.td) and the scheduling library's
/// (plain C++) list the same enumerators in the same order, so one cast
/// converts; the checks below keep the two lists in step.
template <typename To, typename From> constexpr To toSched(From value) {
  return static_cast<To>(static_cast<int>(value));
}
#define FLEXPIPE_SAME_ENUMERATOR(From, To, Name)                               \
  static_assert(static_cast<int>(From::Name) == static_cast<int>(To::Name),    \
                #From "::" #Name " and " #To "::" #Name " differ")
FLEXPIPE_SAME_ENUMERATOR(PlacementKind, sched::PlacementKind, OneToOne);
FLEXPIPE_SAME_ENUMERATOR(PlacementKind, sched::PlacementKind, Circular);
FLEXPIPE_SAME_ENUMERATOR(PlacementKind, sched::PlacementKind, VShape);
FLEXPIPE_SAME_ENUMERATOR(PlacementKind, sched::PlacementKind, Explicit);
static_assert(getMaxEnumValForPlacementKind() == 3);
FLEXPIPE_SAME_ENUMERATOR(CttpKind, sched::Cttp, BwdFirst);
FLEXPIPE_SAME_ENUMERATOR(CttpKind, sched::Cttp, FwdFirst);
FLEXPIPE_SAME_ENUMERATOR(CttpKind, sched::Cttp, Interleaved);
static_assert(getMaxEnumValForCttpKind() == 2);
FLEXPIPE_SAME_ENUMERATOR(StageOrder, sched::StageOrder, BreadthFirst);
FLEXPIPE_SAME_ENUMERATOR(StageOrder, sched::StageOrder, DepthFirst);
static_assert(getMaxEnumValForStageOrder() == 1);
FLEXPIPE_SAME_ENUMERATOR(InflightScope, sched::InflightScope, Global);
FLEXPIPE_SAME_ENUMERATOR(InflightScope, sched::InflightScope, PerStage);
FLEXPIPE_SAME_ENUMERATOR(InflightScope, sched::InflightScope, PerActor);
static_assert(getMaxEnumValForInflightScope() == 2);
// A registered instruction's `compute` kind runs a runtime operation (exec).
static_assert(static_cast<int>(RegisteredKind::Compute) ==
              static_cast<int>(sched::InstRuntime::Exec));
FLEXPIPE_SAME_ENUMERATOR(RegisteredKind, sched::InstRuntime, AllGather);
FLEXPIPE_SAME_ENUMERATOR(RegisteredKind, sched::InstRuntime, Gather);
static_assert(getMaxEnumValForRegisteredKind() == 2);
#undef FLEXPIPE_SAME_ENUMERATOR

/// Counts in a spec (stage traversal intervals, scheduling units) may be
/// expressions of the pipeline's size: integers, the symbols `pp` (actors),
/// `s` (stages), `m` (micro-batches) and `round` (micro-batches per round,
/// microbatchesPerRound), `+`, `-`, `*`, `floordiv`, `ceildiv`, `mod` and
/// parentheses, e.g. `pp`, `2 * pp - 1`. They are held as affine maps
/// `()[pp, s, m, round] -> (count)`.
constexpr unsigned kCountSymbols = 4;
/// Micro-batches per round when m micro-batches go through pp actors in
/// rounds (interleaved 1F1B takes one round per chunk at a time): the m
/// micro-batches are split into the most rounds (at most m floordiv pp) whose
/// last, smallest round still holds pp, and a round is m / rounds rounded
/// up. pp when pp divides m, m when m < 2 pp; PyTorch's and Megatron-LM's
/// m / (m floordiv pp) wherever theirs splits m evenly.
int64_t microbatchesPerRound(int64_t pp, int64_t m);
mlir::ParseResult parseCountExpr(mlir::AsmParser &parser,
                                 mlir::AffineMap &count);

/// MLIR folds an affine expression's constants as it builds it, in wrapping
/// arithmetic (`(pp * c1) * c2` becomes `pp * (c1 * c2)`). An expression
/// whose constants (by magnitude, at least 2) and names (2 each) multiply to
/// at most 2^62 folds without wrapping: every product and sum of its parts
/// is at most that. The parsers of counts and in-flight maps feed each
/// constant and name to one budget.
class AffineLiteralBudget {
public:
  /// Counts a constant of magnitude `magnitude`, or a name (std::nullopt).
  /// False once the product passes 2^62.
  bool take(std::optional<uint64_t> magnitude);
  /// The error for `token`, the constant or name that passed the budget, in
  /// `what` ("in-flight affine map", "count").
  static std::string exceeded(llvm::StringRef token, llvm::StringRef what);

private:
  uint64_t product = 1;
};
/// Prints a count in the syntax parseCountExpr reads.
void printCountExpr(llvm::raw_ostream &os, mlir::AffineMap count);
/// The count's value for a pipeline of `pp` actors, `s` stages and `m`
/// micro-batches; std::nullopt when it does not evaluate to an integer (a
/// division by zero).
std::optional<int64_t> evaluateCount(mlir::AffineMap count, int64_t pp,
                                     int64_t s, int64_t m);
/// The values of the symbols pp, s, m and round at a size, as constants to
/// substitute into a count or an in-flight map.
llvm::SmallVector<mlir::AffineExpr> countSymbolValues(mlir::MLIRContext *context,
                                                      int64_t pp, int64_t s,
                                                      int64_t m);

/// The built-in instruction type names that dependency endpoints may use and
/// that registered instructions may not take.
bool isBuiltinInstructionName(llvm::StringRef name);

} // namespace flexpipe

#endif // FLEXPIPE_DIALECT_FLEXPIPE_IR_FLEXPIPE_H
