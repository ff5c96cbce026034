//===- Tuner.cpp - Grid search over pipeline configurations ---------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Two phases. Phase one schedules and simulates every candidate without
// gradient separation, on all threads. Phase two takes the separation
// variants, whose cost is dominated by the separation pass, in the order of
// their fused twin's lower bound (the busiest actor's work, each backward
// priced as its two halves, plus the gradient all-reduce: moving weight
// gradients into bubbles cannot beat it)
// and skips every one whose bound is no better than the best time found so
// far. Each variant's memory is its own simulation's: the scheduler may
// choose another order for it than for its twin.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Tuner.h"

#include "flexpipe/Scheduling/Export.h"
#include "flexpipe/Scheduling/Lowering.h"
#include "flexpipe/Support/Hash.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

using namespace flexpipe::sched;

std::string flexpipe::sched::formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  // (Rounded first: 1048575 B is 1.0 MiB, not 1024.0 KiB.)
  while (std::round(bytes * 10) >= 10240 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return llvm::formatv("{0:F1} {1}", bytes, units[unit]).str();
}

static llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

namespace {

/// An iteration time as ranks compare it: on a grid of relative width 1e-9,
/// so that two schedules whose times differ only by rounding (the same sums
/// in another order) tie and memory decides.
double rankTime(double seconds) {
  return seconds > 0 ? std::round(std::log(seconds) * 1e9) : seconds;
}

/// The stage priorities (forward and backward alike) a candidate tries:
/// breadth- and depth-first, with the circular placement also both with
/// interval pp (the paper's rule). Where each actor holds one stage
/// (one_to_one, one direction, no vocabulary slices) an order has nothing to
/// choose between, and every order would be the same schedule again: one.
std::vector<StagePriority> stageOrders(TunePlacement placement, int64_t pp,
                                       bool vocabParallel) {
  if (placement == TunePlacement::OneToOne && !vocabParallel)
    return {{StageOrder::BreadthFirst, 0}};
  std::vector<StagePriority> orders = {{StageOrder::BreadthFirst, 0},
                                       {StageOrder::DepthFirst, 0}};
  if (placement == TunePlacement::Circular) {
    orders.push_back({StageOrder::BreadthFirst, pp});
    orders.push_back({StageOrder::DepthFirst, pp});
  }
  return orders;
}

/// Whether `a` ranks before `b`: faster, or as fast and smaller.
bool ranksBefore(const Evaluation &a, const Evaluation &b) {
  const double ta = rankTime(a.iterationTime), tb = rankTime(b.iterationTime);
  if (ta != tb)
    return ta < tb;
  return a.peakBytes < b.peakBytes;
}

/// What a tuner placement is in a spec, in one place: its name, the
/// module's placement (and its keyword), and the placement's usual in-flight
/// rule, both as the affine map specText writes and as what the map gives
/// for entry `i` of its scope (an actor or a stage), with `s` the spec's
/// stage count (both directions') and `pp` the actors.
struct PlacementRule {
  const char *name;
  PlacementKind kind;
  const char *keyword;
  InflightScope scope;
  const char *inflight;
  int64_t (*limit)(int64_t i, int64_t pp, int64_t s);
};

const PlacementRule &placementRule(TunePlacement placement) {
  static const PlacementRule rules[kNumTunePlacements] = {
      {"one_to_one", PlacementKind::OneToOne, "one_to_one",
       InflightScope::PerActor,
       "per_actor affine_map<(a)[pp, s, m] -> (pp - a)>",
       [](int64_t a, int64_t pp, int64_t) { return pp - a; }},
      {"circular", PlacementKind::Circular, "circular", InflightScope::PerActor,
       "per_actor affine_map<(a)[pp, s, m] -> (s + pp - a * 2 - 1)>",
       [](int64_t a, int64_t pp, int64_t s) { return s + pp - a * 2 - 1; }},
      {"vshape", PlacementKind::VShape, "vshape", InflightScope::PerActor,
       "per_actor affine_map<(a)[pp, s, m] -> (s)>",
       [](int64_t, int64_t, int64_t s) { return s; }},
      {"bidirectional", PlacementKind::OneToOne, "one_to_one",
       InflightScope::PerStage,
       "per_stage affine_map<(i)[pp, s, m] -> (pp - i mod pp)>",
       [](int64_t i, int64_t pp, int64_t) { return pp - i % pp; }},
      // s counts both directions' stages; the limit is one direction's.
      {"vshape_bidirectional", PlacementKind::VShape, "vshape",
       InflightScope::PerActor,
       "per_actor affine_map<(a)[pp, s, m] -> (s floordiv 2)>",
       [](int64_t, int64_t, int64_t s) { return s / 2; }},
  };
  return rules[static_cast<int>(placement)];
}

/// The divisors of `n` that are at most `most`, increasing.
std::vector<int64_t> divisorsUpTo(int64_t n, int64_t most) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n && d <= most; ++d)
    if (n % d == 0)
      out.push_back(d);
  return out;
}

} // namespace

const char *flexpipe::sched::tunePlacementName(TunePlacement placement) {
  return placementRule(placement).name;
}

Candidate flexpipe::sched::oneFOneB(int64_t pp, int64_t dp, int64_t mbs,
                                    int64_t microbatches, bool vocabParallel) {
  Candidate c;
  c.pp = pp;
  c.dp = dp;
  c.mbs = mbs;
  c.microbatches = microbatches;
  c.vocabParallel = vocabParallel;
  return c;
}

ModelConfig flexpipe::sched::withBatch(const ModelConfig &model, int64_t mbs,
                                       int64_t globalBatch) {
  ModelConfig copy = model;
  copy.microBatchSize = mbs;
  copy.globalBatchSize = globalBatch;
  return copy;
}

llvm::Expected<TuneOptions>
flexpipe::sched::resolveOptions(const ModelConfig &model,
                                const ClusterConfig &cluster, TuneOptions o) {
  if (model.modules.size() != 1)
    return fail(llvm::formatv(
        "model '{0}' has {1} modules; flexpipe-tune searches single-module "
        "(GPT-style) models",
        model.name, model.modules.size()));
  const ModuleModel &m = model.modules.front();
  if (m.layers < 1)
    return fail("module '" + m.name + "' has no layers");
  if (o.gpus == 0)
    o.gpus = cluster.devices;
  if (o.gpus < 1)
    return fail(std::string("the number of ") + cluster.devicesWord() +
                " must be at least 1");
  if (o.gpus > cluster.devices)
    return fail(llvm::formatv("{0} {3} asked for, but cluster '{1}' has {2}; "
                              "use --gpus {2} or less, or a larger cluster "
                              "file",
                              o.gpus, cluster.name, cluster.devices,
                              cluster.devicesWord()));
  if (o.globalBatch == 0)
    o.globalBatch = model.globalBatchSize;
  if (o.globalBatch < 1)
    return fail("the global batch must be at least 1 sequence");
  if (o.memoryLimit == 0)
    o.memoryLimit = cluster.memoryBytes;
  if (o.memoryLimit < 0)
    return fail("the memory limit must be positive");
  if (o.threads < 1)
    o.threads = 1;

  // The paper enumerates powers of two; for a power-of-two device count and
  // global batch the divisors are exactly those, and for 3, 6 or 12 devices
  // (or a batch of 12) they keep pp = 3 x dp = 1 and the like in the space.
  if (o.pp.empty()) {
    o.pp = divisorsUpTo(o.gpus, m.layers);
  } else {
    for (int64_t pp : o.pp) {
      if (pp < 1 || o.gpus % pp != 0)
        return fail(llvm::formatv("pp = {0} does not divide the {1} {2}; "
                                  "pp x dp must equal the number of {2}",
                                  pp, o.gpus, cluster.devicesWord()));
      if (pp > m.layers)
        return fail(llvm::formatv("pp = {0} exceeds the model's {1} layers", pp,
                                  m.layers));
    }
  }
  if (o.mbs.empty()) {
    o.mbs = divisorsUpTo(o.globalBatch, o.globalBatch);
  } else {
    for (int64_t mbs : o.mbs)
      if (mbs < 1)
        return fail("micro-batch sizes must be at least 1");
  }
  if (o.placements.empty())
    for (int p = 0; p < kNumTunePlacements; ++p)
      o.placements.push_back(static_cast<TunePlacement>(p));
  for (int64_t v : o.circularChunks)
    if (v < 2)
      return fail("circular placements need at least 2 chunks per actor");
  if (o.vocabParallel == TuneOptions::Choice::On && !m.hasHead())
    return fail("module '" + m.name +
                "' has no vocabulary and LM head to split; drop "
                "--vocab-parallel=on");
  auto checkHooks = [](const auto &hooks, const char *kind) -> llvm::Error {
    for (size_t i = 0; i < hooks.size(); ++i) {
      if (hooks[i].name.empty() || !hooks[i].function)
        return fail(
            llvm::formatv("{0} {1} needs a name and a function", kind, i + 1));
      for (size_t j = 0; j < i; ++j)
        if (hooks[j].name == hooks[i].name)
          return fail(
              llvm::formatv("{0} '{1}' is given twice", kind, hooks[i].name));
    }
    return llvm::Error::success();
  };
  if (llvm::Error error = checkHooks(o.checks, "check"))
    return std::move(error);
  if (llvm::Error error = checkHooks(o.priorities, "custom priority"))
    return std::move(error);
  return o;
}

/// Why `m`'s vocabulary cannot be split over `pp` actors
/// (ModuleModel::canSplitVocabulary), the reason that holds.
static std::string whyNoVocabularySplit(const ModuleModel &m, int64_t pp) {
  const std::string why =
      !m.hasHead() ? "need an LM head"
      : pp < 2     ? "need 2 actors or more to split the vocabulary over"
                   : llvm::formatv("need a word of the vocabulary for each "
                                       "actor, and it has {0}",
                                   m.vocab)
                     .str();
  return llvm::formatv("pp {0}: the vocabulary-parallel embedding and head {1}",
                       pp, why);
}

/// Why enumerateCandidates found nothing: the sizes tried, those never tried
/// (more stages than layers), and per size the first reason met (`whyNot`;
/// `batchReason`: one of them is the batch).
static std::string emptySpaceMessage(const ModuleModel &m, const TuneOptions &o,
                                     const ClusterConfig *cluster,
                                     const std::vector<std::string> &whyNot,
                                     bool batchReason) {
  std::string message = llvm::formatv(
      "the search space is empty for {0} {1} and a global batch of "
      "{2} (pp tried: ",
      o.gpus,
      cluster ? cluster->devicesWord(o.gpus)
              : (o.gpus == 1 ? "device" : "devices"),
      o.globalBatch);
  for (size_t i = 0; i < o.pp.size(); ++i)
    message += (i ? ", " : "") + std::to_string(o.pp[i]);
  // Sizes that divide the devices but that no stage split of the layers
  // serves were never tried: say which.
  std::string beyond;
  for (int64_t pp = m.layers + 1; pp <= o.gpus; ++pp)
    if (o.gpus % pp == 0)
      beyond += (beyond.empty() ? "" : ", ") + std::to_string(pp);
  if (!beyond.empty())
    message += llvm::formatv("; not {0}: more stages than the {1} layers",
                             beyond, m.layers)
                   .str();
  message += ")";
  if (o.pp.empty())
    return message + llvm::formatv("; pp must divide the device count and be "
                                   "at most the {0} layers",
                                   m.layers)
                         .str();
  if (whyNot.empty())
    return message + "; no placement fits the layer count";
  for (const std::string &why : whyNot)
    message += "; " + why;
  if (batchReason)
    message += "; use a global batch divisible by dp x mbs";
  return message;
}

llvm::Expected<std::vector<Candidate>>
flexpipe::sched::enumerateCandidates(const ModelConfig &model,
                                     const TuneOptions &o,
                                     const ClusterConfig *cluster) {
  const ModuleModel &m = model.modules.front();
  std::vector<Candidate> out;
  std::vector<bool> vocabChoices;
  if (o.vocabParallel != TuneOptions::Choice::On)
    vocabChoices.push_back(false);
  if (o.vocabParallel != TuneOptions::Choice::Off && m.hasHead())
    vocabChoices.push_back(true);
  std::vector<Cttp> cttps = {Cttp::BwdFirst, Cttp::Interleaved};
  if (o.allowFwdFirst)
    cttps.push_back(Cttp::FwdFirst);
  std::vector<bool> separationChoices;
  if (o.separation != TuneOptions::Choice::On)
    separationChoices.push_back(false);
  if (o.separation != TuneOptions::Choice::Off)
    separationChoices.push_back(true);

  // For an empty space: per pp without a candidate, the first reason met.
  std::vector<std::string> whyNot;
  bool batchReason = false;
  for (int64_t pp : o.pp) {
    const int64_t dp = o.gpus / pp;
    const size_t before = out.size();
    std::string reason;
    bool reasonIsBatch = false;
    // The first reason, a placement's before the batch's (the batch's holds
    // for a few micro-batch sizes; a placement's for all of them).
    auto note = [&](std::string why, bool isBatch = false) {
      if (!reason.empty() && (isBatch || !reasonIsBatch))
        return;
      reason = std::move(why);
      reasonIsBatch = isBatch;
    };
    for (int64_t mbs : o.mbs) {
      if (o.globalBatch % (dp * mbs) != 0) {
        note(llvm::formatv("pp {0} x dp {1} with micro-batch size {2}: dp x "
                           "mbs = {3} does not divide the global batch {4}",
                           pp, dp, mbs, dp * mbs, o.globalBatch),
             true);
        continue;
      }
      const int64_t micro = o.globalBatch / (dp * mbs);
      for (TunePlacement placement : o.placements) {
        std::vector<int64_t> chunkChoices = {1};
        if (placement == TunePlacement::Circular)
          chunkChoices = o.circularChunks;
        else if (placement == TunePlacement::VShape ||
                 placement == TunePlacement::VShapeBidirectional)
          chunkChoices = {2};
        const bool bidirectional =
            placement == TunePlacement::Bidirectional ||
            placement == TunePlacement::VShapeBidirectional;
        // One actor: every placement is the same single stage.
        if (pp == 1 && placement != TunePlacement::OneToOne) {
          note(llvm::formatv("pp 1 with {0}: one actor holds the one stage, "
                             "which only one_to_one places",
                             tunePlacementName(placement)));
          continue;
        }
        if (bidirectional && micro < 2) {
          note(llvm::formatv("pp {0} with {1}: {2} micro-batch, fewer than "
                             "the 2 its two directions need",
                             pp, tunePlacementName(placement), micro));
          continue;
        }
        for (int64_t v : chunkChoices) {
          if (m.layers < pp * v) {
            note(llvm::formatv("pp {0} with {1}: {2} stages of one layer at "
                               "least, but the model has {3} layers",
                               pp, tunePlacementName(placement), pp * v,
                               m.layers));
            continue;
          }
          for (bool vp : vocabChoices) {
            // The vocabulary is split over the actors: one actor has
            // nothing to split it with (its spec would not compile).
            if (vp && !m.canSplitVocabulary(pp)) {
              note(whyNoVocabularySplit(m, pp));
              continue;
            }
            // 1F1B at these sizes, then this placement and its chunks.
            Candidate c = oneFOneB(pp, dp, mbs, micro, vp);
            c.placement = placement;
            c.chunks = v;
            const std::vector<StagePriority> orders =
                stageOrders(placement, pp, vp);
            for (Cttp cttp : cttps)
              for (const StagePriority &fwd : orders)
                for (const StagePriority &bwd : orders)
                  for (bool sep : separationChoices) {
                    c.cttp = cttp;
                    c.fwd = fwd;
                    c.bwd = bwd;
                    c.separation = sep;
                    out.push_back(c);
                  }
            // Plugin priorities replace all three priorities.
            c.cttp = Cttp::BwdFirst;
            c.fwd = c.bwd = StagePriority();
            for (const TuneOptions::NamedPriority &custom : o.priorities)
              for (bool sep : separationChoices) {
                c.priority = custom.name;
                c.separation = sep;
                out.push_back(c);
              }
          }
        }
      }
    }
    if (out.size() == before && !reason.empty()) {
      whyNot.push_back(std::move(reason));
      batchReason |= reasonIsBatch;
    }
  }
  if (out.empty())
    return fail(emptySpaceMessage(m, o, cluster, whyNot, batchReason));
  return out;
}

PipelineSpec flexpipe::sched::pipelineSpec(const Candidate &c,
                                           const ModelConfig &model) {
  const ModuleModel &m = model.modules.front();
  PipelineSpec spec;
  spec.actors = static_cast<int32_t>(c.pp);
  spec.microbatches = static_cast<int32_t>(c.microbatches);
  ModuleSpec module;
  module.name = m.name;
  module.layers = m.layers;
  module.vocabParallel = c.vocabParallel;
  PlacementSpec &placement = module.placement;
  placement.chunks = c.chunks;
  placement.bidirectional = c.directions() == 2;
  const PlacementRule &rule = placementRule(c.placement);
  placement.kind = rule.kind;
  for (int64_t a = 0; a < c.pp; ++a)
    placement.actors.push_back(a);
  spec.modules.push_back(module);

  PrioritySpec priority;
  priority.cttp = c.cttp;
  priority.fwd = c.fwd;
  priority.bwd = c.bwd;
  spec.priorities.push_back(priority);

  // The placement's usual in-flight rule, as specText writes it.
  InflightSpec in;
  in.scope = rule.scope;
  const int64_t stages = c.stagesPerDirection() * c.directions();
  const int64_t entries = rule.scope == InflightScope::PerStage ? stages : c.pp;
  for (int64_t i = 0; i < entries; ++i)
    in.limits.push_back(rule.limit(i, c.pp, stages));
  spec.inflight.push_back(std::move(in));
  return spec;
}

const char *flexpipe::sched::cttpKeyword(Cttp cttp) {
  switch (cttp) {
  case Cttp::BwdFirst:
    return "bwd_first";
  case Cttp::FwdFirst:
    return "fwd_first";
  case Cttp::Interleaved:
    return "interleaved";
  }
  return "?";
}

std::string flexpipe::sched::stpKeyword(const StagePriority &p) {
  std::string text =
      p.order == StageOrder::BreadthFirst ? "breadth_first" : "depth_first";
  if (p.interval > 0)
    text += ", " + std::to_string(p.interval);
  return text;
}

std::string flexpipe::sched::specText(const Candidate &c,
                                      const ModelConfig &model,
                                      const std::string &name,
                                      int64_t separationRounds,
                                      const std::vector<std::string> &checks) {
  const ModuleModel &m = model.modules.front();
  std::ostringstream os;
  os << "flexpipe.pipeline @" << name << " actors(" << c.pp << ") microbatches("
     << c.microbatches << ") {\n";
  os << "  flexpipe.module " << formatSymbol(m.name) << " layers(" << m.layers
     << ") placement(";
  const PlacementRule &rule = placementRule(c.placement);
  os << rule.keyword << ")";
  if (c.directions() == 2)
    os << " bidirectional";
  if (rule.kind != PlacementKind::OneToOne)
    os << " chunks(" << c.chunks << ")";
  if (c.vocabParallel)
    os << " vocab_parallel";
  if (!c.priority.empty())
    os << "\n  flexpipe.priority custom(\"" << c.priority << "\")\n";
  else
    os << "\n  flexpipe.priority cttp<" << cttpKeyword(c.cttp) << "> fstp<"
       << stpKeyword(c.fwd) << "> bstp<" << stpKeyword(c.bwd) << ">\n";
  os << "  flexpipe.inflight " << rule.inflight << "\n";
  for (const std::string &check : checks)
    os << "  flexpipe.check \"" << check << "\"\n";
  if (c.separation)
    os << "  flexpipe.optimize gradient_separation max_rounds("
       << separationRounds << ")\n";
  os << "}\n";
  return os.str();
}

std::string flexpipe::sched::describe(const Candidate &c) {
  std::ostringstream os;
  os << tunePlacementName(c.placement);
  if (c.placement == TunePlacement::Circular)
    os << " v" << c.chunks;
  if (c.vocabParallel)
    os << " +vocab";
  auto stp = [](const StagePriority &p) {
    std::string text = p.order == StageOrder::BreadthFirst ? "bf" : "df";
    if (p.interval > 0)
      text += ":" + std::to_string(p.interval);
    return text;
  };
  if (!c.priority.empty())
    os << ", custom(" << c.priority << ")";
  else
    os << ", " << cttpKeyword(c.cttp) << " " << stp(c.fwd) << "/" << stp(c.bwd);
  if (c.separation)
    os << ", separation";
  return os.str();
}

namespace {

/// A candidate resolved to a scheduler problem, with what each actor holds.
struct Prepared {
  ModelConfig sized;
  std::optional<BuiltProblem> built;
  StageLayout layout;
  ActorHoldings held;
  std::string error;
  bool otherJob = false; ///< the error: the profile is another job's
};

/// The one way a candidate becomes a problem (evaluate and the bound).
void prepareCandidate(const Candidate &c, const ModelConfig &model,
                      const ClusterConfig &cluster, const TuneOptions &options,
                      Prepared &out) {
  out.sized = withBatch(model, c.mbs, options.globalBatch);
  PipelineSpec spec = pipelineSpec(c, out.sized);
  spec.model = &out.sized;
  spec.cluster = &cluster;
  // Plugin hooks, as flexpipe-compile passes them for the written spec:
  // every check, and the candidate's priority on every actor.
  for (const TuneOptions::NamedCheck &check : options.checks) {
    spec.checks.push_back(check.function);
    spec.checkNames.push_back(check.name);
  }
  if (!c.priority.empty()) {
    auto custom = llvm::find_if(options.priorities,
                                [&](const TuneOptions::NamedPriority &p) {
                                  return p.name == c.priority;
                                });
    if (custom == options.priorities.end()) {
      out.error = "custom priority '" + c.priority +
                  "' is not among the tuner's priorities";
      return;
    }
    spec.priorities.front().custom = custom->function;
    spec.priorities.front().customName = custom->name;
  }
  llvm::Expected<BuiltProblem> built = buildProblem(spec);
  if (!built) {
    out.error = llvm::toString(built.takeError());
    return;
  }
  out.layout = stageLayoutOf(*built);
  // A run's profile prices the job it was measured on: a candidate with as
  // many stages, every one of them listed (priced as flexpipe-compile
  // --profile prices it).
  if (const Profile *profile = options.profile) {
    std::string why;
    if (llvm::Error error = checkProfileFits(*profile, out.layout, &out.sized))
      why = llvm::toString(std::move(error));
    for (int32_t stage = 0; why.empty() && stage < built->numStages; ++stage)
      if (!profile->stage(stage))
        why = llvm::formatv(
                  "the profile{0} lists {1} of the candidate's {2} stages "
                  "(not stage {3}): a run's profile prices the job it was "
                  "measured on (restrict the search to its --pp and --mbs, "
                  "or tune on a measured cluster from flexpipe-profile)",
                  profile->path.empty() ? "" : " '" + profile->path + "'",
                  profile->stages.size(), built->numStages, stage)
                  .str();
    if (!why.empty()) {
      out.error = std::move(why);
      out.otherJob = true;
      return;
    }
  }
  out.built = std::move(*built);
  out.held = actorHoldings(out.layout, out.sized, cluster);
}

} // namespace

double flexpipe::sched::iterationLowerBound(const Candidate &c,
                                            const ModelConfig &model,
                                            const ClusterConfig &cluster,
                                            const TuneOptions &options) {
  Prepared prepared;
  prepareCandidate(c, model, cluster, options, prepared);
  if (!prepared.built ||
      (options.memoryLimit > 0 &&
       llvm::any_of(prepared.held.staticBytes,
                    [&](double bytes) { return bytes > options.memoryLimit; })))
    return std::numeric_limits<double>::infinity();
  const Problem &p = prepared.built->problem;
  const int32_t numParts = static_cast<int32_t>(p.parts.size());
  // The durations the simulation uses: the part's (the analytic model's
  // share), or a profile's measured ones for its stage.
  std::vector<Durations> durations(numParts);
  for (int32_t part = 0; part < numParts; ++part)
    durations[part] =
        options.profile
            ? profiledDurations(p.parts[part], *options.profile, true)
            : p.parts[part].cost;
  auto duration = [&](int32_t part, CompKind kind) {
    return durations[part][static_cast<int>(kind)];
  };
  const bool split = c.separation;
  // The backward work that carries the gradient on, and the rest.
  auto carry = [&](int32_t part) {
    return duration(part, split ? CompKind::Igrad : CompKind::Bwd);
  };
  auto weights = [&](int32_t part) {
    return split ? duration(part, CompKind::Wgrad) : 0.0;
  };
  // head: the longest chain of forwards before a part's first forward can
  // start; tail: the longest chain of gradient work that must follow any of
  // its input gradients (the parts before it, backwards). Parts come in
  // an order where an edge may point either way, so relax to a fixpoint
  // (the part graph is a DAG; at most numParts rounds).
  std::vector<double> head(numParts, 0), tail(numParts, 0);
  for (int32_t round = 0; round < numParts; ++round) {
    bool changed = false;
    for (auto [from, to] : p.edges) {
      const double h = head[from] + duration(from, CompKind::Fwd);
      const double t = tail[from] + carry(from);
      if (h > head[to] * (1 + 1e-15)) {
        head[to] = h;
        changed = true;
      }
      if (t > tail[to] * (1 + 1e-15)) {
        tail[to] = t;
        changed = true;
      }
    }
    if (!changed)
      break;
  }
  const double inf = std::numeric_limits<double>::infinity();
  // Every member of a blocking collective spends at least its duration in
  // each instance: the vocabulary-parallel head's exchange, priced as the
  // simulation prices it (over the candidate's devices). It comes after the
  // member's head forward and before its head backward, so it counts as
  // work of that part.
  std::vector<double> collective(numParts, 0);
  const std::vector<int64_t> all = replicaDevices(c.pp, c.dp);
  for (size_t r = 0; r < p.registered.size(); ++r) {
    const Registered &reg = p.registered[r];
    const StageMeta &meta = prepared.built->stageMeta[reg.stage];
    if (reg.mode != InstMode::Collective || !meta.isVocabHead() ||
        reg.actors.size() < 2)
      continue;
    std::vector<int64_t> devices;
    for (int32_t a : reg.actors)
      devices.push_back(all[a]);
    const double instances =
        static_cast<double>(registeredInstances(p, static_cast<int32_t>(r)));
    const double each =
        vocabStatsTime(cluster, devices, prepared.sized.modules.front(),
                       prepared.sized.microBatchSize);
    for (int32_t part = 0; part < numParts; ++part)
      if (p.parts[part].stage == reg.stage &&
          std::binary_search(reg.actors.begin(), reg.actors.end(),
                             p.parts[part].actor))
        collective[part] += instances * each;
  }
  // Per actor, its parts by decreasing head: the work of the parts whose
  // head is at least h cannot start before h (a release-time bound), and
  // the input gradient it computes last still has the least tail of those
  // parts to run after it; its weight gradients need no tail.
  std::vector<std::vector<int32_t>> partsOf(p.numActors);
  for (int32_t part = 0; part < numParts; ++part)
    if (p.parts[part].mbEnd > p.parts[part].mbBegin)
      partsOf[p.parts[part].actor].push_back(part);
  auto count = [&](int32_t part) {
    return static_cast<double>(p.parts[part].mbEnd - p.parts[part].mbBegin);
  };
  double bound = 0;
  for (int32_t a = 0; a < p.numActors; ++a) {
    std::vector<int32_t> &parts = partsOf[a];
    std::sort(parts.begin(), parts.end(),
              [&](int32_t x, int32_t y) { return head[x] > head[y]; });
    double gradient = 0, w = 0, leastTail = inf;
    for (int32_t part : parts) {
      const double own =
          count(part) * (duration(part, CompKind::Fwd) + carry(part)) +
          collective[part];
      gradient += own;
      w += count(part) * weights(part);
      leastTail = std::min(leastTail, tail[part]);
      bound =
          std::max({bound, head[part] + gradient + leastTail,
                    head[part] + gradient + w, head[part] + own + tail[part]});
    }
  }
  const AfterPipeline after =
      afterPipeline(prepared.layout, prepared.held, c.dp, prepared.sized,
                    cluster, options.profile);
  return bound + after.gradSync + after.step;
}

/// Evaluation::schedule: the candidate's layout and every actor's ops.
static uint64_t scheduleHash(const Candidate &c, const Program &program) {
  uint64_t h = flexpipe::kFnv1aOffset;
  auto add = [&](int64_t value) {
    h = flexpipe::fnv1a(
        std::string_view(reinterpret_cast<const char *>(&value), sizeof value),
        h);
  };
  for (int64_t value :
       {c.pp, c.dp, c.mbs, c.microbatches, static_cast<int64_t>(c.placement),
        c.chunks, static_cast<int64_t>(c.vocabParallel),
        static_cast<int64_t>(program.numStages)})
    add(value);
  for (const std::vector<ProgOp> &ops : program.actors) {
    add(-1); // between actors
    for (const ProgOp &op : ops)
      for (int64_t value :
           {static_cast<int64_t>(op.kind), static_cast<int64_t>(op.stage),
            static_cast<int64_t>(op.mb), static_cast<int64_t>(op.peer),
            static_cast<int64_t>(op.token), static_cast<int64_t>(op.group),
            static_cast<int64_t>(op.inst)})
        add(value);
  }
  return h | 1; // never 0, "not scheduled"
}

Evaluation
flexpipe::sched::evaluate(const Candidate &c, const ModelConfig &model,
                          const ClusterConfig &cluster,
                          const TuneOptions &options, EvaluationDetail *detail,
                          llvm::ThreadPoolInterface *pool, double cutoff) {
  Evaluation e;
  e.candidate = c;
  Prepared prepared;
  prepareCandidate(c, model, cluster, options, prepared);
  if (!prepared.built) {
    e.error = prepared.error;
    e.otherJob = prepared.otherJob;
    return e;
  }
  const ModelConfig &sized = prepared.sized;
  const BuiltProblem *built = &*prepared.built;
  // Parameters, gradients and optimizer state alone may not fit: then the
  // candidate is rejected without scheduling it (peakBytes is then a lower
  // bound, the static part).
  const ActorHoldings &held = prepared.held;
  if (options.memoryLimit > 0 &&
      llvm::any_of(held.staticBytes,
                   [&](double bytes) { return bytes > options.memoryLimit; })) {
    e.peakBytes = *llvm::max_element(held.staticBytes);
    e.fitsMemory = false;
    e.staticOnly = true;
    return e;
  }
  // What the written spec asks flexpipe-compile to do after scheduling,
  // priced as flexpipe-compile --dp prices it.
  LoweringOptions lowering;
  lowering.timeModel = TimeModel::Cost;
  lowering.model = &sized;
  lowering.cluster = &cluster;
  lowering.profile = options.profile;
  lowering.dp = c.dp;
  lowering.wantCosts = true;
  if (c.separation) {
    SeparationOptions &separation = lowering.bubbles.separation.emplace();
    separation.maxRounds = options.separationRounds;
    separation.pool = pool;
  }
  const AfterPipeline after = afterPipeline(prepared.layout, held, c.dp, sized,
                                            cluster, options.profile);
  if (!c.separation && !options.profile)
    lowering.cutoff = cutoff - after.gradSync - after.step;
  LoweredProgram lowered;
  if (llvm::Error error = lowerProblem(*built, lowering, lowered)) {
    e.error = llvm::toString(std::move(error));
    return e;
  }
  const ScheduleResult &schedule = lowered.schedule;
  if (schedule.cut) {
    e.skipped = true;
    e.error =
        llvm::formatv("skipped: its schedule cannot end by {0:e3} s", cutoff)
            .str();
    return e;
  }
  if (!schedule.ok) {
    e.error = "cannot be scheduled: " + schedule.error;
    // The summary names no hook; the waits do ("... the plugin check
    // function 'x' refuses it"): keep the first that blames a plugin.
    auto blamed = llvm::find_if(schedule.waits, [](const std::string &w) {
      return llvm::StringRef(w).contains("plugin");
    });
    if (blamed != schedule.waits.end())
      e.error += " (" + *blamed + ")";
    e.hookFailed = schedule.hookFailed;
    return e;
  }
  Program &program = lowered.program;
  Simulator simulator;
  Simulator::ReplicaRun slowest;
  llvm::Error error = simulator.prepare(program);
  if (!error)
    error =
        simulator.runSlowestReplica(program, &sized, &cluster, options.profile,
                                    c.dp, TimeModel::Cost, slowest);
  if (error) {
    e.error = llvm::toString(std::move(error));
    return e;
  }
  SimCosts &costs = slowest.costs;
  SimResult &sim = slowest.result;

  e.pipelineTime = sim.iterationTime;
  e.bubbleRatio = sim.bubbleRatio();
  for (double bytes : sim.totalBytes)
    e.peakBytes = std::max(e.peakBytes, bytes);
  for (size_t a = 0; a < sim.busy.size(); ++a) {
    // The actor's work as the simulator counts it busy on a core of its
    // own: each op's overhead and each computation's duration. Not
    // sim.busy alone, which with shared cores also holds the waits for a
    // core and the contention slowdown that another order of the work (a
    // separation variant) need not have: no lower bound.
    double work = 0, split = 0;
    for (const ProgOp &op : program.actors[a]) {
      const double own =
          costs.instructionOverhead +
          (isCompute(op.kind)        ? costs.durationOf(op.stage, op.kind)
           : op.kind == OpKind::Exec ? costs.execTime
                                     : 0.0);
      work += own;
      // With each backward as its two halves.
      split += op.kind != OpKind::Bwd
                   ? own
                   : 2 * costs.instructionOverhead +
                         costs.durationOf(op.stage, OpKind::Igrad) +
                         costs.durationOf(op.stage, OpKind::Wgrad);
    }
    e.busiest = std::max(e.busiest, std::min(work, sim.busy[a]));
    e.busiestSplit = std::max(e.busiestSplit, split);
  }

  e.gradSyncTime = after.gradSync;
  e.stepTime = after.step;
  e.iterationTime = e.pipelineTime + e.gradSyncTime + e.stepTime;
  e.tokensPerSecond = e.iterationTime > 0
                          ? static_cast<double>(options.globalBatch) *
                                sized.tokensPerSample(program.moduleNames) /
                                e.iterationTime
                          : 0;
  e.fitsMemory = options.memoryLimit <= 0 || e.peakBytes <= options.memoryLimit;
  e.schedule = scheduleHash(c, program);
  if (detail) {
    detail->program = std::move(program);
    detail->costs = std::move(costs);
    detail->sim = std::move(sim);
  }
  return e;
}

namespace {

/// Runs `work(i)` for i in [0, n) on `threads` threads (the caller's
/// included), reporting progress from the calling thread.
void parallelFor(size_t n, int threads, const std::function<void(size_t)> &work,
                 const std::function<void(size_t)> &progress) {
  std::atomic<size_t> next{0}, done{0};
  auto worker = [&](bool report) {
    for (size_t i = next++; i < n; i = next++) {
      work(i);
      ++done;
      if (report && progress)
        progress(done.load());
    }
  };
  std::vector<std::thread> pool;
  const int extra =
      std::max(0, std::min<int>(threads, static_cast<int>(n)) - 1);
  for (int t = 0; t < extra; ++t)
    pool.emplace_back(worker, false);
  worker(true);
  for (std::thread &t : pool)
    t.join();
  if (progress)
    progress(done.load());
}

/// The indices of `candidates` by increasing lower bound (ties in their
/// order), with the bounds (iterationLowerBound) in `bound`; without
/// options.exact, which alone prunes by them, their order and bounds of 0.
std::vector<size_t> byLowerBound(const std::vector<Candidate> &candidates,
                                 const ModelConfig &model,
                                 const ClusterConfig &cluster,
                                 const TuneOptions &options,
                                 std::vector<double> &bound) {
  bound.assign(candidates.size(), 0);
  std::vector<size_t> order(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i)
    order[i] = i;
  if (options.exact > 0) {
    parallelFor(
        candidates.size(), options.threads,
        [&](size_t i) {
          bound[i] =
              iterationLowerBound(candidates[i], model, cluster, options);
        },
        nullptr);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return bound[a] < bound[b]; });
  }
  return order;
}

/// An evaluation that says why `c` was skipped (`why` follows "skipped: ").
Evaluation skipped(const Candidate &c, const std::string &why) {
  Evaluation e;
  e.candidate = c;
  e.skipped = true;
  e.error = "skipped: " + why;
  return e;
}

/// The search of tune(): every fused candidate in lower-bound order, then
/// the separation variants that can still win (docs/Tuning.md).
class Search {
public:
  Search(const ModelConfig &model, const ClusterConfig &cluster,
         const TuneOptions &options)
      : model(model), cluster(cluster), options(options) {}

  /// Splits the space into fused candidates (with the fused twin of every
  /// separation variant, needed for its bound, even when only variants were
  /// asked for) and variants.
  void split(const std::vector<Candidate> &space);
  /// Phase one: fused candidates in the order of their lower bounds, so that
  /// the fastest are found early; one whose bound exceeds the
  /// options.exact-th best time found so far cannot enter that top and is
  /// not simulated.
  void runFused();
  /// Phase two: separation variants, most promising first, pruned by bound.
  void runVariants();
  /// The evaluations ranked and rejected, with the counts.
  void collect(TuneResult &result);
  /// The fused candidates' evaluations (with --separation on, where they
  /// are not listed, the fused twins of the variants).
  const std::vector<Evaluation> &fusedEvaluations() const { return fusedEval; }

private:
  /// A variant to separate, its fused twin and its lower bound.
  struct Pending {
    size_t variant, twin;
    double bound;
  };
  /// The variants worth separating (the heuristics of TuneOptions); the
  /// others decided here (outside the heuristics' window, or as their
  /// twin) get their evaluation, and
  /// `outsideWindow` counts those not tried.
  std::vector<Pending> chooseVariants(const std::vector<double> &ownBound,
                                      size_t &outsideWindow);
  /// Progress from `offset` of all candidates on.
  std::function<void(size_t)> report(size_t offset) const {
    return [this, offset](size_t done) {
      if (options.progress)
        options.progress(offset + done, fused.size() + variants.size());
    };
  }
  /// The options.exact-th best time so far (infinite until there are that
  /// many).
  double threshold();
  /// Offers a simulated time to the exact fastest; a schedule already
  /// offered (a twin running it) counts once.
  void recordTime(double time, uint64_t schedule);
  /// Decides `variant`: not tried, and why (`why` follows "skipped: ").
  void notTried(size_t variant, const std::string &why) {
    variantEval[variant] = skipped(variants[variant], why);
    ran[variant] = 1;
  }
  /// A twin's time, or where it was skipped its lower bound.
  double twinTime(size_t twin) const {
    return fusedEval[twin].skipped ? fusedBound[twin]
                                   : fusedEval[twin].iterationTime;
  }
  /// Whether a twin is too slow for its variants to be tried
  /// (TuneOptions::separationWindow; `best` is then the best fused time).
  bool beyondWindow(size_t twin) const {
    return options.separationWindow > 0 &&
           twinTime(twin) > best * options.separationWindow;
  }

  const ModelConfig &model;
  const ClusterConfig &cluster;
  const TuneOptions &options;
  std::vector<Candidate> fused, variants;
  std::vector<size_t> twins; ///< per variant, its fused twin
  std::vector<double> fusedBound;
  /// Per fused candidate: its scheduling was given up at its cutoff, so
  /// that fusedBound is all that is known of its time.
  std::vector<uint8_t> fusedCut;
  std::vector<Evaluation> fusedEval, variantEval;
  std::vector<uint8_t> ran; ///< per variant: decided (simulated or not)
  /// Keeps `detail` when `e` is the fastest so far (with the least peak
  /// memory among equals): collect() hands it on for ranked.front().
  void offerDetail(const Evaluation &e, EvaluationDetail &detail);
  std::mutex topMutex;
  std::mutex detailMutex;
  std::optional<std::pair<Evaluation, EvaluationDetail>> fastest;
  std::vector<double> topTimes; ///< a max-heap of the exact fastest times
  std::set<uint64_t> recorded;  ///< the schedules offered to topTimes
  double best = std::numeric_limits<double>::infinity();
  /// What became of the fused candidates (counted where they are
  /// candidates, not with --separation on) and of the variants.
  std::atomic<size_t> fusedBounded{0}, fusedSimulated{0};
  std::atomic<size_t> pruned{0}, simulated{0};
};

void Search::split(const std::vector<Candidate> &space) {
  std::map<decltype(Candidate().tie()), size_t> twinOf;
  for (const Candidate &c : space) {
    Candidate base = c;
    base.separation = false;
    auto [twin, isNew] = twinOf.emplace(base.tie(), fused.size());
    if (isNew)
      fused.push_back(base);
    if (c.separation) {
      variants.push_back(c);
      twins.push_back(twin->second);
    }
  }
}

double Search::threshold() {
  std::lock_guard<std::mutex> lock(topMutex);
  return options.exact > 0 && topTimes.size() >= options.exact
             ? topTimes.front()
             : std::numeric_limits<double>::infinity();
}

void Search::recordTime(double time, uint64_t schedule) {
  std::lock_guard<std::mutex> lock(topMutex);
  if (!recorded.insert(schedule).second)
    return;
  topTimes.push_back(time);
  std::push_heap(topTimes.begin(), topTimes.end());
  if (topTimes.size() > options.exact) {
    std::pop_heap(topTimes.begin(), topTimes.end());
    topTimes.pop_back();
  }
}

/// "1st", "2nd", "3rd", "4th", ..., "11th", ..., "21st".
std::string ordinal(size_t n) {
  const char *suffix = "th";
  if (n % 100 < 11 || n % 100 > 13)
    suffix = n % 10 == 1   ? "st"
             : n % 10 == 2 ? "nd"
             : n % 10 == 3 ? "rd"
                           : "th";
  return std::to_string(n) + suffix;
}

void Search::offerDetail(const Evaluation &e, EvaluationDetail &detail) {
  if (!e.ok() || !e.fitsMemory)
    return;
  std::lock_guard<std::mutex> lock(detailMutex);
  if (fastest && !ranksBefore(e, fastest->first))
    return;
  fastest.emplace(e, std::move(detail));
}

void Search::runFused() {
  const std::vector<size_t> byBound =
      byLowerBound(fused, model, cluster, options, fusedBound);
  fusedEval.assign(fused.size(), Evaluation());
  fusedCut.assign(fused.size(), 0);
  parallelFor(
      fused.size(), options.threads,
      [&](size_t k) {
        const size_t i = byBound[k];
        // Skipped when its bound, or while scheduling its schedule, shows
        // it cannot enter the top.
        const double limit = threshold();
        // An infinite bound: the candidate cannot be prepared, and its
        // evaluation says why at once.
        if (fusedBound[i] > limit * (1 + 1e-9) &&
            std::isfinite(fusedBound[i])) {
          fusedEval[i] = skipped(
              fused[i],
              llvm::formatv("its lower bound {0:e3} s exceeds the "
                            "{1} best time {2:e3} s",
                            fusedBound[i], ordinal(options.exact), limit));
          ++fusedBounded;
          return;
        }
        const double cut = limit * (1 + 1e-9);
        EvaluationDetail detail;
        fusedEval[i] =
            evaluate(fused[i], model, cluster, options, &detail, nullptr, cut);
        if (options.separation != TuneOptions::Choice::On) // else unranked
          offerDetail(fusedEval[i], detail);
        Evaluation &e = fusedEval[i];
        if (e.skipped) {
          // What the cut shows is a lower bound too (twinTime).
          fusedBound[i] = std::max(fusedBound[i], cut);
          fusedCut[i] = 1;
          e.error = llvm::formatv("skipped: its schedule cannot end within "
                                  "the {0} best time {1:e3} s",
                                  ordinal(options.exact), limit)
                        .str();
          ++fusedBounded;
          return;
        }
        if (e.ok() && e.fitsMemory)
          ++fusedSimulated;
        if (e.ok() && e.fitsMemory && options.exact > 0)
          recordTime(e.iterationTime, e.schedule);
      },
      report(0));
  for (const Evaluation &e : fusedEval)
    if (e.ok() && e.fitsMemory)
      best = std::min(best, e.iterationTime);
}

std::vector<Search::Pending>
Search::chooseVariants(const std::vector<double> &ownBound,
                       size_t &outsideWindow) {
  std::vector<Pending> pending;
  outsideWindow = 0;
  for (size_t v = 0; v < variants.size(); ++v) {
    const size_t twin = twins[v];
    const Evaluation &t = fusedEval[twin];
    // (Never above the busiest actor's: halves longer than the whole need
    // not make it longer.)
    double bound =
        std::min(t.busiest, t.busiestSplit) + t.gradSyncTime + t.stepTime;
    const bool outside = beyondWindow(twin);
    if (fusedCut[twin]) {
      // Chosen by its twin's time below, where only a lower bound of it is
      // known: runVariants evaluates the twin in full if it is chosen.
      bound = 0;
    } else if (t.skipped) {
      // Its own bound, where the window does not decide already. One over
      // the threshold still takes its place among the fastest twins'
      // (skipped in runVariants): the places must go as in an exhaustive
      // search (dropped here, it gave its place to a slower twin's variant,
      // and --exact 1 found a schedule --exhaustive does not try).
      bound = outside ? 0 : ownBound[v];
    } else if (!t.ok() || t.staticOnly) {
      // What the variant's own evaluation says too: the same diagnosis, or
      // the same parameters, gradients and optimizer state over the limit.
      variantEval[v] = t;
      variantEval[v].candidate = variants[v];
      ran[v] = 1;
      continue;
    }
    if (outside) {
      notTried(v,
               llvm::formatv("separation is not tried: its fused twin "
                             "takes at least {0:e3} s, over {1}x the best "
                             "fused time {2:e3} s",
                             twinTime(twin), options.separationWindow, best));
      ++outsideWindow;
      continue;
    }
    pending.push_back({v, twin, bound});
  }
  // The heuristic limits: the fastest fused twins only, then by bound. A
  // variant whose busiest actor alone takes as long as its twin (a twin
  // without bubbles: one actor) cannot be faster than the twin; the places
  // go to those that can, and to those whose twin fits before those whose
  // twin does not (its variant may fit: the scheduler may order it
  // otherwise, but seldom does).
  if (options.separationTop > 0 && pending.size() > options.separationTop) {
    // (A twin given up at its cutoff is skipped too: fusedCut.)
    auto canGain = [&](const Pending &p) {
      return fusedEval[p.twin].skipped ||
             p.bound < twinTime(p.twin) * (1 - 1e-9);
    };
    auto twinFits = [&](const Pending &p) {
      return fusedEval[p.twin].skipped || fusedEval[p.twin].fitsMemory;
    };
    std::stable_sort(pending.begin(), pending.end(),
                     [&](const Pending &a, const Pending &b) {
                       if (canGain(a) != canGain(b))
                         return canGain(a);
                       if (twinFits(a) != twinFits(b))
                         return twinFits(a);
                       return twinTime(a.twin) < twinTime(b.twin);
                     });
    // A twin that runs the schedule of a twin with a place (a same_schedule
    // row) gives the same variant: it takes no place. With
    // --allow-fwd-first three such twins took three of the 8, and the top
    // lost a variant the smaller space ranked.
    std::set<uint64_t> placed;
    size_t kept = 0;
    for (const Pending &p : pending) {
      const Evaluation &t = fusedEval[p.twin];
      const bool known = !t.skipped && t.ok();
      if (kept < options.separationTop && known &&
          !placed.insert(t.schedule).second) {
        notTried(p.variant, "its fused twin runs the schedule of a faster "
                            "twin, whose variant is tried");
        ++outsideWindow;
        continue;
      }
      pending[kept++] = p;
    }
    pending.resize(kept);
    if (pending.size() <= options.separationTop)
      return pending;
    for (size_t i = options.separationTop; i < pending.size(); ++i) {
      const Pending &p = pending[i];
      if (!canGain(p))
        notTried(p.variant,
                 llvm::formatv("separation cannot beat its fused twin: the "
                               "busiest actor alone ({0:e3} s with the "
                               "gradient sync) takes as long",
                               p.bound));
      else if (!ran[p.variant]) // (decided in an earlier round: kept)
        notTried(p.variant,
                 llvm::formatv("separation is tried on the variants of the "
                               "{0} fastest fused candidates only",
                               options.separationTop));
    }
    outsideWindow += pending.size() - options.separationTop;
    pending.resize(options.separationTop);
  }
  return pending;
}

void Search::runVariants() {
  variantEval.assign(variants.size(), Evaluation());
  ran.assign(variants.size(), 0);
  // Separation may make a variant faster than its twin: where the twin was
  // skipped by its bound (and is inside the window), the variant's own
  // bound decides.
  std::vector<double> ownBound(variants.size(), 0);
  std::vector<size_t> needBound;
  for (size_t v = 0; v < variants.size(); ++v)
    if (fusedEval[twins[v]].skipped && !fusedCut[twins[v]] &&
        !beyondWindow(twins[v]))
      needBound.push_back(v);
  parallelFor(
      needBound.size(), options.threads,
      [&](size_t k) {
        ownBound[needBound[k]] = iterationLowerBound(variants[needBound[k]],
                                                     model, cluster, options);
      },
      nullptr);
  // A chosen variant whose twin was skipped by its bound or given up while
  // being scheduled: the twin is evaluated in full and the choice made
  // again, so that the choice is the one the twins' times make, as in an
  // exhaustive search (a twin chosen by its lower bound stands in front of
  // twins it may be slower than; one not chosen is slower than every one
  // chosen). With TuneOptions::exact >= separationTop the twins chosen are
  // among the exact fastest, and this does not happen.
  std::vector<Pending> pending;
  size_t outsideWindow = 0;
  for (;;) {
    pending = chooseVariants(ownBound, outsideWindow);
    std::vector<size_t> unknown;
    for (const Pending &p : pending)
      if (fusedEval[p.twin].skipped && !llvm::is_contained(unknown, p.twin))
        unknown.push_back(p.twin);
    if (unknown.empty())
      break;
    parallelFor(
        unknown.size(), options.threads,
        [&](size_t k) {
          fusedEval[unknown[k]] =
              evaluate(fused[unknown[k]], model, cluster, options);
        },
        nullptr);
    for (size_t twin : unknown) {
      fusedCut[twin] = 0;
      fusedSimulated += fusedEval[twin].ok() && fusedEval[twin].fitsMemory;
    }
    fusedBounded -= unknown.size();
  }
  std::sort(
      pending.begin(), pending.end(),
      [](const Pending &a, const Pending &b) { return a.bound < b.bound; });
  // A variant enters the top the fused candidates entered (with --separation
  // on, where they are not ranked, the top of the variants alone).
  if (options.separation == TuneOptions::Choice::On) {
    std::lock_guard<std::mutex> lock(topMutex);
    topTimes.clear();
    recorded.clear();
  }
  // The attempts of the variants' separations share one pool of
  // options.threads workers (their callers wait), so that a long last
  // variant does not leave the other threads idle.
  std::optional<llvm::StdThreadPool> attempts;
  if (options.threads > 1)
    attempts.emplace(llvm::hardware_concurrency(options.threads));
  parallelFor(
      pending.size(), options.threads,
      [&](size_t i) {
        const Pending &p = pending[i];
        if (const double limit = threshold(); p.bound > limit * (1 + 1e-9)) {
          notTried(p.variant,
                   llvm::formatv("its busiest actor alone ({0:e3} s with the "
                                 "gradient sync) exceeds the {1} best time "
                                 "{2:e3} s",
                                 p.bound, ordinal(options.exact), limit));
          ++pruned;
          return;
        }
        EvaluationDetail detail;
        Evaluation e = evaluate(variants[p.variant], model, cluster, options,
                                &detail, attempts ? &*attempts : nullptr);
        offerDetail(e, detail);
        simulated += e.ok() && e.fitsMemory;
        if (e.ok() && e.fitsMemory && options.exact > 0)
          recordTime(e.iterationTime, e.schedule);
        variantEval[p.variant] = std::move(e);
        ran[p.variant] = 1;
      },
      // Variants decided by their twin count as done.
      report(fused.size() + variants.size() - pending.size()));
  pruned += outsideWindow;
}

void Search::collect(TuneResult &result) {
  const bool fusedRanked = options.separation != TuneOptions::Choice::On;
  result.simulated = simulated + (fusedRanked ? fusedSimulated.load() : 0);
  result.pruned = pruned;
  result.bounded = fusedRanked ? fusedBounded.load() : 0;
  auto keep = [&](const Evaluation &e) {
    if (e.ok() && e.fitsMemory)
      result.ranked.push_back(e);
    else
      result.rejected.push_back(e);
  };
  if (options.separation != TuneOptions::Choice::On)
    for (const Evaluation &e : fusedEval)
      keep(e);
  for (size_t v = 0; v < variants.size(); ++v)
    if (ran[v])
      keep(variantEval[v]);
  std::stable_sort(result.ranked.begin(), result.ranked.end(), ranksBefore);
  // One row per schedule: a candidate that runs a better-ranked one's (at
  // pp 1 the stage orders and cttp all give one; the top listed it four
  // times) is set aside with its name.
  std::map<uint64_t, size_t> rankOf;
  std::vector<Evaluation> unique;
  for (Evaluation &e : result.ranked) {
    auto [it, first] = rankOf.emplace(e.schedule, unique.size() + 1);
    if (first) {
      unique.push_back(std::move(e));
      continue;
    }
    e.sameSchedule = true;
    e.error = llvm::formatv("the same schedule as rank {0} ({1})", it->second,
                            describe(unique[it->second - 1].candidate))
                  .str();
    result.rejected.push_back(std::move(e));
  }
  result.ranked = std::move(unique);
  // (Of the same schedule: among tied twins another may have been kept.)
  if (fastest && !result.ranked.empty() &&
      fastest->first.schedule == result.ranked.front().schedule)
    result.bestDetail = std::move(fastest->second);
}

/// Why nothing was ranked: the smallest candidate over the memory limit (a
/// scheduled one, whose peak is known, where there is one), or an example
/// of one that could not be scheduled. `twins`: fused twins not listed in
/// `result` (--separation on): the smallest may be one of them.
llvm::Error nothingRanked(const TuneResult &result, const TuneOptions &options,
                          llvm::ArrayRef<Evaluation> twins) {
  const Evaluation *smallest = nullptr;
  const Evaluation *anyError = nullptr;
  bool twin = false; // smallest is one of `twins`
  auto offer = [&](const Evaluation &e, bool isTwin) {
    if (!e.ok()) {
      // An example the profile does not decide, where there is one.
      if (!isTwin && (!anyError || (anyError->otherJob && !e.otherJob)))
        anyError = &e;
      return;
    }
    if (!e.fitsMemory &&
        (!smallest ||
         std::make_pair(e.staticOnly, e.peakBytes) <
             std::make_pair(smallest->staticOnly, smallest->peakBytes))) {
      smallest = &e;
      twin = isTwin;
    }
  };
  for (const Evaluation &e : result.rejected)
    offer(e, false);
  for (const Evaluation &e : twins)
    offer(e, true);
  // A twin's variant was simulated (and needs more), or not tried (the
  // heuristics' window and places).
  const bool variantTried =
      twin && llvm::any_of(result.rejected, [&](const Evaluation &e) {
        Candidate fused = e.candidate;
        fused.separation = false;
        return e.candidate.separation && !e.skipped &&
               fused == smallest->candidate;
      });
  // Whole bytes where one decimal reads both sizes alike (3644543 B and
  // the 3644544 B needed both read 3.5 MiB); the need rounded up, as a
  // --memory-limit fits it.
  std::string limit = smallest ? formatBytes(options.memoryLimit) : "",
              need = smallest ? formatBytes(smallest->peakBytes) : "";
  if (smallest && limit == need) {
    limit += llvm::formatv(" ({0:F0} B)", options.memoryLimit).str();
    need += llvm::formatv(" ({0:F0} B)", std::ceil(smallest->peakBytes)).str();
  }
  if (smallest)
    return fail(llvm::formatv(
        "no candidate fits in {0} per device: the smallest needs {6}{1} "
        "({7}pp {2} x dp {3}, micro-batch size {4}, {5}); use more devices, "
        "a smaller global batch or model, or raise --memory-limit",
        limit, need, smallest->candidate.pp, smallest->candidate.dp,
        smallest->candidate.mbs,
        describe(smallest->candidate) +
            (!twin          ? ""
             : variantTried ? ", without separation: its variant needs more"
                            : ", without separation: its variant was not "
                              "tried"),
        smallest->staticOnly ? "more than " : "",
        smallest->staticOnly
            ? "its parameters, gradients and optimizer state alone; "
            : ""));
  if (anyError && anyError->otherJob)
    return fail("the profile fits no candidate; e.g. " +
                describe(anyError->candidate) + ": " + anyError->error);
  return fail("no candidate could be scheduled" +
              (anyError ? "; e.g. " + describe(anyError->candidate) + ": " +
                              anyError->error
                        : std::string()));
}

} // namespace

llvm::Expected<TuneResult> flexpipe::sched::tune(const ModelConfig &model,
                                                 const ClusterConfig &cluster,
                                                 const TuneOptions &options) {
  llvm::Expected<std::vector<Candidate>> space =
      enumerateCandidates(model, options, &cluster);
  if (!space)
    return space.takeError();
  TuneResult result;
  result.candidates = space->size();
  Search search(model, cluster, options);
  search.split(*space);
  search.runFused();
  search.runVariants();
  search.collect(result);
  if (result.ranked.empty())
    return nothingRanked(result, options,
                         options.separation == TuneOptions::Choice::On
                             ? llvm::ArrayRef(search.fusedEvaluations())
                             : llvm::ArrayRef<Evaluation>());
  return result;
}

std::optional<Evaluation>
flexpipe::sched::bestBaseline(const ModelConfig &model,
                              const ClusterConfig &cluster,
                              const TuneOptions &options, bool vocabParallel,
                              const TuneResult *known, std::string *whyNone) {
  auto lookup = [&](const Candidate &c) -> std::optional<Evaluation> {
    if (!known)
      return std::nullopt;
    for (const auto *list : {&known->ranked, &known->rejected})
      for (const Evaluation &e : *list)
        if (e.candidate == c) {
          if (!e.sameSchedule)
            return e;
          // Its schedule's figures, under its own name (not a failure).
          Evaluation same =
              *llvm::find_if(known->ranked, [&](const Evaluation &r) {
                return r.schedule == e.schedule;
              });
          same.candidate = c;
          return same;
        }
    return std::nullopt;
  };
  const ModuleModel &m = model.modules.front();
  if (vocabParallel && !m.hasHead())
    return std::nullopt;
  // One stage per actor: the orders one_to_one has to choose between.
  const std::vector<StagePriority> orders =
      stageOrders(TunePlacement::OneToOne, 0, vocabParallel);
  // Known evaluations first, then the others in the order of their lower
  // bounds, simulated only while they can still beat the best.
  std::optional<Evaluation> best;
  // Why the configurations that lost did (for whyNone).
  int64_t overMemory = 0, failed = 0;
  std::string firstError;
  auto lost = [&](const Evaluation &e) {
    if (!e.ok()) {
      if (failed++ == 0)
        firstError = e.error;
      return true;
    }
    overMemory += !e.fitsMemory;
    return !e.fitsMemory;
  };
  auto consider = [&](Evaluation e) {
    if (!lost(e) && (!best || ranksBefore(e, *best)))
      best = std::move(e);
  };
  std::vector<Candidate> unknown;
  for (int64_t pp : options.pp)
    for (int64_t mbs : options.mbs) {
      const int64_t dp = options.gpus / pp;
      if (options.globalBatch % (dp * mbs) != 0 || m.layers < pp ||
          (vocabParallel && !m.canSplitVocabulary(pp)))
        continue;
      for (const StagePriority &fwd : orders)
        for (const StagePriority &bwd : orders) {
          Candidate c = oneFOneB(pp, dp, mbs, options.globalBatch / (dp * mbs),
                                 vocabParallel);
          c.fwd = fwd;
          c.bwd = bwd;
          if (std::optional<Evaluation> found = lookup(c);
              found && !found->skipped)
            consider(std::move(*found));
          else
            unknown.push_back(c);
        }
    }
  std::vector<double> bound;
  const std::vector<size_t> order =
      byLowerBound(unknown, model, cluster, options, bound);
  // Every thread takes the next candidate in bound order while its bound is
  // below the best so far, and gives its scheduling up once it cannot end
  // before that best (evaluate's cutoff). Equal times go to the first in
  // that order (the known evaluations before all), as one at a time would.
  std::mutex bestMutex;
  size_t bestAt = 0; // 0: a known evaluation; k + 1: order[k]
  parallelFor(
      order.size(), options.threads,
      [&](size_t k) {
        double limit = std::numeric_limits<double>::infinity();
        {
          std::lock_guard<std::mutex> lock(bestMutex);
          if (best)
            limit = best->iterationTime;
        }
        // An infinite bound (static memory over the limit, or no problem
        // to build) is evaluated while nothing was found, which says why
        // at once: whyNone counts it.
        if (std::isfinite(limit) && bound[order[k]] >= limit)
          return;
        Evaluation e = evaluate(unknown[order[k]], model, cluster, options,
                                nullptr, nullptr, limit);
        std::lock_guard<std::mutex> lock(bestMutex);
        if (lost(e))
          return;
        if (!best || ranksBefore(e, *best) ||
            (!ranksBefore(*best, e) && k + 1 < bestAt)) {
          best = std::move(e);
          bestAt = k + 1;
        }
      },
      nullptr);
  if (!best && whyNone) {
    std::ostringstream os;
    if (overMemory + failed == 0)
      os << "none of the searched (pp, mbs) can run it";
    else if (failed == 0)
      os << "no configuration fits in memory";
    else
      os << (overMemory ? std::to_string(overMemory) +
                              (overMemory == 1 ? " configuration"
                                               : " configurations") +
                              " over memory, "
                        : std::string())
         << failed << (failed == 1 ? " configuration" : " configurations")
         << " not scheduled (the first: " << firstError << ")";
    *whyNone = os.str();
  }
  return best;
}
