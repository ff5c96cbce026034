//===- PipelineSpec.h - The spec level as plain C++ -------------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// What a `flexpipe.pipeline` says, without IR: the schedule pass fills one
// from the dialect, the tuner builds them directly. buildProblem() resolves
// partition, placement, stage numbering, the stage DAG, per-actor priorities
// and in-flight limits into a scheduler Problem.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_PIPELINESPEC_H
#define FLEXPIPE_SCHEDULING_PIPELINESPEC_H

#include "flexpipe/Scheduling/CostModel.h"
#include "flexpipe/Scheduling/Placement.h"
#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/Scheduler.h"
#include "flexpipe/Scheduling/StatementError.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace flexpipe::sched {

struct ModuleSpec {
  std::string name;
  int64_t layers = 1;
  PlacementSpec placement;
  /// Layers per stage of one direction; empty for an even split.
  std::vector<int64_t> partition;
  /// Modules whose last stage feeds this module's first stage.
  std::vector<int32_t> inputs;
  /// Shared stages: module-local stage index -> the actors sharing it.
  std::vector<std::pair<int64_t, std::vector<int64_t>>> shared;
  /// The paper's MLLM placement: the token embedding and the LM head with
  /// the loss become two extra stages per direction, each shared by all of
  /// the module's actors and split along the vocabulary; the head's parts
  /// exchange loss statistics in a collective after each forward. The
  /// module's own stages then hold transformer layers only.
  bool vocabParallel = false;
};

/// One priority statement; unset fields leave the previous value.
struct PrioritySpec {
  int32_t module = -1;         ///< -1: the whole pipeline
  std::vector<int64_t> actors; ///< empty: every actor of the scope
  std::optional<Cttp> cttp;
  int64_t fwdUnit = 1, bwdUnit = 1; ///< with cttp
  std::optional<StagePriority> fwd, bwd;
  /// A plugin priority (register_new_priority) replacing the step function
  /// of the scope's actors; empty for none. Its registered name tells two
  /// scopes' priorities apart.
  PriorityFunction custom;
  std::string customName;
};

/// A registered stage (flexpipe.stage): holds no layers, lives on `actors`.
struct RegisteredStageSpec {
  std::string name;
  std::vector<int64_t> actors;
};

/// A registered instruction (flexpipe.instruction).
struct InstructionSpec {
  std::string name;
  InstRuntime runtime = InstRuntime::Exec;
  /// Collectives only: posted without blocking (InstMode::Async).
  bool async = false;
  /// Where it is attached: a registered stage (registeredStage >= 0) or a
  /// module stage (module, stage: module-local, normalized).
  int32_t registeredStage = -1;
  int32_t module = -1;
  int64_t stage = 0;
  int64_t prev = 1, next = 1, unit = 1;
};

enum class InflightScope { Global, PerStage, PerActor };

/// One in-flight statement with its limits already evaluated: one entry for
/// Global, one per stage / actor of the scope otherwise.
struct InflightSpec {
  int32_t module = -1; ///< -1: the whole pipeline
  InflightScope scope = InflightScope::Global;
  std::vector<int64_t> limits;
};

/// (srcKind, module stage) before (dstKind, module stage), per micro-batch.
/// An end that is a registered instruction (srcInst / dstInst >= 0, an
/// index into PipelineSpec::instructions) ignores its kind and stage.
struct DependencySpec {
  CompKind srcKind;
  int32_t srcModule;
  int64_t srcStage; ///< module-local, normalized
  CompKind dstKind;
  int32_t dstModule;
  int64_t dstStage;
  int32_t srcInst = -1, dstInst = -1;
};

struct PipelineSpec {
  int32_t actors = 1;
  int32_t microbatches = 1;
  std::vector<ModuleSpec> modules;
  std::vector<PrioritySpec> priorities;
  std::vector<InflightSpec> inflight;
  std::vector<DependencySpec> dependencies;
  std::vector<RegisteredStageSpec> registeredStages;
  std::vector<InstructionSpec> instructions;
  /// Plugin check functions (register_new_checkfunc), and their names (as
  /// many, or none).
  std::vector<CheckFunction> checks;
  std::vector<std::string> checkNames;
  bool splitBackward = false;
  /// Cost-model durations per layer of a stage, per CompKind (fwd, bwd,
  /// igrad, wgrad). Used by TimeModel::Cost until a cost model provides
  /// real ones.
  double costPerLayer[kNumCompKinds] = {1, 2, 1, 1};
  /// When both are set, TimeModel::Cost uses the cost model's durations per
  /// stage (embedding and LM head included) instead of costPerLayer. The
  /// model must have a module of each spec module's name.
  const ModelConfig *model = nullptr;
  const ClusterConfig *cluster = nullptr;
};

/// Where a module's stages ended up.
struct ModuleLayout {
  int32_t firstStage = 0; ///< global id of its stage 0
  ModulePlacement placement;
  std::vector<int64_t> layersPerStage; ///< one direction
  /// Vocabulary parallelism: per direction, the global ids of the embedding
  /// and head stages (they follow the module's own stages); empty otherwise.
  std::vector<int32_t> embeddingStages, headStages;
};

struct BuiltProblem {
  Problem problem;
  std::vector<ModuleLayout> modules;
  int32_t numStages = 0;
  /// The stage DAG in global stage ids (forward direction).
  std::vector<std::pair<int32_t, int32_t>> stageEdges;
  /// Global ids of stages that run on several actors.
  std::vector<int32_t> sharedStages;
  /// What each stage holds (module index into the spec's modules, layers,
  /// embedding / head), and the module names; registered stages follow the
  /// modules' stages, and their names follow the module names.
  std::vector<StageMeta> stageMeta;
  std::vector<std::string> moduleNames;
};

/// Resolves a spec into a scheduler problem. Errors name what is wrong.
llvm::Expected<BuiltProblem> buildProblem(const PipelineSpec &spec);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_PIPELINESPEC_H
