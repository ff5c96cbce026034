//===- Scheduler.h - CSSR and the priority-driven scheduler -----*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The paper's computation schedule space representation (CSSR) and actor-aware
// schedule (Algorithm 1), in plain C++ on flat arrays so that the tuner can
// run it thousands of times per second without building IR.
//
// A Problem lists placed stage *parts* (a stage, or one actor's part of a
// shared stage), the forward DAG between them, each actor's priorities and
// the in-flight limits. schedule() turns it into each actor's ordered list of
// computations.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_SCHEDULER_H
#define FLEXPIPE_SCHEDULING_SCHEDULER_H

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace flexpipe::sched {

/// Instruction types of the scheduler's instruction pool (computations).
enum class CompKind : uint8_t {
  Fwd,   ///< FwdPass
  Bwd,   ///< BwdPass (input and weight gradients together)
  Igrad, ///< CompInputGrad
  Wgrad, ///< CompWeightGrad
};
constexpr int kNumCompKinds = 4;
const char *compKindName(CompKind kind);

/// Computation-type traversal priority.
enum class Cttp : uint8_t { BwdFirst, FwdFirst, Interleaved };

/// Direction of a stage traversal priority.
enum class StageOrder : uint8_t { BreadthFirst, DepthFirst };

/// A stage traversal priority: a direction and an optional interval (0 for
/// none: take the first schedulable item in the direction).
struct StagePriority {
  StageOrder order = StageOrder::BreadthFirst;
  int64_t interval = 0;
};

/// The two priorities of one actor.
struct ActorPolicy {
  Cttp cttp = Cttp::BwdFirst;
  int64_t fwdUnit = 1; ///< forward items taken at a time
  int64_t bwdUnit = 1; ///< backward (or input-gradient) items taken at a time
  StagePriority fwd;   ///< traversal of the forward reorder queue
  StagePriority bwd;   ///< traversal of the backward reorder queues
};

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

/// One placed stage part: a stage on one actor (a shared stage has one part
/// per actor).
struct StagePart {
  int32_t stage = 0; ///< global stage id written into schedules
  int32_t actor = 0;
  /// Position along its pipeline (layer order); breadth-first traversal
  /// prefers smaller depths, depth-first larger ones.
  int32_t depth = 0;
  /// Micro-batches [mbBegin, mbEnd) flow through this part (bidirectional
  /// pipelines split the micro-batches between their two directions).
  int32_t mbBegin = 0, mbEnd = 0;
  /// Durations per CompKind for the cost time model.
  double cost[kNumCompKinds] = {1, 2, 1, 1};
  /// In-flight limit of this stage (forwards not yet released).
  int64_t inflightLimit = kNoLimit;
  /// Whether this part's forwards count against the actor's and the global
  /// in-flight limits. False for the slices of a vocabulary-parallel
  /// embedding or head, which every actor of the pipeline runs for every
  /// micro-batch beside its own stages.
  bool countsInflight = true;
};

/// A limit on micro-batches in flight in a group of pipelines: counted from a
/// forward on one of `sources` until that micro-batch's backward there.
struct GlobalLimit {
  int64_t limit = kNoLimit;
  std::vector<int32_t> sources; ///< part indices
};

/// An extra dependency: for every micro-batch that flows through both parts,
/// (srcKind, srcPart) is scheduled before (dstKind, dstPart).
struct ExtraDependency {
  CompKind srcKind;
  int32_t srcPart;
  CompKind dstKind;
  int32_t dstPart;
};

/// A collective that follows the forwards of a group of parts, one per actor
/// (the loss statistics of a vocabulary-parallel head, the paper's
/// SyncWithAllGather). For each micro-batch it becomes ready on every member
/// actor when all members' forwards of that micro-batch are done; a member
/// joins it as soon as it is free (before any other item) and waits there
/// until the last member joins; then it runs for `duration` on all of them
/// (one step in the step model). The members' backwards (or input gradients)
/// of that micro-batch wait for it. Every member thus meets the instances in
/// the same order, so the programs cannot deadlock on it.
struct SyncGroup {
  std::vector<int32_t> parts;
  double duration = 0;
};

struct Problem {
  int32_t numActors = 0;
  int32_t numMicrobatches = 0;
  std::vector<StagePart> parts;
  /// Forward edges between parts (the stage DAG); backward runs them reversed.
  std::vector<std::pair<int32_t, int32_t>> edges;
  /// Split every backward into Igrad + Wgrad.
  bool splitBackward = false;
  std::vector<ActorPolicy> policies;  ///< one per actor
  std::vector<int64_t> actorLimits;   ///< one per actor (kNoLimit: none)
  std::vector<GlobalLimit> globalLimits;
  std::vector<ExtraDependency> extraDependencies;
  std::vector<SyncGroup> syncs;
};

enum class TimeModel {
  /// The paper's: every instruction takes one step; an item scheduled in step
  /// t becomes visible to its successors in step t + 1.
  Step,
  /// Every actor picks its next instruction when it becomes free, with the
  /// parts' durations. Identical to Step when every duration is 1.
  Cost,
};

/// One scheduled computation, or one member's share of a collective.
struct ScheduledItem {
  CompKind kind;
  int32_t part;
  int32_t mb;
  double start, end;
  /// The SyncGroup this item is an instance of (`part` is then the member
  /// part on this actor and `kind` Fwd), or -1 for a computation.
  int32_t sync = -1;
  bool isSync() const { return sync >= 0; }
};

struct ScheduleResult {
  bool ok = false;
  /// Per actor, the computations in execution order.
  std::vector<std::vector<ScheduledItem>> actors;
  double makespan = 0;
  /// On failure: a one-sentence summary and one line per waiting actor.
  std::string error;
  std::vector<std::string> waits;
};

/// Checks that a problem is well formed (indices in range, one policy and
/// limit per actor, positive units and intervals, acyclic dependencies).
/// Returns an empty string or the first problem found.
std::string validate(const Problem &problem);

/// Runs CSSR and the step function of Algorithm 1 to completion. Never
/// loops: when no actor can move and nothing is in flight, it stops and
/// reports which actors wait on what.
ScheduleResult schedule(const Problem &problem, TimeModel model);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_SCHEDULER_H
