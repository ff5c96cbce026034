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

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace flexpipe {

#define GEN_PASS_DECL
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "flexpipe/Dialect/FlexPipe/Transforms/Passes.h.inc"

/// Options of the spec-to-schedule pipeline.
struct SpecToScheduleOptions
    : public mlir::PassPipelineOptions<SpecToScheduleOptions> {
  Option<std::string> timeModel{
      *this, "time-model",
      llvm::cl::desc("Scheduling time model: step or cost"),
      llvm::cl::init("step")};
  Option<std::string> stepRule{
      *this, "step-rule",
      llvm::cl::desc("Algorithm 1's step function: next-type (a failed fetch "
                     "moves on to the next instruction type) or literal (as "
                     "the paper writes it: the first non-empty reorder queue "
                     "decides)"),
      llvm::cl::init("next-type")};
  Option<std::string> balance{
      *this, "balance",
      llvm::cl::desc("Partition: layers (even) or cost (balanced FLOPs)"),
      llvm::cl::init("layers")};
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
  Option<std::string> channels{
      *this, "channels",
      llvm::cl::desc("What verify-schedule takes as one FIFO channel: stage "
                     "(sender, receiver, kind, sending stage) or pair "
                     "(sender and receiver: untagged runtimes)"),
      llvm::cl::init("stage")};
};

/// partition -> place -> schedule -> [split-backward -> gradient-separation]
/// -> insert-comm -> [async-comm] -> verify-schedule: a spec becomes a
/// verified schedule; the bracketed passes act on the schedules whose spec
/// asks for them with flexpipe.optimize. Used by flexpipe-opt
/// (`--flexpipe-spec-to-schedule`) and flexpipe-compile alike.
void buildSpecToSchedulePipeline(mlir::OpPassManager &pm,
                                 const SpecToScheduleOptions &options);

/// Registers every FlexPipe pass and pipeline with the global registry.
void registerFlexPipePassesAndPipelines();

} // namespace flexpipe

#endif // FLEXPIPE_DIALECT_FLEXPIPE_TRANSFORMS_PASSES_H
