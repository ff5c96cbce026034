//===- Passes.h - FlexPipe passes and pipelines -----------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_PASSES_H
#define FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_PASSES_H

#include "flexpipe/Dialect/FlexPipe/IR/FlexPipe.h"
#include "flexpipe/Dialect/FlexPipe/Transforms/OptionValues.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Scheduling/Placement.h"
#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/Scheduler.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace flexpipe {

#define GEN_PASS_DECL
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"

/// The passes of flexpipe-compile's pipeline that price schedules, with the
/// cost files read once by their creator (`inputs`; their file options are
/// then not read): it reads --model, --cluster and --profile once and hands
/// them to each.
std::unique_ptr<mlir::Pass>
createPartitionPass(const PartitionPassOptions &options,
                    std::shared_ptr<const sched::CostInputs> inputs);
std::unique_ptr<mlir::Pass>
createSchedulePass(const SchedulePassOptions &options,
                   std::shared_ptr<const sched::CostInputs> inputs);

/// Options of the spec-to-schedule pipeline.
struct SpecToScheduleOptions
    : public mlir::PassPipelineOptions<SpecToScheduleOptions> {
  Option<sched::TimeModel> timeModel{
      *this, "time-model", llvm::cl::desc("Scheduling time model"),
      llvm::cl::init(sched::TimeModel::Step), timeModelValues()};
  Option<sched::StepRule> stepRule{
      *this, "step-rule", llvm::cl::desc("Algorithm 1's step function"),
      llvm::cl::init(sched::StepRule::NextType), stepRuleValues()};
  Option<sched::Balance> balance{
      *this, "balance", llvm::cl::desc("How the partition splits layers"),
      llvm::cl::init(sched::Balance::Layers), balanceValues()};
  Option<std::string> modelFile{
      *this, "model", llvm::cl::desc("Model YAML for the cost time model"),
      llvm::cl::init("")};
  Option<std::string> clusterFile{
      *this, "cluster", llvm::cl::desc("Cluster YAML for the cost time model"),
      llvm::cl::init("")};
  Option<int64_t> dp{*this, "dp",
                     llvm::cl::desc("Data-parallel replicas gradient "
                                    "separation prices messages for (replica "
                                    "0's actor a is device a x dp)"),
                     llvm::cl::init(1)};
  Option<sched::ChannelRule> channels{
      *this, "channels",
      llvm::cl::desc("What verify-schedule takes as one FIFO channel"),
      llvm::cl::init(sched::ChannelRule::PerStage), channelRuleValues()};
};

/// partition -> place -> schedule{finish} -> insert-comm -> verify-schedule:
/// a spec becomes a verified schedule. The scheduled program is finished in
/// memory (the bubble optimizations its spec asks for with
/// flexpipe.optimize, then communication; sched::lowerProblem, as
/// flexpipe-tune evaluates it) and written to IR once. Schedules handed in
/// as IR are taken as they are, but compute-only ones get communication. Used
/// by flexpipe-opt (`--flexpipe-spec-to-schedule`) and flexpipe-compile alike.
/// The cost files are read once, here (or by the caller: `inputs`), and shared
/// by the passes that price; when they cannot be read, the first pass that
/// needs them reports why.
void buildSpecToSchedulePipeline(
    mlir::OpPassManager &pm, const SpecToScheduleOptions &options,
    std::shared_ptr<const sched::CostInputs> inputs = nullptr);

/// Registers every FlexPipe pass and pipeline with the global registry.
void registerFlexPipePassesAndPipelines();

} // namespace flexpipe

#endif // FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_PASSES_H
