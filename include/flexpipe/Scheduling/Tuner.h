//===- Tuner.h - Grid search over pipeline configurations -------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The paper's auto-tuner (its section 6) in plain C++: enumerate
// (pp, dp, micro-batch size, placement, priorities, vocabulary parallelism,
// gradient separation) for a GPT-style model on a cluster, schedule every
// candidate with the cost-aware scheduler, simulate it with the analytic cost
// model, add the data-parallel gradient all-reduce, drop what does not fit in
// device memory and rank the rest by iteration time. No IR: flexpipe-tune
// writes the winners as spec text for flexpipe-compile.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_TUNER_H
#define FLEXPIPE_SCHEDULING_TUNER_H

#include "flexpipe/Scheduling/CostModel.h"
#include "flexpipe/Scheduling/PipelineSpec.h"
#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/Simulator.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace llvm {
class ThreadPoolInterface;
} // namespace llvm

namespace flexpipe::sched {

/// The placements the tuner tries (the paper's Table 2 and its V-shape +
/// bidirectional combination).
enum class TunePlacement : uint8_t {
  OneToOne,
  Circular,
  VShape,
  Bidirectional,
  VShapeBidirectional,
};
constexpr int kNumTunePlacements = 5;
/// "one_to_one", "circular", "vshape", "bidirectional",
/// "vshape_bidirectional".
const char *tunePlacementName(TunePlacement placement);

/// One point of the search space.
struct Candidate {
  int64_t pp = 1, dp = 1, mbs = 1, microbatches = 1;
  TunePlacement placement = TunePlacement::OneToOne;
  /// Stages per actor per direction (circular: 2 or 4; V-shape: 2).
  int64_t chunks = 1;
  bool vocabParallel = false;
  Cttp cttp = Cttp::BwdFirst;
  StagePriority fwd, bwd;
  /// A plugin priority (one of TuneOptions::priorities, by name) that every
  /// actor uses instead of cttp, fwd and bwd; empty for the built-in ones.
  std::string priority;
  bool separation = false;

  /// Every field, for comparisons and maps.
  auto tie() const {
    return std::make_tuple(pp, dp, mbs, microbatches,
                           static_cast<int>(placement), chunks, vocabParallel,
                           static_cast<int>(cttp), static_cast<int>(fwd.order),
                           fwd.interval, static_cast<int>(bwd.order),
                           bwd.interval, priority, separation);
  }
  bool operator==(const Candidate &other) const { return tie() == other.tie(); }

  /// Stages per direction and in all directions.
  int64_t stagesPerDirection() const { return pp * chunks; }
  int64_t directions() const {
    return placement == TunePlacement::Bidirectional ||
                   placement == TunePlacement::VShapeBidirectional
               ? 2
               : 1;
  }
};

/// The Megatron-LM baseline at (pp, dp, mbs): one stage per device, 1F1B
/// (backward first, pp - a micro-batches in flight on actor a), embedding on
/// the first stage and LM head on the last. With `vocabParallel`, the
/// paper's T-1F1B: the same schedule with the MLLM placement.
Candidate oneFOneB(int64_t pp, int64_t dp, int64_t mbs, int64_t microbatches,
                   bool vocabParallel);

/// What simulating a candidate gives.
struct Evaluation {
  Candidate candidate;
  /// Empty when the candidate was scheduled and simulated; otherwise why not.
  std::string error;
  /// Iteration time: the pipeline's simulated time plus the data-parallel
  /// gradient all-reduce and the optimizer step after it (not overlapped;
  /// the step only with a measured cluster), in seconds.
  double iterationTime = 0, pipelineTime = 0, gradSyncTime = 0, stepTime = 0;
  double tokensPerSecond = 0;
  /// Idle share of all actors' time in the pipeline.
  double bubbleRatio = 0;
  /// Largest per-actor work (as `busiest`) with each backward priced as its
  /// two halves (a profile may time igrad_s + wgrad_s below bwd_s; `busiest`
  /// with the analytic model, whose halves sum to the whole): no
  /// separation variant of this work is faster.
  double busiestSplit = 0;
  /// Largest per-device memory (static + peak activations), bytes; with
  /// `staticOnly`, a lower bound: the static part.
  double peakBytes = 0;
  /// Rejected without scheduling: its parameters, gradients and optimizer
  /// state alone exceed the memory limit.
  bool staticOnly = false;
  /// Largest per-actor work (its computations' durations and every
  /// instruction's overhead, on a core of its own; never above its
  /// simulated busy time): no schedule of this work is faster.
  double busiest = 0;
  bool fitsMemory = true;
  /// Not simulated: its lower bound (iterationLowerBound) shows it cannot
  /// be among the TuneOptions::exact fastest; `error` says so.
  bool skipped = false;
  /// What runs: a hash of the layout (sizes, placement) and of every
  /// actor's program; 0 when not scheduled. Two candidates with one hash
  /// are one run (at pp 1, every stage order and cttp gives the same).
  uint64_t schedule = 0;
  /// Not ranked: a better-ranked candidate runs the same schedule; `error`
  /// names it.
  bool sameSchedule = false;
  /// Not priced: the run's profile (TuneOptions::profile) was measured on
  /// another job, whose stages are not this candidate's; `error` says how.
  bool otherJob = false;
  /// Not scheduled because a plugin hook failed (threw, or answered out of
  /// range): a broken plugin, not a property of the candidate.
  bool hookFailed = false;

  bool ok() const { return error.empty(); }
};

/// The program, costs and simulation behind an evaluation, for pictures.
struct EvaluationDetail {
  Program program;
  SimCosts costs;
  SimResult sim;
};

struct TuneOptions {
  /// Devices to use; 0: the cluster's.
  int64_t gpus = 0;
  /// Sequences per iteration; 0: the model file's.
  int64_t globalBatch = 0;
  /// Device memory in bytes; 0: the cluster's.
  double memoryLimit = 0;
  /// Values to try; empty: every divisor of the devices (pp, at most the
  /// layers) or of the global batch (mbs), the powers of two the paper
  /// enumerates when those are powers of two.
  std::vector<int64_t> pp, mbs;
  /// Placements to try; empty: all.
  std::vector<TunePlacement> placements;
  /// Chunks tried with the circular placement.
  std::vector<int64_t> circularChunks = {2, 4};
  enum class Choice : uint8_t { Both, On, Off };
  /// The MLLM placement (vocabulary-parallel embedding and head).
  Choice vocabParallel = Choice::Both;
  /// Gradient separation (split backward, weight gradients into bubbles).
  Choice separation = Choice::Both;
  /// Separation variants are simulated only when their fused twin is within
  /// this factor of the best fused time and among the separationTop fastest (a
  /// heuristic: moving weight gradients into bubbles rarely saves a quarter of
  /// an iteration); 0 keeps every variant the sound bound admits. And the most
  /// stash-and-insert rounds per variant.
  double separationWindow = 1.25;
  int64_t separationRounds = 200;
  /// At most this many separation variants are simulated, those of the
  /// fastest fused twins (0: no limit).
  size_t separationTop = 8;
  /// The search is exact for this many of the fastest candidates: a fused
  /// candidate whose lower bound (iterationLowerBound) exceeds the time of
  /// the exact-th fastest found so far is not simulated, nor is a variant
  /// whose own bound does, and a fused candidate whose schedule shows while
  /// it is made that it cannot end within that time is given up (evaluate's
  /// cutoff). 0 simulates every candidate.
  size_t exact = 16;
  /// Also try the forward-first computation-type priority (the paper tries
  /// it only when the user asks).
  bool allowFwdFirst = false;
  /// Worker threads (at least 1).
  int threads = 1;
  /// Measured durations that replace the analytic ones.
  const Profile *profile = nullptr; ///< a candidate it does not fit fails
  /// Plugin hooks (flexpipe-tune --check, --priority; docs/Plugins.md) with
  /// the names written into the specs. Every evaluation (the baselines'
  /// included) consults all the checks; each priority adds the candidates of
  /// every (pp, dp, mbs, placement, vocabulary parallelism, separation) with
  /// all actors using it. The functions must be thread-safe.
  struct NamedCheck {
    std::string name;
    CheckFunction function;
  };
  struct NamedPriority {
    std::string name;
    PriorityFunction function;
  };
  std::vector<NamedCheck> checks;
  std::vector<NamedPriority> priorities;
  /// Called from the calling thread as candidates finish.
  std::function<void(size_t done, size_t total)> progress;
};

/// The options with defaults filled in from the model and cluster, or an
/// error saying what to change.
llvm::Expected<TuneOptions> resolveOptions(const ModelConfig &model,
                                           const ClusterConfig &cluster,
                                           TuneOptions options);

/// Every candidate of the space the resolved options describe (separation
/// variants included), or an error when the space is empty (naming the
/// devices as `cluster` does, where given).
llvm::Expected<std::vector<Candidate>>
enumerateCandidates(const ModelConfig &model, const TuneOptions &options,
                    const ClusterConfig *cluster = nullptr);

/// A lower bound on a candidate's iteration time that needs no schedule:
/// the data-parallel gradient all-reduce plus, for every actor, the longest
/// of (a) the earliest any of its work can start (the forwards before its
/// first stage), its whole compute, and the least backward work that must
/// follow its last input gradient, and (b) the same for each of its stage
/// parts alone. Messages and collectives count nothing, so the simulated
/// time is never below it. Infinity when the candidate cannot be built or
/// its static memory alone exceeds the memory limit: no bound skips it
/// then, and evaluate() says why at once (it is over memory, however slow).
double iterationLowerBound(const Candidate &candidate, const ModelConfig &model,
                           const ClusterConfig &cluster,
                           const TuneOptions &options);

/// Schedules and simulates one candidate. `options` must be resolved.
/// `pool`: where its gradient separation may run attempts in parallel
/// (SeparationOptions::pool; the result is the same without).
///
/// `cutoff`: an iteration time the caller has no use for a candidate
/// reaching. Without separation and a profile (the simulation then uses the
/// scheduler's durations, and messages and shared cores only delay it), the
/// scheduling is given up once its pipeline alone cannot end before the
/// cutoff less the gradient sync and the optimizer step, and the result is
/// `skipped` (with an error saying so).
Evaluation evaluate(const Candidate &candidate, const ModelConfig &model,
                    const ClusterConfig &cluster, const TuneOptions &options,
                    EvaluationDetail *detail = nullptr,
                    llvm::ThreadPoolInterface *pool = nullptr,
                    double cutoff = std::numeric_limits<double>::infinity());

struct TuneResult {
  /// Schedulable candidates that fit in memory, fastest first.
  std::vector<Evaluation> ranked;
  /// The others: unschedulable, over the memory limit, skipped by their
  /// lower bound (Evaluation::skipped), or running a better-ranked one's
  /// schedule (Evaluation::sameSchedule).
  std::vector<Evaluation> rejected;
  /// Candidates in the space; those scheduled and simulated within the
  /// memory limit (with the rejected ones over memory or unschedulable, and
  /// the skipped ones, each candidate counts once); and those skipped:
  /// separation variants
  /// whose busiest actor alone was slower than the best found, or outside
  /// the window or the top of TuneOptions (pruned); candidates whose lower
  /// bound, or whose schedule while it was made, exceeds the
  /// TuneOptions::exact-th best time (bounded).
  size_t candidates = 0, simulated = 0, pruned = 0, bounded = 0;
  /// The program, costs and simulation of ranked.front(), kept from the
  /// search (nothing where several candidates tie and another was kept).
  std::optional<EvaluationDetail> bestDetail;
};

/// The whole search. Separation variants are simulated only where they can
/// still win. Fails with advice when nothing fits.
llvm::Expected<TuneResult> tune(const ModelConfig &model,
                                const ClusterConfig &cluster,
                                const TuneOptions &options);

/// The best baseline over the resolved options' (pp, dp, mbs) that fits in
/// memory: Megatron-LM's 1F1B (`vocabParallel` false: embedding on the first
/// stage, LM head on the last) or the paper's T-1F1B (true: 1F1B with the
/// MLLM placement, its stage priorities as FlexPipe arranges them best).
/// Nothing when no configuration fits; `whyNone` then says why (over
/// memory, or not scheduled and the first reason). Evaluations already in
/// `known` (a search's results) are reused instead of simulated again.
std::optional<Evaluation>
bestBaseline(const ModelConfig &model, const ClusterConfig &cluster,
             const TuneOptions &options, bool vocabParallel,
             const TuneResult *known = nullptr, std::string *whyNone = nullptr);

/// The candidate as a scheduler spec (one module, the model's).
PipelineSpec pipelineSpec(const Candidate &candidate, const ModelConfig &model);

/// The candidate as `flexpipe.pipeline` text for flexpipe-compile; a
/// separation variant names the rounds it was evaluated with, a plugin
/// priority is written `custom("name")` and every name in `checks` (those
/// of TuneOptions::checks) becomes a `flexpipe.check "name"`.
std::string specText(const Candidate &candidate, const ModelConfig &model,
                     const std::string &name, int64_t separationRounds = 200,
                     const std::vector<std::string> &checks = {});

/// The keywords the dialect uses: "bwd_first", "fwd_first", "interleaved";
/// "breadth_first" or "depth_first" with ", interval" when it has one.
const char *cttpKeyword(Cttp cttp);
std::string stpKeyword(const StagePriority &priority);

/// A short human-readable description: placement, computation-type priority,
/// forward/backward stage priority (bf or df, :interval), e.g. "circular v2
/// +vocab, interleaved bf:8/df:8, separation"; a plugin priority shows as
/// "custom(name)".
std::string describe(const Candidate &candidate);

/// Bytes in the largest binary unit that keeps the number at least 1:
/// "512.0 MiB", "19.1 GiB".
std::string formatBytes(double bytes);

/// The model with another micro-batch size and global batch.
ModelConfig withBatch(const ModelConfig &model, int64_t mbs,
                      int64_t globalBatch);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_TUNER_H
