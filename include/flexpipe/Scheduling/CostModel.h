//===- CostModel.h - Durations and memory from model and cluster -*- C++ -*-=//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// An analytic model of a GPT-style transformer on a cluster: how long each
// stage's forward, backward, input-gradient and weight-gradient take for one
// micro-batch, how many activation bytes a micro-batch keeps alive between
// its forward and its backward, how much parameter, gradient and optimizer
// memory a stage holds, and how long a message between two actors takes.
// A measured profile can replace the analytic durations. Plain C++; the YAML
// readers are in CostModelYAML.h.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_COSTMODEL_H
#define FLEXPIPE_SCHEDULING_COSTMODEL_H

#include "flexpipe/Support/Layout.h"
#include "llvm/Support/Error.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace flexpipe::sched {

/// One module (modality) of the model.
struct ModuleModel {
  std::string name;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t seq = 0;
  /// Token vocabulary; 0 for a tower without token embedding and LM head
  /// (an image or audio encoder).
  int64_t vocab = 0;
  /// Whether the last stage ends in an LM head over the vocabulary and a
  /// cross-entropy loss (a GPT: yes; a CLIP text tower: no).
  bool lmHead = false;

  /// Whether the last stage ends in an LM head over a vocabulary: what the
  /// head's costs, vocabulary parallelism (its slices) and T-1F1B need.
  bool hasHead() const { return vocab > 0 && lmHead; }
  /// Whether its vocabulary can be split over `pp` actors: a head, another
  /// actor than the one that holds it, and a word for each actor (the
  /// runtime refuses an empty slice).
  bool canSplitVocabulary(int64_t pp) const {
    return hasHead() && pp >= 2 && vocab >= pp;
  }
};

struct ModelConfig {
  std::string name;
  /// Bytes per element of weights, activations and messages (bf16: 2).
  int64_t dtypeBytes = 2;
  /// The model file's `dtype` (bf16, fp16 or fp32), written back as read.
  std::string dtype = "bf16";
  /// Attention keeps its scores' softmax for the backward (Korthikanti's
  /// 5 a s / h term), or, flash-style, only a log-sum-exp per query row and
  /// head (fp32): the model file's `attention: materialized | flash`.
  bool flashAttention = false;
  int64_t globalBatchSize = 1;
  int64_t microBatchSize = 1;
  std::vector<ModuleModel> modules;

  const ModuleModel *module(const std::string &name) const;
  /// The tokens of one sample that `modules` (a schedule's, by name) take
  /// in: the sum of their sequence lengths (a two-tower sample's image and
  /// text tokens), for throughput. The file's other modules do not count.
  double tokensPerSample(const std::vector<std::string> &modules) const;
};

struct Link {
  double bandwidth = 0; ///< bytes per second
  double latency = 0;   ///< seconds
};

/// One layer's measured durations for one micro-batch (flexpipe-profile).
/// A block is keyed by (hidden, heads, seq), the embedding and the head
/// (final norm, LM head and loss) by (hidden, seq, vocab).
struct MeasuredLayer {
  enum Kind { Block, Embedding, Head };
  Kind kind = Block;
  int64_t hidden = 0, heads = 0, seq = 0, vocab = 0, microBatch = 1;
  double fwd = 0, igrad = 0, wgrad = 0; ///< seconds
};

/// What flexpipe-profile measured on the machine (the paper's profiling
/// database): layer durations at several micro-batch sizes, the optimizer
/// step, and how computation slows when several ranks of a node compute at
/// once (more ranks than cores). Empty for an analytic cluster.
struct MachineProfile {
  std::vector<MeasuredLayer> layers;
  /// Seconds of one optimizer (Adam) step per parameter; 0: not modelled.
  double optimizerPerParameter = 0;
  /// Cores of a node; 0: unknown (ranks never share a core). With more of
  /// a job's ranks on a node than cores, the simulator shares the cores
  /// among the ranks computing at each moment (processor sharing).
  int64_t coresPerNode = 0;
  /// How long a rank computes on a shared core before the OS scheduler
  /// gives the core to another rank ready to compute, in seconds (0: not
  /// measured; the cores are then shared among the ranks computing at each
  /// moment). flexpipe-profile measures it with two processes on one core.
  /// At least kMinTimeSlice when set.
  double timeSlice = 0;
  /// Seconds a computation takes longer when its rank has just taken a
  /// shared core from another rank: the switch, and the caches the other
  /// rank's computation filled with its own data (0: none). flexpipe-profile
  /// measures it with two processes on one core that hand each other the
  /// core after each micro-batch through the first model's blocks.
  double handoff = 0;
  /// The shortest time slice a cluster file may give: OS schedulers give
  /// milliseconds, and the simulator takes an event per slice (a thousand
  /// per rank and simulated second at this one).
  static constexpr double kMinTimeSlice = 1e-4;
  /// Slowdown of computation while `ranks` ranks of a node compute at
  /// once, by increasing ranks (measured from 1), beyond their taking turns
  /// on shared cores: flexpipe-profile runs the layers in that many
  /// processes at once.
  struct Contention {
    int64_t ranks = 1;
    double slowdown = 1;
    /// What a pipeline message costs in a job of that many ranks (seconds;
    /// 0: the link's latency): flexpipe-profile measures it beyond 2 ranks
    /// while the ranks ping-pong in pairs. Only points without a shape
    /// give it.
    double latency = 0;
    /// Seconds an iteration of a job of that many ranks takes beyond what
    /// the simulation of its pipeline, collectives and optimizer step gives
    /// (0: nothing). flexpipe-profile leaves it 0 (fitted to 1F1B jobs, it
    /// followed their noise: docs/CostModel.md); a file may still set it.
    /// Only points without a shape give it.
    double overhead = 0;
    /// The module shape the point was measured with; 0: any module without
    /// points of its own.
    int64_t hidden = 0, heads = 0, seq = 0;
    /// Seconds the runtime spends on each instruction of a program beyond
    /// its computation and its waits (dispatch, bookkeeping, posting
    /// messages, and, with more ranks than cores, the moments a rank
    /// loses its core between instructions to a polling neighbour), as the
    /// runtime measures it in runs of that many ranks (the profile's
    /// `instruction_s`); the simulation adds it to every instruction.
    /// Only points without a shape give it.
    double instruction = 0;
  };
  std::vector<Contention> contention;
  /// The runtime's gradient all-reduce within a node as one step of a ring
  /// (bandwidth 0: not measured; the links then price it): flexpipe-profile
  /// fits it to the runtime's all-reduce between two ranks. Every ring
  /// collective within a node (transferTime's `collective`) takes it.
  Link allReduce;
  bool empty() const {
    return layers.empty() && optimizerPerParameter == 0 && contention.empty() &&
           allReduce.bandwidth == 0 && timeSlice == 0;
  }
  /// What a slice gets done at the largest contention slowdown: a handoff
  /// of at least this leaves a computation taking turns on a core no
  /// progress (cluster files must stay below it; infinity without slices).
  double handoffLimit() const {
    double slowest = 1;
    for (const Contention &c : contention)
      slowest = std::max(slowest, c.slowdown);
    return timeSlice > 0 ? timeSlice / slowest
                         : std::numeric_limits<double>::infinity();
  }
  /// `kind`'s durations for `microBatch` sequences of `module`: measured
  /// points of the same shape interpolated linearly in the micro-batch size
  /// (extrapolated from the two nearest beyond them, proportionally from a
  /// single one); nothing when the shape was not measured.
  std::optional<MeasuredLayer> layer(MeasuredLayer::Kind kind,
                                     const ModuleModel &module,
                                     int64_t microBatch) const;
  /// Whether `kind` was measured for `module`'s shape at `microBatch`
  /// itself (not interpolated).
  bool measuredAt(MeasuredLayer::Kind kind, const ModuleModel &module,
                  int64_t microBatch) const;
};

struct ClusterConfig {
  std::string name;
  int64_t devices = 1;
  int64_t devicesPerNode = 1;
  double peakFlops = 0;   ///< per device, FLOP/s
  double efficiency = 1;  ///< achievable fraction of peakFlops
  double memoryBytes = 0; ///< per device
  Link intraNode, interNode;
  /// What a device is: "gpu" (the default) or "cpu" (one CPU rank); only
  /// the tools' wording depends on it.
  std::string deviceKind = "gpu";
  /// Measured durations that replace the analytic ones (flexpipe-profile).
  MachineProfile measured;
  /// Devices the job being priced runs on (pp x dp); 0: `devices`. Only the
  /// contention of ranks sharing a node's cores depends on it.
  int64_t jobDevices = 0;
  /// The ranks the job runs on: jobDevices, or all `devices` when unset.
  int64_t jobRanks() const { return jobDevices > 0 ? jobDevices : devices; }
  /// The node of device `d` (devices are numbered node by node); two
  /// devices on one node talk over intraNode, others over interNode.
  int64_t nodeOf(int64_t d) const {
    return d / std::max<int64_t>(1, devicesPerNode);
  }
  /// What `count` devices are called: "GPUs", "CPU ranks" (singular for
  /// one).
  const char *devicesWord(int64_t count = 2) const {
    if (deviceKind == "cpu")
      return count == 1 ? "CPU rank" : "CPU ranks";
    return count == 1 ? "GPU" : "GPUs";
  }
};

/// The cost of one stage for one micro-batch.
struct StageCost {
  double fwd = 0, bwd = 0, igrad = 0, wgrad = 0; ///< seconds
  /// Bytes a micro-batch keeps alive from its forward until its backward
  /// (or input gradient) on this stage.
  double activationBytes = 0;
  /// Bytes it keeps from its input gradient until its weight gradient: the
  /// weight-gradient state (SimCosts::memoryEffect).
  double weightGradBytes = 0;
  /// Parameters of the stage and the bytes they, their gradients and the
  /// optimizer state take.
  double parameters = 0;
  double staticBytes = 0;
  /// Bytes of the activation (or gradient) this stage sends per micro-batch.
  double messageBytes = 0;
};

/// What a stage holds: `layers` transformer layers of `module`, plus the
/// token embedding when it holds the module's first layers and the final
/// norm, LM head and loss when it holds the last (modules with a vocabulary).
struct StageShape {
  const ModuleModel *module = nullptr;
  int64_t layers = 0;
  bool first = false, last = false;
};

/// FLOPs of one micro-batch through a stage: forward, input gradient, weight
/// gradient (backward = input + weight gradient).
struct StageFlops {
  double fwd = 0, igrad = 0, wgrad = 0;
};
StageFlops stageFlops(const StageShape &shape, int64_t microBatch);

/// Layers per stage (each at least one) that minimise the slowest stage's
/// forward + backward FLOPs, counting the embedding on the first stage and
/// the LM head and loss on the last, unless `vocabParallel` (they are
/// stages of their own, split over every actor). Requires layers >= stages
/// >= 1.
std::vector<int64_t> costBalancedPartition(const ModuleModel &module,
                                           int64_t stages,
                                           bool vocabParallel = false);

/// How many of the job's ranks share the busiest core of a node when all
/// compute at once: 1 with no more ranks per node than measured cores (or
/// the cores unknown), else the ranks over the cores rounded up, as the
/// runtime binds them (coreOf). The simulator gives each core's computing
/// ranks the core by processor sharing (SimCosts::groupCores); this is that
/// sharing's factor when every rank computes.
double coreOversubscription(const ClusterConfig &cluster);

/// How much slower `module`'s computation runs while `computing` ranks of a
/// node compute at once than on one rank alone, beyond their taking turns on
/// shared cores (which the simulator models): caches, memory bandwidth, and
/// cores that are hardware threads of one. The measured contention points of
/// its shape (else those without a shape), interpolated linearly (the last
/// point's beyond it); `computing` 0: the job's ranks on a node (min(job
/// devices, devices per node)). 1 without a measurement.
double computeSlowdown(const ClusterConfig &cluster,
                       const ModuleModel *module = nullptr,
                       double computing = 0);

/// Seconds of one optimizer step over `parameters` parameters of `module`
/// on one device (measured per parameter; every rank of the job steps at
/// once, so with the contention slowdown at the job's ranks and
/// coreOversubscription); 0 for an analytic cluster, which does not model
/// the step.
double optimizerStepTime(const ClusterConfig &cluster,
                         const ModuleModel *module, double parameters);

/// Cost of a stage on one device of `cluster`, computing alone: durations
/// from the measured profile where it has the stage's layers (block,
/// embedding, head), from FLOPs at the cluster's rate otherwise; memory and
/// message sizes analytic. The simulator slows computations by the ranks
/// computing beside them (SimCosts::groupSlowdown).
StageCost stageCost(const StageShape &shape, const ModelConfig &model,
                    const ClusterConfig &cluster);

/// Durations in seconds, in the scheduler's CompKind order: forward,
/// backward, input gradient, weight gradient.
using Durations = std::array<double, 4>;

/// One actor's durations for a stage that `share` actors split evenly (a
/// shared stage: each holds 1/share of it): the analytic cost divided by
/// `share`. The scheduler's stage parts and the simulator both take them
/// from here.
Durations stageDurations(const StageShape &shape, const ModelConfig &model,
                         const ClusterConfig &cluster, double share);

/// Replica r's actor a is device flexpipe::deviceOf(a, r, dp), bound to core
/// flexpipe::coreOf(device, cores) where a node's ranks outnumber its cores
/// (flexpipe/Support/Layout.h); flexpipe-tune, flexpipe-compile --dp, the
/// passes' `dp` option and the runtime all place ranks by them.
using flexpipe::coreOf;
using flexpipe::deviceOf;
/// deviceOf for every actor of replica `replica`.
std::vector<int64_t> replicaDevices(int64_t actors, int64_t dp,
                                    int64_t replica = 0);

/// `cluster` for a job of `actors` x `dp` ranks (jobDevices set); an error
/// when the cluster has fewer devices than that.
llvm::Expected<ClusterConfig> clusterForJob(ClusterConfig cluster,
                                            int64_t actors, int64_t dp);

/// A message's latency over `link` (one of the cluster's): the link's, or
/// within a node of a measured cluster the contention points' (without a
/// shape) at the job's ranks where that is longer (interpolated; the last
/// point's beyond it).
double messageLatency(const ClusterConfig &cluster, const Link &link);

/// The measured per-iteration overhead (Contention::overhead) of the points
/// without a shape at the job's ranks on a node, interpolated (the last
/// point's beyond it); 0 for an analytic cluster.
double iterationOverhead(const ClusterConfig &cluster);

/// The runtime's measured overhead per instruction
/// (Contention::instruction) of the points without a shape at the job's
/// ranks on a node, interpolated (the last point's beyond it); 0 for an
/// analytic cluster.
double instructionOverhead(const ClusterConfig &cluster);

/// Seconds to move `bytes` from device `from` to device `to`: the latency
/// plus bytes over the link's bandwidth. A pipeline message pays
/// messageLatency (its receiver may be busy computing); a step of a
/// `collective`, whose members all wait in it, the link's latency, and
/// within a node the measured all-reduce's step where there is one
/// (MachineProfile::allReduce).
double transferTime(const ClusterConfig &cluster, int64_t from, int64_t to,
                    double bytes, bool collective = false);

/// Seconds for a ring all-reduce of `bytes` (held by each member) over
/// `devices`: 2 (n - 1) steps, each moving bytes / n over the slowest link
/// between ring neighbours. 0 for fewer than two devices.
double allReduceTime(const ClusterConfig &cluster,
                     const std::vector<int64_t> &devices, double bytes);

/// Seconds for a ring all-gather over `devices` in which every member
/// contributes `bytes`: n - 1 steps, each moving `bytes` over the slowest
/// link between ring neighbours. 0 for fewer than two devices. A gather to
/// one root is modelled the same way.
double allGatherTime(const ClusterConfig &cluster,
                     const std::vector<int64_t> &devices, double bytes);

/// Seconds for the exchange a vocabulary-parallel head's softmax
/// cross-entropy needs per micro-batch over the head's `devices`: a ring
/// all-reduce of each member's local maximum, sum of exponentials and target
/// logit of every token, in fp32. The scheduler, the simulator and the
/// tuner's bound all price it here.
double vocabStatsTime(const ClusterConfig &cluster,
                      const std::vector<int64_t> &devices,
                      const ModuleModel &module, int64_t microBatch);

/// A measured profile: mean durations per stage and message timings, in the
/// format the runtime writes.
struct Profile {
  /// The file it was read from (for messages), or empty.
  std::string path;
  struct Stage {
    int64_t stage = 0;
    double fwd = 0, bwd = 0, igrad = 0, wgrad = 0;
    std::optional<double> activationBytes;
    /// The weight-gradient state (only with activationBytes; without it the
    /// activations stay to the weight gradient).
    std::optional<double> weightGradBytes;
    /// What the run's stage held, where the file says (the runtime writes
    /// it): its transformer layers, and whether it was its module's first
    /// (embedding) or last (head) stage. A profile fits only a schedule
    /// whose stage holds the same (checkProfileFits).
    std::optional<int64_t> layers;
    std::optional<bool> first, last;
    /// The actors that ran it, sorted; empty where the file does not say.
    std::vector<int64_t> actors;
    /// Where the file lists it (FILE:LINE:COLUMN), for messages; or empty.
    std::string place;
    double weightGradOr(double activation) const {
      return weightGradBytes ? *weightGradBytes : activation;
    }
    /// The measured durations, in Durations order (a profile measures each
    /// actor's own share of a shared stage).
    Durations durations() const { return {fwd, bwd, igrad, wgrad}; }
  };
  std::vector<Stage> stages;
  /// The run's micro-batch size, where the file says (the runtime writes
  /// it): the durations are those of one micro-batch of this size.
  std::optional<int64_t> microBatchSize;
  std::string microBatchPlace; ///< where micro_batch_size is, as Stage::place
  /// The sizes of the run's modules, in the model file's order, where the
  /// file says (the runtime writes them).
  struct ModuleShape {
    int64_t hidden = 0, heads = 0, seq = 0, vocab = 0;
    bool operator==(const ModuleShape &o) const {
      return hidden == o.hidden && heads == o.heads && seq == o.seq &&
             vocab == o.vocab;
    }
  };
  std::vector<ModuleShape> modules;
  std::string modulesPlace; ///< where modules is, as Stage::place
  /// Point-to-point message time between actors (seconds); pairs not listed
  /// take `defaultMessageTime` (0 when there is none). A profile with
  /// neither leaves messages to the cluster's links (pricesMessages).
  struct Message {
    int64_t from = 0, to = 0;
    double seconds = 0;
    std::string place; ///< as Stage::place
  };
  std::vector<Message> messages;
  /// Whether the file has the `messages` key, also as an empty list (which
  /// prices every message at defaultMessageTime, as a list of other pairs).
  bool listsMessages = false;
  std::optional<double> defaultMessageTime;
  /// Seconds of each actor's optimizer step (index: actor), as the run
  /// measured it; empty where the profile has none.
  std::vector<double> optimizerStep;
  std::string optimizerPlace; ///< where optimizer_s is, as Stage::place
  /// The runtime's mean seconds per instruction beyond computations, waits
  /// and registered operations (MachineProfile::Contention::instruction);
  /// absent where the profile has none.
  std::optional<double> instructionOverhead;
  /// The runtime's mean seconds per registered operation (flexpipe.exec);
  /// absent where the run had none.
  std::optional<double> execSeconds;

  const Stage *stage(int64_t id) const;
  /// Stage `id`'s measured durations where the profile lists it, else
  /// `analytic`: the one rule for what a profile replaces.
  Durations durationsOr(int64_t id, const Durations &analytic) const {
    const Stage *measured = stage(id);
    return measured ? measured->durations() : analytic;
  }
  double messageTime(int64_t from, int64_t to) const;
  /// Whether the profile prices messages (messageTime) rather than leaving
  /// them to the cluster's links: it has `messages`, even an empty list, or
  /// `default_message_s`, even 0.
  bool pricesMessages() const {
    return listsMessages || !messages.empty() || defaultMessageTime.has_value();
  }
  /// Actor `actor`'s measured optimizer step where the profile has one,
  /// else `analytic`.
  double optimizerStepOr(int64_t actor, double analytic) const {
    return actor >= 0 && actor < static_cast<int64_t>(optimizerStep.size())
               ? optimizerStep[static_cast<size_t>(actor)]
               : analytic;
  }
};

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_COSTMODEL_H
