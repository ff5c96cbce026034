//===- Lowering.h - From a spec's problem to the program that runs -*- C++ -*-//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The one path from a built problem (buildProblem) to the per-actor program
// that runs: the scheduler (CSSR + Algorithm 1), the program's costs, and
// finishProgram (the bubble optimizations the spec asks for, then
// communication). -flexpipe-schedule and the tuner both call lowerProblem,
// so a spec compiles to the program the tuner evaluated, and the program is
// built once: -flexpipe-spec-to-schedule writes it to IR at the end.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_LOWERING_H
#define FLEXPIPE_SCHEDULING_LOWERING_H

#include "flexpipe/Scheduling/GradientSeparation.h"
#include "flexpipe/Scheduling/PipelineSpec.h"

#include <limits>
#include <optional>

namespace flexpipe::sched {

/// The bubble optimizations a spec asks for (flexpipe.optimize), as the
/// spec-to-schedule pipeline applies them after scheduling.
struct BubbleOptimizations {
  bool splitBackward = false;
  /// Gradient separation (implies splitBackward).
  std::optional<SeparationOptions> separation;
  /// async_comm: receives posted this many computations early
  /// (postReceivesEarly); 0: off.
  int64_t asyncLookahead = 0;
};

/// What becomes of a scheduled program (toProgram's) before it runs: the
/// split, separation priced by `costs`, insertCommunication and early
/// receives, as `opts` asks. Fails with separation's error. Where
/// separation ran and `separation` is not null, its figures go there (with
/// an empty program: the separated one is `program`).
llvm::Error finishProgram(Program &program, const SimCosts &costs,
                          const BubbleOptimizations &opts,
                          SeparationResult *separation = nullptr);

/// How lowerProblem prices and finishes a problem. Every pointer must
/// outlive the call.
struct LoweringOptions {
  TimeModel timeModel = TimeModel::Step;
  /// The costs: a model and a cluster (`cluster->jobDevices`: the job's
  /// ranks, pp x dp), with a profile's durations over them; a profile
  /// alone; or neither (programCosts without files, by `timeModel`).
  const ModelConfig *model = nullptr;
  const ClusterConfig *cluster = nullptr;
  const Profile *profile = nullptr;
  /// Data-parallel replicas: gradient separation prices messages on replica
  /// 0's devices (replicaDevices); the cost model's judge runs every
  /// replica and takes the slowest (runSlowestReplica), as reports do.
  int64_t dp = 1;
  /// Whether the program is finished (finishProgram with `bubbles`); false:
  /// toProgram's compute-only program (-flexpipe-schedule on its own). The
  /// cost model's choice between its orders judges each finished either way.
  bool finish = true;
  BubbleOptimizations bubbles;
  /// Whether LoweredProgram::costs is wanted (the tuner simulates with it).
  bool wantCosts = false;
  /// schedule()'s cutoff (cost model only).
  double cutoff = std::numeric_limits<double>::infinity();
};

/// An extra dependency between two computations that a program does not
/// keep when it runs.
struct BrokenDependency {
  /// The spec's dependency (PipelineSpec::dependencies).
  int32_t dependency = -1;
  std::string message;
};

/// The first extra dependency of `problem` (built as `program`'s schedule
/// was), between computations or between a computation and a registered
/// instruction (an exec or a collective), that `program` does not keep: for
/// some
/// micro-batch its source does not happen before its destination through
/// program order, messages and collectives (HappensBefore), as when the two
/// run on actors that exchange nothing, or when the split backward's
/// weight gradients were moved after scheduling. A program without
/// communication is checked as insertCommunication would make it.
std::optional<BrokenDependency> brokenDependency(const Problem &problem,
                                                 const Program &program);

/// A global in-flight limit that a program does not keep when it runs.
struct LooseLimit {
  /// The spec's in-flight statement (PipelineSpec::inflight).
  int32_t inflight = -1;
  std::string message;
};

/// The first global in-flight limit of `problem` that `program` may not
/// keep: some micro-batch may enter (its first forward on one of the
/// limit's sources) while `limit` others are in flight, in some timing that
/// program order, messages and collectives allow (HappensBefore). The
/// scheduler counts the limit in its own timing; a limit whose sources are
/// on one actor that actor's program keeps, but one whose sources are on
/// several (a bidirectional module, two towers) only holds where messages
/// make the actors wait. Each actor's count is exact over the prefixes of
/// its program the order allows; their sum may count states the actors
/// cannot be in together (it agreed with an exhaustive search of the
/// programs' states on 480 bidirectional, vocabulary-parallel and two-tower
/// specs). A program without communication is checked as
/// insertCommunication would make it. Linear in the program per source
/// actor.
std::optional<LooseLimit> looseGlobalLimit(const Problem &problem,
                                           const Program &program);

struct LoweredProgram {
  /// The scheduler's result. When it failed (schedule.ok false: the error,
  /// the waiting actors, or a cut) nothing below is set.
  ScheduleResult schedule;
  /// Set where `program` does not keep an extra dependency of the problem
  /// (brokenDependency); unfinished (LoweringOptions::finish false), also
  /// where the program the bubble optimizations will make of it with these
  /// costs does not.
  std::optional<BrokenDependency> broken;
  /// Unfinished, where only the program that gradient separation makes with
  /// its pass's default costs (the step model, no files) does not keep one.
  std::optional<BrokenDependency> brokenByDefaults;
  /// Set where `program` does not keep a global in-flight limit
  /// (looseGlobalLimit); not checked after gradient separation, which
  /// bounds memory instead of in-flight counts.
  std::optional<LooseLimit> loose;
  Program program;
  /// The program's costs, where finishing or the caller needed them.
  std::optional<SimCosts> costs;
  /// Gradient separation's figures, where it ran (`program` is its result;
  /// this one's own program is left empty).
  std::optional<SeparationResult> separation;
};

/// The compute-only program of a schedule of `built` (toProgram with the
/// stages' metadata).
Program programOf(const BuiltProblem &built, const ScheduleResult &schedule);

/// A part's durations under a run's profile: the measured ones where it
/// lists the part's stage, else the part's own (the cost model's, with a
/// model and a cluster: `analytic`) or one unit each (a profile alone), as
/// the simulation prices them (programCosts).
Durations profiledDurations(const StagePart &part, const Profile &profile,
                            bool analytic);

/// Schedules `built.problem` (its step rule as set) and lowers the result as
/// `options` says. With a profile, the cost time model schedules with its
/// durations (profiledDurations) and judges the order of the problem's own
/// durations too. A schedule that cannot be made is reported in
/// `out.schedule`, not as an error; the error is for costs that cannot be
/// priced and a failed gradient separation.
llvm::Error lowerProblem(const BuiltProblem &built,
                         const LoweringOptions &options, LoweredProgram &out);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_LOWERING_H
