//===- Simulator.h - Time, bubbles and memory of a program ------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Replays per-actor programs (after communication insertion) with durations
// per computation and per message: iteration time, busy and idle time and
// bubble ratio per actor, the critical path, peak activation memory and total
// memory per actor. A program is prepared once (receives matched to sends,
// collectives grouped, a dependency order fixed); each run with new costs
// then times that graph on flat arrays, fast enough for the tuner's inner
// loop.
//
// Semantics are those of Program.h: a send costs its sender nothing and its
// message arrives `message time` later; a receive (or the wait of an
// asynchronous one) blocks until arrival; a collective ends when its last
// member arrives, plus its own duration. A computation takes its duration;
// where ranks share a node's cores (SimCosts::coreGroup, a measured
// cluster), those computing at once share the cores and slow each other, so
// it takes longer. Programs are timed as events on the EventCore that the
// scheduler and gradient separation's re-timer use too (one timing engine:
// the rules of arrival, collectives and ties live there and in the helpers
// below). The scheduler's durations see neither messages nor sharing;
// lowerProblem (Lowering.h) lets the simulator choose between its two
// orders wherever a model and a cluster price them.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_SIMULATOR_H
#define FLEXPIPE_SCHEDULING_SIMULATOR_H

#include "flexpipe/Scheduling/CostModel.h"
#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Program.h"

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace flexpipe::sched {

/// Costs of every stage and message.
struct SimCosts {
  /// Per stage: durations of fwd, bwd, igrad, wgrad (CompKind order).
  std::vector<std::array<double, kNumCompKinds>> duration;
  /// Per stage: bytes a micro-batch keeps alive from its forward to its
  /// backward (or input gradient), and parameter/gradient/optimizer bytes.
  std::vector<double> activationBytes, staticBytes;
  /// Per stage: bytes it keeps from its input gradient to its weight
  /// gradient (what the weight gradient reads); a stage not listed keeps
  /// its activations (memoryEffect).
  std::vector<double> weightGradBytes;
  /// Per stage: bytes of each message it sends.
  std::vector<double> messageBytes;
  /// Per (from, to) actor pair: latency (s) and bandwidth (bytes/s, 0 for
  /// messages that take exactly `latency`).
  std::vector<double> latency, bandwidth;
  /// Duration of a collective and of a registered instruction.
  double collectiveTime = 0, execTime = 0;
  /// Per stage: duration of a collective on that stage (the loss statistics
  /// of a vocabulary-parallel head); empty or missing entries take
  /// collectiveTime.
  std::vector<double> collectiveDuration;
  /// Device memory (bytes, 0 for no limit).
  double memoryLimit = 0;
  /// Rendezvous transfers (NCCL, large MPI messages): data moves once both
  /// the send and the receive are posted, so a receive posted early
  /// (-flexpipe-async-comm) overlaps the transfer with computation. When
  /// false (the default, as MPI's eager protocol for the CPU runtime's
  /// message sizes), messages travel as soon as they are sent.
  bool rendezvous = false;
  /// Unit of time for reports ("s" or "steps").
  std::string unit = "steps";
  /// Whether activationBytes and staticBytes are bytes (a model, or a
  /// profile that measured every stage's activations); otherwise counts in
  /// `memoryUnit`.
  bool memoryInBytes = false;
  /// What a memory count is without bytes: "mb", stage-micro-batches (every
  /// stage holds 1 per micro-batch), or "M_B" under layerCosts (the
  /// zero-bubble papers' unit: one micro-batch of an actor holding an
  /// average share of the layers; a stage of half that share holds 1/2).
  std::string memoryUnit = "mb";
  /// Ranks sharing a node (a measured cluster): per actor, its core group
  /// (-1: a core of its own and no contention), per group the cores its
  /// actors have and the node it is on (groupNode; empty: each group a node
  /// of its own), and per group, shape (stageShape) and number n of
  /// computations at once on its node (index n, from 1) the slowdown a
  /// computation of that shape then suffers (caches, memory bandwidth;
  /// missing: 1). While k of a group's and n of its node's computations
  /// run, each of the group's progresses at min(1, cores / k) /
  /// slowdown[shape][n] (processor sharing); messages, waits and collectives
  /// take no core. Empty: every actor computes alone on its own core.
  std::vector<int32_t> coreGroup;
  std::vector<double> groupCores;
  std::vector<int32_t> groupNode;
  std::vector<std::vector<std::vector<double>>> groupSlowdown;
  /// Per stage, the shape its computations are slowed as: its module (a
  /// cluster measures each module's shape's contention apart); empty: 0.
  std::vector<int32_t> stageShape;
  int32_t shapeOf(int32_t stage) const {
    return stage >= 0 && stage < static_cast<int32_t>(stageShape.size())
               ? stageShape[stage]
               : 0;
  }
  /// The OS scheduler's time slice (seconds; 0: processor sharing): in a
  /// group of at most one core, one computation runs at a time, and the
  /// rank computing keeps the core until it waits or has run a slice while
  /// another rank is ready (EventCore, "take turns").
  double groupSlice = 0;
  /// Seconds of work a computation gains when its actor takes a core of a
  /// group taking turns from another actor (MachineProfile::handoff).
  double groupHandoff = 0;
  /// Seconds every instruction takes beyond its computation, message or
  /// collective (the runtime's dispatch and bookkeeping, measured:
  /// MachineProfile::Contention::instruction): a computation computes that
  /// much longer, a send or receive ends that much later.
  double instructionOverhead = 0;

  double messageTime(int32_t numActors, int32_t from, int32_t to,
                     int32_t stage) const;
  /// When the output of `stage` sent by actor `from` at `sent` is there for
  /// a receive on `to` posted at `posted`: eagerly from the send, or, with
  /// rendezvous, from when both sides are posted. The one rule for message
  /// arrival (simulator and gradient separation's re-timing).
  double arrival(int32_t numActors, int32_t from, int32_t to, int32_t stage,
                 double sent, double posted) const {
    return (rendezvous ? std::max(sent, posted) : sent) +
           messageTime(numActors, from, to, stage);
  }
  /// Duration of a collective on `stage` (collectiveDuration's, else
  /// collectiveTime).
  double collectiveOf(int32_t stage) const {
    return stage < static_cast<int32_t>(collectiveDuration.size())
               ? collectiveDuration[stage]
               : collectiveTime;
  }
  /// Duration of a computation (Fwd, Bwd, Igrad or Wgrad) on `stage`; 1
  /// for a stage the table does not cover.
  double durationOf(int32_t stage, OpKind kind) const {
    return stage >= 0 && static_cast<size_t>(stage) < duration.size()
               ? duration[stage][static_cast<int>(kind)]
               : 1.0;
  }
  /// Activation bytes a micro-batch holds on `stage` from its forward to
  /// its release; 0 for a stage the table does not cover.
  double activationOf(int32_t stage) const {
    return stage >= 0 && static_cast<size_t>(stage) < activationBytes.size()
               ? activationBytes[stage]
               : 0.0;
  }
  /// The weight-gradient state of a micro-batch on `stage`: weightGradBytes,
  /// or its activations where that is not given.
  double weightGradOf(int32_t stage) const {
    return stage >= 0 && static_cast<size_t>(stage) < weightGradBytes.size()
               ? weightGradBytes[stage]
               : activationOf(stage);
  }
  /// How one computation changes what its actor holds: `peak` while it runs
  /// (at its end, or in a backward between its two halves, where the
  /// runtime measures), `after` once it is done. A forward takes the
  /// activations; an input gradient trades them for the weight-gradient
  /// state, which the weight gradient frees; a backward frees the
  /// activations, holding the weight-gradient state between its halves.
  /// The one memory rule: the simulator and gradient separation both count
  /// with it.
  struct MemoryEffect {
    double peak = 0, after = 0;
  };
  MemoryEffect memoryEffect(OpKind kind, int32_t stage) const {
    const double activation = activationOf(stage);
    switch (kind) {
    case OpKind::Fwd:
      return {activation, activation};
    case OpKind::Igrad: {
      const double traded = weightGradOf(stage) - activation;
      return {traded, traded};
    }
    case OpKind::Wgrad:
      return {0, -weightGradOf(stage)};
    case OpKind::Bwd:
      return {std::max(0.0, weightGradOf(stage) - activation), -activation};
    default:
      return {};
    }
  }
};

/// Every computation takes 1, messages nothing: the step model.
SimCosts unitCosts(const Program &program);

/// The balanced unit costs of the zero-bubble literature: forward, backward,
/// input and weight gradient take 1, 2, 1 and 1 per micro-batch on an actor
/// holding an average share of the layers. A stage of `layers` layers costs
/// layers / (average layers one micro-batch meets per actor) of each, and
/// keeps as much activation memory per micro-batch, in M_B (so two stages of
/// half the layers on one actor cost 1/2 each; SimCosts::memoryUnit).
/// Stages without metadata count as one layer. Messages are free.
SimCosts layerCosts(const Program &program);

/// Costs from the analytic model (and a profile where it has entries).
/// `devices[a]` is the device of actor a (for intra/inter-node links, and,
/// on a measured cluster, which actors share a node's cores).
/// `cluster.jobDevices` says how many ranks the job has (pp x dp).
/// Fails with an error naming what does not fit.
llvm::Error modelCosts(const Program &program, const ModelConfig &model,
                       const ClusterConfig &cluster, const Profile *profile,
                       const std::vector<int64_t> &devices, SimCosts &costs);

/// Where a pipeline's stages run and what they hold: what the cost of the
/// work after the pipeline needs, from a program (stageLayoutOf) or, before
/// there is one, from the scheduler's problem (the tuner).
struct StageLayout {
  int32_t numActors = 0;
  std::vector<StageMeta> meta;
  std::vector<std::string> moduleNames;
  std::vector<std::pair<int32_t, int32_t>> edges; ///< the stage DAG
  std::vector<std::vector<int32_t>> actorsOf;     ///< per stage, sorted
};
/// The layout of a program: a stage runs on the actors that compute it.
StageLayout stageLayoutOf(const Program &program);
/// The layout of a problem before it is scheduled: a stage runs on the
/// actors of its parts.
StageLayout stageLayoutOf(const BuiltProblem &built);

/// What each actor holds whatever the schedule: static bytes (weights,
/// gradients, optimizer state), parameters and gradient bytes, a shared
/// stage's split evenly among its actors. Stages of modules the model does
/// not define (registered stages) hold nothing.
struct ActorHoldings {
  std::vector<double> staticBytes, parameters, gradBytes;
};
ActorHoldings actorHoldings(const StageLayout &layout, const ModelConfig &model,
                            const ClusterConfig &cluster);

/// What every rank does after the pipeline, as the runtime does it, the
/// slowest actor counting: a bidirectional pipeline's copies of a stage
/// (same module and blocks, on two actors, not shared) add their gradients
/// (one exchange per pair of actors, both ways at once); the data-parallel
/// all-reduce of each actor's gradients over its dp peers (deviceOf); the
/// all-reduce of the loss over every rank where a measured cluster prices
/// small messages; the measured per-iteration overhead; and the optimizer
/// step over each actor's parameters, or as `profile` measured it (a run's
/// own profile of this program; Profile::optimizerStepOr). `gradSync` is
/// the collectives and the overhead; the iteration is the pipeline plus
/// both.
struct AfterPipeline {
  double gradSync = 0, step = 0;
};
AfterPipeline afterPipeline(const StageLayout &layout,
                            const ActorHoldings &held, int64_t dp,
                            const ModelConfig &model,
                            const ClusterConfig &cluster,
                            const Profile *profile = nullptr);

/// Durations from a profile alone (unit costs for stages it does not list).
llvm::Error profileCosts(const Program &program, const Profile &profile,
                         SimCosts &costs);

struct CostInputs;

/// The costs of `program` run with `dp` data-parallel replicas: the model's
/// with a model and cluster (the profile's durations over them where it has
/// entries; replica 0's devices, replicaDevices), the profile's alone, or
/// without files one step per instruction (`TimeModel::Step`, unitCosts) or
/// 1, 2, 1, 1 per layer (`TimeModel::Cost`, layerCosts). The one place that
/// chooses. A profile that names stages or actors `program` does not have
/// (measured on another job) is an error here (checkProfileFits).
llvm::Error programCosts(const Program &program, const CostInputs &inputs,
                         int64_t dp, TimeModel withoutFiles, SimCosts &costs);
/// A profile names the stages and actors of the job it was measured on: an
/// error when it names others than `job` has (or more optimizer steps than
/// actors), or where the profile records what it measured (the runtime
/// does) and the job's is known: a stage run by other actors, or that was
/// its module's first or last where the job's is not (or the other way
/// round), and with a `model` (whose layer counts `job.meta` then holds;
/// without one they are the spec's) a stage of other layers, another
/// micro-batch size or modules of other sizes.
llvm::Error checkProfileFits(const Profile &profile, const StageLayout &job,
                             const ModelConfig *model = nullptr);
/// The same from the parts (null: not given), `cluster` as given: its
/// jobDevices set by the caller.
llvm::Error programCosts(const Program &program, const ModelConfig *model,
                         const ClusterConfig *cluster, const Profile *profile,
                         int64_t dp, TimeModel withoutFiles, SimCosts &costs,
                         int64_t replica = 0);

struct SimResult {
  double iterationTime = 0;
  /// Per actor: computing (a shared core's waits for it included) or
  /// running its instructions (SimCosts::instructionOverhead), idle the
  /// rest of the iteration, and its idle share.
  std::vector<double> busy, idle, bubble;
  std::vector<double> peakActivation, staticBytes; ///< per actor, bytes
  std::vector<double> totalBytes;                  ///< per actor
  std::vector<bool> overMemory;                    ///< per actor
  /// Start and end of every op, per actor, in program order.
  std::vector<std::vector<double>> start, end;
  /// The chain of ops that determines the iteration time, first to last, as
  /// (actor, index) of computations and transfers.
  std::vector<std::pair<int32_t, int32_t>> criticalPath;
  double busyTotal() const;
  double bubbleRatio() const; ///< idle share of all actors' time
};

/// Per actor, the static bytes (SimCosts::staticBytes) of the stages it
/// computes, each once (`actorsOfStage`: stageActors of the program): what
/// it holds whatever the order of its computations.
std::vector<double>
actorStaticBytes(const std::vector<std::vector<int32_t>> &actorsOfStage,
                 int32_t numActors, const SimCosts &costs);

class Simulator {
public:
  /// Prepares a program for simulation. Fails when a receive has no
  /// matching send or the programs cannot run to their end; run
  /// -flexpipe-verify-schedule for a full diagnosis.
  llvm::Error prepare(const Program &program);
  SimResult run(const SimCosts &costs) const;

  /// The pipeline of a job of `dp` replicas as its iteration waits for it:
  /// each replica's (programCosts under its devices' links and cores;
  /// replicas priced alike run once), the slowest kept, as the gradient
  /// all-reduce after the pipeline needs every replica. Costs without a
  /// model and cluster are every replica's: replica 0's run.
  struct ReplicaRun {
    int64_t replica = 0;
    SimCosts costs;
    SimResult result;
  };
  llvm::Error runSlowestReplica(const Program &program,
                                const CostInputs &inputs, int64_t dp,
                                TimeModel withoutFiles, ReplicaRun &out,
                                bool rendezvous = false) const;
  /// The same from the parts, as programCosts takes them.
  llvm::Error runSlowestReplica(const Program &program,
                                const ModelConfig *model,
                                const ClusterConfig *cluster,
                                const Profile *profile, int64_t dp,
                                TimeModel withoutFiles, ReplicaRun &out,
                                bool rendezvous = false) const;

private:
  struct Op {
    OpKind kind;
    int32_t actor, stage, peer;
    /// A collective posted asynchronously (it takes no time; its wait ends
    /// when the instance completes).
    bool asyncPost = false;
  };
  /// When every op ran: start, end, what decided its start, and per actor
  /// the time it computed.
  struct Times {
    Times(size_t numOps, size_t numActors)
        : start(numOps, 0), end(numOps, 0), cause(numOps, -1),
          busy(numActors, 0) {}
    std::vector<double> start, end;
    std::vector<int32_t> cause;
    std::vector<double> busy;
  };
  /// Times the ops as events on the EventCore: computations of an actor
  /// with a core of its own take their duration, those of a core group
  /// share its cores.
  Times time(const SimCosts &costs) const;
  /// The rules both share: a computation's duration, a collective's, and
  /// when a receive or wait at `s` ends (its message is there, or its
  /// asynchronous collective's last member posted plus its duration), with
  /// `why` set to what decided it when that is later than `s`. What it
  /// waits for must have been timed (`start`).
  double durationOf(const SimCosts &costs, int32_t id) const;
  /// What wait or receive `id` waits for that is not timed yet (`done`):
  /// an op id, or -1.
  int32_t untimedDependency(int32_t id, const std::vector<uint8_t> &done) const;
  double waitEnd(const SimCosts &costs, int32_t id, double s,
                 const std::vector<double> &start, int32_t &why) const;
  int32_t numActors = 0;
  std::vector<Op> ops;
  /// Receives matched to sends, collective instances and a run order: the
  /// verifier's replay (Program.h), which this simulator only times.
  ProgramGraph graph;
  std::vector<std::vector<int32_t>> actorsOfStage; // stageActors
};

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_SIMULATOR_H
