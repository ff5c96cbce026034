//===- CostModel.cpp - Durations and memory from model and cluster --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Per transformer layer and micro-batch of b sequences of s tokens, hidden h,
// a heads (the usual Megatron accounting):
//   matmuls with weights   M = 24 b s h^2      (QKV, projection, 2 MLP)
//   attention scores       A = 4 b s^2 h       (QK^T and softmax . V)
//   forward F = M + A; input gradient I = M + 2A; weight gradient W = M;
//   backward B = I + W = 2F.
// The LM head multiplies b s tokens by an h x V matrix: 2 b s h V for the
// forward, the input gradient and the weight gradient each; the softmax and
// cross-entropy add about 5 b s V. The token embedding is a lookup.
// Activations kept per layer (Korthikanti et al., no recomputation):
// s b h (34 + 5 a s / h) bytes at 2-byte precision; with flash attention the
// scores' softmax (the 5 a s / h) is not kept, only an fp32 log-sum-exp per
// query row and head, 4 a s b bytes; the LM head keeps its logits and their
// fp32 softmax, b s V (dtype + 4) bytes; a tower's end without LM head its
// final norm's input, b s h values.
// What a micro-batch keeps from its input gradient to its weight gradient
// (the weight-gradient state; ZB's M_W): per layer, the inputs of the four
// matmuls and the two LayerNorms with the gradients of their outputs,
// (9 + 11) s b h values; the LM head its input and its logits' gradient
// with the final norm's input and its gradient, b s (3 h + V) values; a
// tower's end the final norm's input and its gradient, 2 b s h; the
// embedding its output's gradient, b s h. The input gradient frees the
// rest of the activations.
// Static memory: parameters x (2 x dtype for weights and gradients + 12 for
// fp32 master weights and Adam's two moments).
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/CostModel.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <cmath>

using namespace flexpipe::sched;

const ModuleModel *ModelConfig::module(const std::string &name) const {
  for (const ModuleModel &m : modules)
    if (m.name == name)
      return &m;
  return nullptr;
}

double
ModelConfig::tokensPerSample(const std::vector<std::string> &names) const {
  double tokens = 0;
  for (const std::string &name : names)
    if (const ModuleModel *m = module(name))
      tokens += static_cast<double>(m->seq);
  return tokens;
}

StageFlops flexpipe::sched::stageFlops(const StageShape &shape,
                                       int64_t microBatch) {
  StageFlops f;
  if (!shape.module)
    return f;
  const ModuleModel &m = *shape.module;
  const double b = static_cast<double>(microBatch);
  const double s = static_cast<double>(m.seq);
  const double h = static_cast<double>(m.hidden);
  const double layers = static_cast<double>(shape.layers);
  const double matmul = 24 * b * s * h * h, attention = 4 * b * s * s * h;
  f.fwd = layers * (matmul + attention);
  f.igrad = layers * (matmul + 2 * attention);
  f.wgrad = layers * matmul;
  if (shape.last && m.hasHead()) {
    const double v = static_cast<double>(m.vocab);
    const double head = 2 * b * s * h * v, loss = 5 * b * s * v;
    f.fwd += head + loss;
    f.igrad += head + loss;
    f.wgrad += head;
  }
  return f;
}

/// Whether `l` is a measurement of `module`'s layers of `kind` (at some
/// micro-batch size).
static bool sameShape(const MeasuredLayer &l, MeasuredLayer::Kind kind,
                      const ModuleModel &module) {
  return l.kind == kind && l.hidden == module.hidden && l.seq == module.seq &&
         (kind == MeasuredLayer::Block ? l.heads == module.heads
                                       : l.vocab == module.vocab);
}

bool MachineProfile::measuredAt(MeasuredLayer::Kind kind,
                                const ModuleModel &module,
                                int64_t microBatch) const {
  return llvm::any_of(layers, [&](const MeasuredLayer &l) {
    return sameShape(l, kind, module) && l.microBatch == microBatch;
  });
}

std::optional<MeasuredLayer> MachineProfile::layer(MeasuredLayer::Kind kind,
                                                   const ModuleModel &module,
                                                   int64_t microBatch) const {
  std::vector<const MeasuredLayer *> points;
  for (const MeasuredLayer &l : layers)
    if (sameShape(l, kind, module))
      points.push_back(&l);
  if (points.empty())
    return std::nullopt;
  std::sort(points.begin(), points.end(),
            [](auto *x, auto *y) { return x->microBatch < y->microBatch; });
  MeasuredLayer out = *points.front();
  out.microBatch = microBatch;
  const double b = static_cast<double>(microBatch);
  if (points.size() == 1) {
    const double scale = b / static_cast<double>(points.front()->microBatch);
    out.fwd *= scale;
    out.igrad *= scale;
    out.wgrad *= scale;
    return out;
  }
  // The segment that holds b, or the nearest one beyond the ends. Beyond
  // them, whatever slope noisy points give that segment, a larger batch is
  // not faster than the last point, and a smaller one not slower than the
  // first nor faster than its time scaled down in proportion.
  size_t hi = 1;
  while (hi + 1 < points.size() && points[hi]->microBatch < microBatch)
    ++hi;
  const MeasuredLayer &p0 = *points[hi - 1], &p1 = *points[hi];
  const double t = (b - static_cast<double>(p0.microBatch)) /
                   static_cast<double>(p1.microBatch - p0.microBatch);
  const double below = b / static_cast<double>(p0.microBatch);
  auto lerp = [&](double y0, double y1) {
    const double y = y0 + t * (y1 - y0);
    if (t > 1)
      return std::max(y, y1);
    if (t < 0)
      return std::clamp(y, y0 * below, y0);
    return y;
  };
  out.fwd = lerp(p0.fwd, p1.fwd);
  out.igrad = lerp(p0.igrad, p1.igrad);
  out.wgrad = lerp(p0.wgrad, p1.wgrad);
  return out;
}

double flexpipe::sched::optimizerStepTime(const ClusterConfig &cluster,
                                          const ModuleModel *module,
                                          double parameters) {
  return parameters * cluster.measured.optimizerPerParameter *
         computeSlowdown(cluster, module) * coreOversubscription(cluster);
}

StageCost flexpipe::sched::stageCost(const StageShape &shape,
                                     const ModelConfig &model,
                                     const ClusterConfig &cluster) {
  StageCost c;
  if (!shape.module)
    return c;
  const ModuleModel &m = *shape.module;
  // FLOPs / (peak x efficiency), as is: the reader keeps peak_flops at
  // least 1 and efficiency at least 1e-18 (a floor of 1 FLOP/s here gave
  // every efficiency the same durations at peak_flops 1).
  const double rate = cluster.peakFlops * cluster.efficiency;
  assert(rate > 0 && "a cluster computes at a positive rate");
  if (cluster.measured.layers.empty()) {
    const StageFlops f = stageFlops(shape, model.microBatchSize);
    c.fwd = f.fwd / rate;
    c.igrad = f.igrad / rate;
    c.wgrad = f.wgrad / rate;
  } else {
    // Each part of the stage (its blocks, the embedding, the head) measured
    // where the profile has its shape, else its FLOPs at the cluster's rate.
    auto add = [&](MeasuredLayer::Kind kind, const StageShape &part,
                   double count) {
      if (std::optional<MeasuredLayer> measured =
              cluster.measured.layer(kind, m, model.microBatchSize)) {
        c.fwd += count * measured->fwd;
        c.igrad += count * measured->igrad;
        c.wgrad += count * measured->wgrad;
        return;
      }
      const StageFlops f = stageFlops(part, model.microBatchSize);
      c.fwd += count * f.fwd / rate;
      c.igrad += count * f.igrad / rate;
      c.wgrad += count * f.wgrad / rate;
    };
    if (shape.layers > 0)
      add(MeasuredLayer::Block, {&m, 1, false, false},
          static_cast<double>(shape.layers));
    if (shape.first && m.vocab > 0)
      add(MeasuredLayer::Embedding, {&m, 0, true, false}, 1);
    if (shape.last && m.hasHead())
      add(MeasuredLayer::Head, {&m, 0, false, true}, 1);
  }
  c.bwd = c.igrad + c.wgrad;

  const double b = static_cast<double>(model.microBatchSize);
  const double s = static_cast<double>(m.seq);
  const double h = static_cast<double>(m.hidden);
  const double a = static_cast<double>(m.heads);
  const double v = static_cast<double>(m.vocab);
  const double d = static_cast<double>(model.dtypeBytes);
  const double layers = static_cast<double>(shape.layers);
  c.activationBytes = model.flashAttention
                          ? layers * (s * b * h * 34 * d / 2 + 4 * a * s * b)
                          : layers * s * b * h * (34 + 5 * a * s / h) * d / 2;
  c.weightGradBytes = layers * 20 * s * b * h * d;
  c.parameters = layers * (12 * h * h + 13 * h);
  if (shape.first && m.vocab > 0) {
    c.activationBytes += s * b * h * d; // embedding output
    c.weightGradBytes += s * b * h * d; // its gradient
    c.parameters += v * h + s * h;      // token and position embeddings
  }
  if (shape.last && m.hasHead()) {
    c.activationBytes += b * s * v * (d + 4);     // logits + fp32 softmax
    c.weightGradBytes += b * s * (3 * h + v) * d; // see the file comment
    c.parameters += v * h + 2 * h;                // LM head and final norm
  } else if (shape.last && m.vocab > 0) {
    // A tower's end (no LM head): its final norm keeps its input, and from
    // its input gradient on that input's gradient too (the pooled and
    // projected rows are b, not b s: not counted).
    c.activationBytes += b * s * h * d;
    c.weightGradBytes += 2 * b * s * h * d;
  }
  c.staticBytes = c.parameters * (2 * d + 12);
  c.messageBytes = b * s * h * d;
  return c;
}

/// The job's ranks on one node: min(job devices, devices per node).
static int64_t jobRanksPerNode(const ClusterConfig &cluster) {
  return std::max<int64_t>(
      1, std::min(cluster.jobRanks(), cluster.devicesPerNode));
}

llvm::Expected<ClusterConfig>
flexpipe::sched::clusterForJob(ClusterConfig cluster, int64_t actors,
                               int64_t dp) {
  cluster.jobDevices = actors * dp;
  if (cluster.jobDevices > cluster.devices)
    return llvm::createStringError(
        llvm::formatv("the job runs on {0} actors x dp {1} = {2} {3}, but "
                      "cluster '{4}' has {5}; give the cluster file more "
                      "devices, or use fewer actors or replicas",
                      actors, dp, cluster.jobDevices,
                      cluster.devicesWord(cluster.jobDevices), cluster.name,
                      cluster.devices)
            .str());
  return cluster;
}

double flexpipe::sched::coreOversubscription(const ClusterConfig &cluster) {
  const int64_t cores = cluster.measured.coresPerNode;
  if (cores <= 0)
    return 1;
  // Ranks bound round robin (coreOf): the busiest core has the ceiling.
  const int64_t ranks = jobRanksPerNode(cluster);
  return ranks <= cores ? 1.0
                        : static_cast<double>((ranks + cores - 1) / cores);
}

/// The contention points that apply to `module`: those measured with its
/// shape, else those without a shape (nullptr: those without a shape).
static std::vector<const MachineProfile::Contention *>
contentionFor(const ClusterConfig &cluster, const ModuleModel *module) {
  std::vector<const MachineProfile::Contention *> own, any;
  for (const MachineProfile::Contention &c : cluster.measured.contention) {
    if (c.hidden == 0)
      any.push_back(&c);
    else if (module && c.hidden == module->hidden && c.heads == module->heads &&
             c.seq == module->seq)
      own.push_back(&c);
  }
  return own.empty() ? any : own;
}

/// The value `get` of `points` at `ranks`, interpolated linearly; the last
/// point's beyond it.
template <typename Get>
static double
atRanks(const std::vector<const MachineProfile::Contention *> &points,
        double ranks, Get get) {
  if (ranks <= static_cast<double>(points.front()->ranks))
    return get(*points.front());
  for (size_t i = 1; i < points.size(); ++i)
    if (ranks <= static_cast<double>(points[i]->ranks)) {
      const auto &p0 = *points[i - 1], &p1 = *points[i];
      const double t = (ranks - static_cast<double>(p0.ranks)) /
                       static_cast<double>(p1.ranks - p0.ranks);
      return get(p0) + t * (get(p1) - get(p0));
    }
  return get(*points.back());
}

double flexpipe::sched::computeSlowdown(const ClusterConfig &cluster,
                                        const ModuleModel *module,
                                        double computing) {
  const auto points = contentionFor(cluster, module);
  if (points.empty())
    return 1;
  const double ranks =
      computing > 0 ? computing : static_cast<double>(jobRanksPerNode(cluster));
  return atRanks(points, ranks, [](const auto &p) { return p.slowdown; });
}

/// `get` of the points without a shape at the job's ranks on a node,
/// interpolated (the last point's beyond it); 0 without points (an
/// analytic cluster).
template <typename Get>
static double shapelessAtJobRanks(const ClusterConfig &cluster, Get get) {
  const auto points = contentionFor(cluster, nullptr);
  if (points.empty())
    return 0;
  return atRanks(points, static_cast<double>(jobRanksPerNode(cluster)), get);
}

double flexpipe::sched::messageLatency(const ClusterConfig &cluster,
                                       const Link &link) {
  if (&link != &cluster.intraNode)
    return link.latency;
  return std::max(link.latency, shapelessAtJobRanks(cluster, [](const auto &p) {
                    return p.latency;
                  }));
}

double flexpipe::sched::iterationOverhead(const ClusterConfig &cluster) {
  return shapelessAtJobRanks(cluster, [](const auto &p) { return p.overhead; });
}

double flexpipe::sched::instructionOverhead(const ClusterConfig &cluster) {
  return shapelessAtJobRanks(cluster,
                             [](const auto &p) { return p.instruction; });
}

double flexpipe::sched::transferTime(const ClusterConfig &cluster, int64_t from,
                                     int64_t to, double bytes,
                                     bool collective) {
  const bool sameNode = cluster.nodeOf(from) == cluster.nodeOf(to);
  const Link &link = !sameNode ? cluster.interNode
                     : collective && cluster.measured.allReduce.bandwidth > 0
                         ? cluster.measured.allReduce
                         : cluster.intraNode;
  const double latency =
      collective ? link.latency : messageLatency(cluster, link);
  if (link.bandwidth <= 0)
    return latency;
  return latency + bytes / link.bandwidth;
}

/// The slowest transfer of `bytes` between neighbours of a ring over
/// `devices` (0 for fewer than two).
static double slowestRingStep(const ClusterConfig &cluster,
                              const std::vector<int64_t> &devices,
                              double bytes) {
  const size_t n = devices.size();
  double slowest = 0;
  for (size_t i = 0; n > 1 && i < n; ++i)
    slowest = std::max(slowest, transferTime(cluster, devices[i],
                                             devices[(i + 1) % n], bytes,
                                             /*collective=*/true));
  return slowest;
}

double flexpipe::sched::allReduceTime(const ClusterConfig &cluster,
                                      const std::vector<int64_t> &devices,
                                      double bytes) {
  const size_t n = devices.size();
  if (n < 2)
    return 0;
  return 2 * static_cast<double>(n - 1) *
         slowestRingStep(cluster, devices, bytes / static_cast<double>(n));
}

double flexpipe::sched::allGatherTime(const ClusterConfig &cluster,
                                      const std::vector<int64_t> &devices,
                                      double bytes) {
  const size_t n = devices.size();
  if (n < 2)
    return 0;
  return static_cast<double>(n - 1) * slowestRingStep(cluster, devices, bytes);
}

double flexpipe::sched::vocabStatsTime(const ClusterConfig &cluster,
                                       const std::vector<int64_t> &devices,
                                       const ModuleModel &module,
                                       int64_t microBatch) {
  return allReduceTime(cluster, devices,
                       3.0 * 4.0 * static_cast<double>(module.seq) *
                           static_cast<double>(microBatch));
}

std::vector<int64_t> flexpipe::sched::replicaDevices(int64_t actors, int64_t dp,
                                                     int64_t replica) {
  std::vector<int64_t> devices(std::max<int64_t>(0, actors));
  for (int64_t a = 0; a < actors; ++a)
    devices[a] = deviceOf(a, replica, std::max<int64_t>(1, dp));
  return devices;
}

Durations flexpipe::sched::stageDurations(const StageShape &shape,
                                          const ModelConfig &model,
                                          const ClusterConfig &cluster,
                                          double share) {
  const StageCost cost = stageCost(shape, model, cluster);
  return {cost.fwd / share, cost.bwd / share, cost.igrad / share,
          cost.wgrad / share};
}

const Profile::Stage *Profile::stage(int64_t id) const {
  for (const Stage &s : stages)
    if (s.stage == id)
      return &s;
  return nullptr;
}

double Profile::messageTime(int64_t from, int64_t to) const {
  for (const Message &m : messages)
    if (m.from == from && m.to == to)
      return m.seconds;
  return defaultMessageTime.value_or(0);
}

std::vector<int64_t>
flexpipe::sched::costBalancedPartition(const ModuleModel &module,
                                       int64_t stages, bool vocabParallel) {
  const int64_t layers = module.layers;
  if (stages < 1 || layers < stages)
    return {};
  auto cost = [&](int64_t count, int64_t position) {
    const StageFlops f =
        stageFlops({&module, count, !vocabParallel && position == 0,
                    !vocabParallel && position == stages - 1},
                   1);
    return f.fwd + f.igrad + f.wgrad;
  };
  // Every layer costs the same; a stage adds a fixed extra (embedding, LM
  // head). The smallest feasible slowest-stage cost T gives stage k
  // floor((T - extra_k) / layer) layers; bisect on T, then trim the surplus
  // from the costliest stages.
  const double layer = cost(2, stages) - cost(1, stages); // no extras
  std::vector<double> extra(stages);
  double lo = 0, hi = 0;
  for (int64_t k = 0; k < stages; ++k) {
    extra[k] = cost(1, k) - layer;
    lo = std::max(lo, layer + extra[k]);
    hi = std::max(hi, layers * layer + extra[k]);
  }
  auto fits = [&](double t, int64_t k) {
    return std::clamp<int64_t>(
        static_cast<int64_t>(std::floor((t - extra[k]) / layer + 1e-9)), 1,
        layers);
  };
  auto total = [&](double t) {
    int64_t sum = 0;
    for (int64_t k = 0; k < stages; ++k)
      sum += fits(t, k);
    return sum;
  };
  for (int i = 0; i < 200 && hi - lo > 1e-9 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (total(mid) >= layers ? hi : lo) = mid;
  }
  std::vector<int64_t> result(stages);
  int64_t sum = 0;
  for (int64_t k = 0; k < stages; ++k)
    sum += result[k] = fits(hi, k);
  while (sum > layers) {
    int64_t worst = -1;
    for (int64_t k = 0; k < stages; ++k)
      if (result[k] > 1 &&
          (worst < 0 ||
           result[k] * layer + extra[k] > result[worst] * layer + extra[worst]))
        worst = k;
    --result[worst];
    --sum;
  }
  return result;
}
