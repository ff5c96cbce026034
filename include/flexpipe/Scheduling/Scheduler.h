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

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// Plugins include this header without LLVM's (docs/Plugins.md): validate()
// names llvm::Error without needing its definition here.
namespace llvm {
class Error;
} // namespace llvm

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
  /// Durations per CompKind for the cost time model (a Durations).
  std::array<double, kNumCompKinds> cost = {1, 2, 1, 1};
  /// In-flight limit of this stage (forwards not yet released).
  int64_t inflightLimit = kNoLimit;
  /// Whether this part's forwards count against the actor's and the global
  /// in-flight limits. False for the slices of a vocabulary-parallel
  /// embedding or head, which every actor of the pipeline runs for every
  /// micro-batch beside its own stages.
  bool countsInflight = true;
};

/// A limit on micro-batches in flight in a group of pipelines. A micro-batch
/// counts once, however many sources it flows through: from its first
/// forward on one of `sources` until its backward (weight gradient when the
/// backward is split) has completed on every source it flows through.
struct GlobalLimit {
  int64_t limit = kNoLimit;
  std::vector<int32_t> sources; ///< part indices
  /// The spec's statement (PipelineSpec::inflight), or -1.
  int32_t inflight = -1;
};

/// A per-actor in-flight limit of one module (`flexpipe.inflight @m
/// per_actor`): at most `limit` forwards of `parts` (the module's parts on
/// the actor that count in flight) in flight at a time; the actor's other
/// modules do not count against it.
struct ModuleActorLimit {
  int64_t limit = kNoLimit;
  std::vector<int32_t> parts; ///< part indices, all on one actor
};

/// An extra dependency: for every micro-batch that flows through both parts,
/// (srcKind, srcPart) is scheduled before (dstKind, dstPart).
struct ExtraDependency {
  CompKind srcKind;
  int32_t srcPart;
  CompKind dstKind;
  int32_t dstPart;
  /// The spec's dependency it comes from (PipelineSpec::dependencies).
  int32_t source = -1;
};

/// How the member actors of a registered instruction run an instance.
enum class InstMode : uint8_t {
  /// Each member runs its own instance, like a computation (a user
  /// operation bound to the instruction).
  Local,
  /// A blocking collective: a member joins as soon as it is free and waits
  /// there until the last member joins; then it runs on all of them.
  Collective,
  /// An asynchronous collective: each member posts it (taking no time) and
  /// goes on; it completes `duration` after the last member posted, and the
  /// members' dependents wait for that.
  Async,
};

/// What a registered instruction becomes in a program.
enum class InstRuntime : uint8_t { Exec, AllGather, Gather };

/// A computation type on a stage part: one end of a dependency.
struct PartKind {
  CompKind kind;
  int32_t part;
  /// The spec's dependency it comes from (PipelineSpec::dependencies), or
  /// -1.
  int32_t source = -1;
};

/// A registered instruction (the paper's register_new_inst, attached to a
/// stage by register_new_stage, its dependencies set by set_cssr_deps).
///
/// Its instances cover the micro-batches [mbBegin, mbEnd) of its sources,
/// `prev` at a time: instance i covers [mbBegin + i prev, mbBegin + (i+1)
/// prev) and may run once every source item of the micro-batches before
/// that range's end has completed (and instance i - 1 has). A dependent item
/// of micro-batch j waits for instance (j - mbBegin) / `next`; a dependent on
/// a member actor of a Local instruction waits for that member's instance
/// only. Members take ready instances before anything else, `unit` at a time
/// (an actor starts once `unit` of its instances are ready, or all that are
/// left). Every member meets the instances in the same order, so a single
/// collective cannot deadlock the programs.
struct Registered {
  std::string name;
  int32_t stage = 0;           ///< global stage id written into programs
  std::vector<int32_t> actors; ///< members, ascending, distinct
  InstMode mode = InstMode::Collective;
  InstRuntime runtime = InstRuntime::AllGather;
  int32_t root = -1; ///< Gather: the receiving member
  int64_t prev = 1, next = 1, unit = 1;
  double duration = 0;          ///< per instance, cost time model
  std::vector<PartKind> after;  ///< sources
  std::vector<PartKind> before; ///< dependents
};

struct Problem;

/// One schedulable item as hooks see it.
struct ReadyItem {
  CompKind kind;
  int32_t part;  ///< index into Problem::parts
  int32_t stage; ///< its global stage id
  int32_t mb;
};

/// What hooks see of the scheduler's state on one actor at one step.
struct StepView {
  const Problem *problem = nullptr;
  int32_t actor = 0;
  double now = 0;        ///< the step (step model) or time (cost model)
  int64_t scheduled = 0; ///< items this actor has run so far
  int64_t inflight = 0;  ///< micro-batches in flight on this actor
  /// The last item this actor ran (kind, part, stage, mb), if any.
  bool hasLast = false;
  ReadyItem last{CompKind::Fwd, -1, -1, -1};
};

/// A check function (register_new_checkfunc): consulted for every item the
/// scheduler considers fetching; returning false vetoes it for this step.
using CheckFunction = std::function<bool(const StepView &, const ReadyItem &)>;

/// A priority (register_new_priority): the actor's step function. Gets every
/// item this actor may run now (dependencies met, in-flight limits and check
/// functions passed), in the order of the reorder queues (forward, then
/// backward or input-gradient, then weight-gradient; stages in breadth-first
/// order, micro-batches ascending), and returns the index of the item to run
/// or -1 to stay idle this step. Registered instructions are taken before it
/// is asked.
using PriorityFunction =
    std::function<int(const StepView &, const std::vector<ReadyItem> &)>;

/// What a plugin hook that threw said, on the thread that called it. The
/// registry's wrappers (flexpipe/Plugin.h) catch the exception, record it
/// here and give a neutral answer (a veto, staying idle, a limit of 0); the
/// engine and the in-flight rule's verifier then stop with the message.
void setHookFailure(std::string message);
/// The recorded failure, cleared; empty when no hook threw.
std::string takeHookFailure();

/// How Algorithm 1's StepFunction treats a fetch that finds nothing
/// schedulable in a non-empty reorder queue (an in-flight limit, a stage
/// traversal interval waiting at its stage, or a check function veto).
enum class StepRule : uint8_t {
  /// FlexPipe's default: the actor goes on to the next instruction type in
  /// its computation-type order, so a held-back forward never idles an actor
  /// that has a backward ready.
  NextType,
  /// The paper's Algorithm 1 as written: the first type whose reorder queue
  /// is non-empty decides; a failed fetch there is a bubble.
  Literal,
};

struct Problem {
  int32_t numActors = 0;
  int32_t numMicrobatches = 0;
  std::vector<StagePart> parts;
  /// Forward edges between parts (the stage DAG); backward runs them reversed.
  std::vector<std::pair<int32_t, int32_t>> edges;
  /// Split every backward into Igrad + Wgrad.
  bool splitBackward = false;
  std::vector<ActorPolicy> policies; ///< one per actor
  std::vector<int64_t> actorLimits;  ///< one per actor (kNoLimit: none)
  std::vector<ModuleActorLimit> moduleActorLimits;
  std::vector<GlobalLimit> globalLimits;
  std::vector<ExtraDependency> extraDependencies;
  std::vector<Registered> registered;
  /// Check functions every fetch consults (all must agree), and the names
  /// they were registered under, for diagnostics (as many, or none).
  std::vector<CheckFunction> checks;
  std::vector<std::string> checkNames;
  /// Per actor: a priority replacing the built-in step function, or empty;
  /// and its name, for diagnostics (as many, or none).
  std::vector<PriorityFunction> customPriorities;
  std::vector<std::string> customPriorityNames;
  StepRule stepRule = StepRule::NextType;
};

enum class TimeModel {
  /// The paper's: every instruction takes one step; an item scheduled in step
  /// t becomes visible to its successors in step t + 1.
  Step,
  /// Every actor picks its next instruction when it becomes free, with the
  /// parts' durations; the step model's order, timed under the same
  /// durations (or judged faster by a fuller model, schedule()'s `judge`),
  /// is kept instead when it finishes earlier, so the cost model is never
  /// slower than the step model. Identical to Step (scaled) when every
  /// duration is the same.
  Cost,
};

/// One scheduled computation, or one member's instance of a registered
/// instruction.
struct ScheduledItem {
  CompKind kind;
  int32_t part; ///< -1 for a registered instruction
  /// The micro-batch; for a registered instruction the first micro-batch
  /// its instance covers.
  int32_t mb;
  double start, end;
  /// The registered instruction (index into Problem::registered) this item
  /// is an instance of, or -1 for a computation.
  int32_t inst = -1;
  bool isRegistered() const { return inst >= 0; }
};

struct ScheduleResult {
  bool ok = false;
  /// Per actor, the computations in execution order.
  std::vector<std::vector<ScheduledItem>> actors;
  double makespan = 0;
  /// On failure: a one-sentence summary and one line per waiting actor.
  std::string error;
  std::vector<std::string> waits;
  /// The failure is schedule()'s cutoff: no order it tried could end by it
  /// (whether the problem can be scheduled at all was not decided).
  bool cut = false;
  /// The failure is a plugin hook's (it threw, or answered out of range):
  /// `error` says which; no other order is tried in its place.
  bool hookFailed = false;
  /// The failure is an extra dependency (ExtraDependency::source) that
  /// closes a cycle with the stage graph: `error` names the cycle; -1 for
  /// any other failure.
  int32_t cycleDependency = -1;
};

/// The micro-batches [first, second) the instances of registered
/// instruction `r` cover (its sources' range; every micro-batch without
/// sources).
std::pair<int32_t, int32_t> registeredRange(const Problem &problem, int32_t r);
/// How many instances registered instruction `r` has: its range in blocks
/// of `prev`.
int64_t registeredInstances(const Problem &problem, int32_t r);

/// Whether the computation (kind, part, mb) waits for the instance of
/// registered instruction `r` that begins at micro-batch `first`.
bool waitsForInstance(const Problem &problem, int32_t r, int32_t first,
                      CompKind kind, int32_t part, int32_t mb);

/// Checks that a problem is well formed (indices in range, one policy and
/// limit per actor, positive units and intervals, dependencies between
/// parts that exist). Fails with the first problem found. (A cycle of
/// dependencies is diagnosed where the schedule stops: ScheduleResult.)
llvm::Error validate(const Problem &problem);

/// Whether two schedules of one problem run the same items in the same
/// order on every actor.
bool sameOrder(const ScheduleResult &a, const ScheduleResult &b);

/// The time of a schedule of the problem under a fuller model than the
/// scheduler's (the simulator's: messages, ranks sharing cores), or nothing
/// where it has no opinion.
using ScheduleJudge =
    std::function<std::optional<double>(const ScheduleResult &)>;

/// Runs CSSR and the step function of Algorithm 1 to completion. Never
/// loops: when no actor can move and nothing is in flight, it stops and
/// reports which actors wait on what. With the cost model it also times the
/// step model's order and keeps the faster; `judge`, where given and it has
/// an opinion on both, decides which is faster.
///
/// `cutoff` (cost model only): a caller that has no use for a schedule
/// ending after it (the tuner, once it knows enough faster candidates).
/// Every run is given up as soon as some actor's clock plus the computation
/// it has left is past it, and if none ends by it the result fails with
/// ScheduleResult::cut.
ScheduleResult
schedule(const Problem &problem, TimeModel model,
         const ScheduleJudge &judge = nullptr,
         double cutoff = std::numeric_limits<double>::infinity());

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_SCHEDULER_H
