//===- Simulator.cpp - Time, bubbles and memory of a program --------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Simulator.h"
#include "flexpipe/Scheduling/CostModelYAML.h"
#include "flexpipe/Scheduling/EventCore.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <utility>

using namespace flexpipe::sched;

double SimCosts::messageTime(int32_t numActors, int32_t from, int32_t to,
                             int32_t stage) const {
  const size_t pair = static_cast<size_t>(from) * numActors + to;
  const double bw = pair < bandwidth.size() ? bandwidth[pair] : 0;
  const double lat = pair < latency.size() ? latency[pair] : 0;
  const double bytes =
      stage >= 0 && static_cast<size_t>(stage) < messageBytes.size()
          ? messageBytes[stage]
          : 0;
  return bw > 0 ? lat + bytes / bw : lat;
}

SimCosts flexpipe::sched::unitCosts(const Program &program) {
  SimCosts c;
  c.duration.assign(program.numStages, {1, 1, 1, 1});
  c.activationBytes.assign(program.numStages, 1);
  c.staticBytes.assign(program.numStages, 0);
  c.messageBytes.assign(program.numStages, 0);
  c.execTime = 1;
  c.unit = "steps";
  return c;
}

SimCosts flexpipe::sched::layerCosts(const Program &program) {
  SimCosts c = unitCosts(program);
  c.unit = "units";
  c.memoryUnit = "M_B";
  std::vector<double> layers(program.numStages, 1);
  for (int32_t s = 0; s < program.numStages; ++s)
    if (s < static_cast<int32_t>(program.stageMeta.size()))
      layers[s] = static_cast<double>(
          std::max<int64_t>(1, program.stageMeta[s].layers));
  double work = 0; // layers times the forwards through them
  for (const auto &ops : program.actors)
    for (const ProgOp &op : ops)
      if (op.kind == OpKind::Fwd && op.stage >= 0 &&
          op.stage < program.numStages)
        work += layers[op.stage];
  const double perActor =
      work > 0 && program.numActors > 0 && program.numMicrobatches > 0
          ? work / (static_cast<double>(program.numActors) *
                    program.numMicrobatches)
          : 1;
  for (int32_t s = 0; s < program.numStages; ++s) {
    const double w = layers[s] / perActor;
    c.duration[s] = {w, 2 * w, w, w};
    c.activationBytes[s] = w;
  }
  return c;
}

/// How many actors run each stage (a shared stage splits its work).
static std::vector<int32_t> actorsPerStage(const Program &program) {
  std::vector<int32_t> count;
  for (const std::vector<int32_t> &actors : stageActors(program))
    count.push_back(std::max<int32_t>(1, static_cast<int32_t>(actors.size())));
  return count;
}

/// The device of actor `a`: `devices[a]`, or `a` itself past the list's end
/// (a list left empty puts actor a on device a).
static int64_t actorDevice(const std::vector<int64_t> &devices, int32_t a) {
  return a < static_cast<int32_t>(devices.size()) ? devices[a] : a;
}

/// The duration of an all-gather or gather on registered stage `stage`
/// (the sync of several modules' output states): every member contributes
/// the output of the last module stage it computes (`messageBytes` per
/// stage), and a ring all-gather moves the largest contribution.
static double registeredCollectiveTime(const Program &program, int32_t stage,
                                       const std::vector<double> &messageBytes,
                                       const ClusterConfig &cluster,
                                       const std::vector<int64_t> &devices) {
  std::vector<int64_t> group;
  double bytes = 0;
  for (int32_t a = 0; a < program.numActors; ++a) {
    bool member = false;
    double contribution = 0;
    for (const ProgOp &op : program.actors[a]) {
      if (isCollective(op.kind) && op.stage == stage)
        member = true;
      if (op.kind == OpKind::Fwd && op.stage >= 0 &&
          op.stage < static_cast<int32_t>(program.stageMeta.size()) &&
          op.stage < static_cast<int32_t>(messageBytes.size()) &&
          program.stageMeta[op.stage].last)
        contribution = std::max(contribution, messageBytes[op.stage]);
    }
    if (!member)
      continue;
    group.push_back(actorDevice(devices, a));
    bytes = std::max(bytes, contribution);
  }
  return allGatherTime(cluster, group, bytes);
}

/// Adds a core group on node `node`: `actors` (of one replica) share `cores`
/// cores and, while n of the `onNode` actors simulated on the node compute,
/// a computation of shape k is slowed by `shapes[k]`'s contention at n x
/// `replicas` ranks of the node computing. Nothing when they neither share
/// nor slow.
static void addCoreGroup(const ClusterConfig &cluster,
                         const std::vector<const ModuleModel *> &shapes,
                         const std::vector<int32_t> &actors, double cores,
                         int32_t node, size_t onNode, double replicas,
                         SimCosts &c) {
  std::vector<std::vector<double>> slowdown(
      shapes.size(), std::vector<double>(onNode + 1, 1.0));
  bool contended = false;
  for (size_t k = 0; k < shapes.size(); ++k)
    for (size_t n = 1; n <= onNode; ++n) {
      slowdown[k][n] = computeSlowdown(cluster, shapes[k],
                                       static_cast<double>(n) * replicas);
      contended |= slowdown[k][n] != 1.0;
    }
  if (cores >= static_cast<double>(actors.size()) && !contended)
    return;
  for (int32_t a : actors)
    c.coreGroup[a] = static_cast<int32_t>(c.groupCores.size());
  c.groupCores.push_back(cores);
  c.groupNode.push_back(node);
  c.groupSlowdown.push_back(std::move(slowdown));
}

/// Where the actors of a core group take turns on it (EventCore), each turn
/// must gain on the work: a slice at the slowest rate a computation of the
/// group gets must outlast the hand-over it costs, or none finishes.
static llvm::Error checkTurns(const SimCosts &c) {
  if (!(c.groupSlice > 0) || !(c.groupHandoff > 0))
    return llvm::Error::success();
  std::vector<int32_t> members(c.groupCores.size(), 0);
  for (int32_t g : c.coreGroup)
    if (g >= 0)
      ++members[g];
  for (size_t g = 0; g < c.groupCores.size(); ++g) {
    if (members[g] < 2 || c.groupCores[g] > 1)
      continue; // no turns (EventCore::takesTurns), or nobody to take over
    double slowest = 1;
    for (const std::vector<double> &byRanks : c.groupSlowdown[g])
      for (double slowdown : byRanks)
        slowest = std::max(slowest, slowdown);
    const double rate = c.groupCores[g] / slowest;
    if (c.groupSlice * rate > c.groupHandoff)
      continue;
    std::ostringstream os;
    os << "the cluster's measured handoff_s (" << c.groupHandoff
       << " s) is not below what a computation gets done in a time slice "
          "where ranks take turns on a core (time_slice_s "
       << c.groupSlice << " s at " << rate
       << " of a core: " << c.groupSlice * rate
       << " s): such a computation would never finish; measure the cluster "
          "again (flexpipe-profile) or give a smaller handoff_s";
    return llvm::createStringError(os.str());
  }
  return llvm::Error::success();
}

/// The ranks of a node share its cores and slow each other down (a
/// measured cluster) by how many of them compute at once. With no more
/// ranks than cores, each has a core and the actors simulated on the node
/// form one group. With more, the runtime binds device d's rank to core
/// coreOf(d, cores) (flexpipe/Support/Layout.h): the actors on one core
/// form a group that takes turns on it with the other replicas' ranks bound
/// there, which compute in step with their own actors. Either way the
/// job's other replicas, not simulated, run on the node in step with
/// theirs, so while n of the node's simulated actors compute, about n x
/// the node's ranks over those actors do (n with one replica: pp 4 with
/// one micro-batch computes on one rank at a time, and none slows it).
/// Each stage is slowed as its module's shape is (the file's first
/// module's slowed every computation: a module listed before the schedule's,
/// or the other tower, set the slowdown of all).
static llvm::Error shareCores(const Program &program, const ModelConfig &model,
                              const ClusterConfig &cluster,
                              const std::vector<int64_t> &devices,
                              SimCosts &c) {
  std::vector<const ModuleModel *> shapes;
  for (const std::string &name : program.moduleNames)
    shapes.push_back(model.module(name));
  if (shapes.empty())
    shapes.push_back(nullptr);
  c.stageShape.assign(program.numStages, 0);
  for (int32_t s = 0; s < program.numStages; ++s)
    if (const int32_t m = program.stageMeta[s].module;
        m >= 0 && m < static_cast<int32_t>(shapes.size()))
      c.stageShape[s] = m;
  const int32_t numActors = program.numActors;
  const int64_t cores = cluster.measured.coresPerNode;
  if (cores <= 0 && cluster.measured.contention.empty())
    return llvm::Error::success();
  const int64_t perNode = std::max<int64_t>(1, cluster.devicesPerNode);
  const int64_t jobRanks = cluster.jobRanks();
  std::map<int64_t, std::vector<int32_t>> byNode;
  for (int32_t a = 0; a < numActors; ++a)
    byNode[cluster.nodeOf(actorDevice(devices, a))].push_back(a);
  c.coreGroup.assign(numActors, -1);
  for (const auto &[node, actors] : byNode) {
    // The job's ranks on this node (the last node may be partly used).
    const int64_t first = node * perNode;
    const int64_t ranks =
        std::max<int64_t>(static_cast<int64_t>(actors.size()),
                          std::clamp<int64_t>(jobRanks - first, 1, perNode));
    const double replicas =
        static_cast<double>(ranks) / static_cast<double>(actors.size());
    const int32_t id = static_cast<int32_t>(node);
    if (cores <= 0 || ranks <= cores) {
      addCoreGroup(cluster, shapes, actors, static_cast<double>(actors.size()),
                   id, actors.size(), replicas, c);
      continue;
    }
    std::map<int64_t, std::vector<int32_t>> byCore;
    for (int32_t a : actors)
      byCore[coreOf(actorDevice(devices, a), cores)].push_back(a);
    for (const auto &[core, members] : byCore) {
      int64_t bound = 0; // the job's ranks on this node bound to `core`
      for (int64_t d = first; d < first + ranks; ++d)
        bound += coreOf(d, cores) == core ? 1 : 0;
      addCoreGroup(cluster, shapes, members,
                   static_cast<double>(members.size()) /
                       static_cast<double>(std::max<int64_t>(1, bound)),
                   id, actors.size(), replicas, c);
    }
  }
  if (c.groupCores.empty()) {
    c.coreGroup.clear();
    return llvm::Error::success();
  }
  c.groupSlice = cluster.measured.timeSlice;
  c.groupHandoff = cluster.measured.handoff;
  return checkTurns(c);
}

/// The stages of `program` (with its stage_info) price the model file's
/// modules: first and last stages where the edges start and end, and each
/// module's stages hold its layers (a schedule split for another model
/// would be priced as a model of another size).
static llvm::Error checkStagesHoldModel(const Program &program,
                                        const ModelConfig &model) {
  if (llvm::Error error = checkStageChains(program))
    return error;
  const std::vector<int64_t> held = moduleLayers(program);
  std::vector<bool> priced(program.moduleNames.size(), false);
  for (const StageMeta &meta : program.stageMeta)
    if (!meta.isRegistered() && meta.module >= 0 &&
        meta.module < static_cast<int32_t>(priced.size()))
      priced[meta.module] = true;
  for (size_t m = 0; m < priced.size(); ++m) {
    const ModuleModel *module = model.module(program.moduleNames[m]);
    if (priced[m] && module && module->layers != held[m])
      return llvm::createStringError(
          "the schedule's stages of module '" + program.moduleNames[m] +
          "' hold " + std::to_string(held[m]) +
          " layers (stage_info, along its stages), but the model file's '" +
          program.moduleNames[m] + "' has " + std::to_string(module->layers) +
          "; give the stages the model's layers or use the model file the "
          "schedule was made for");
  }
  return llvm::Error::success();
}

llvm::Error flexpipe::sched::modelCosts(const Program &program,
                                        const ModelConfig &model,
                                        const ClusterConfig &cluster,
                                        const Profile *profile,
                                        const std::vector<int64_t> &devices,
                                        SimCosts &c) {
  if (static_cast<int32_t>(program.stageMeta.size()) != program.numStages)
    return llvm::createStringError(
        "the schedule does not say what its stages hold (no stage_info) "
        "to price with a model file: schedule it from a spec, give it a "
        "stage_info, or let flexpipe-compile --model split a one-module "
        "model evenly over its stages");
  const std::vector<int32_t> sharing = actorsPerStage(program);
  c = SimCosts();
  c.unit = "s";
  c.memoryInBytes = true;
  c.memoryLimit = cluster.memoryBytes;
  c.instructionOverhead = profile && profile->instructionOverhead
                              ? *profile->instructionOverhead
                              : instructionOverhead(cluster);
  if (profile && profile->execSeconds)
    c.execTime = *profile->execSeconds;
  c.duration.resize(program.numStages);
  c.activationBytes.resize(program.numStages);
  c.weightGradBytes.resize(program.numStages);
  c.staticBytes.resize(program.numStages);
  c.messageBytes.resize(program.numStages);
  for (int32_t s = 0; s < program.numStages; ++s) {
    const StageMeta &meta = program.stageMeta[s];
    const std::string &name =
        meta.module >= 0 &&
                meta.module < static_cast<int32_t>(program.moduleNames.size())
            ? program.moduleNames[meta.module]
            : std::string();
    if (meta.isRegistered()) {
      c.duration[s] = {0, 0, 0, 0};
      continue; // its instructions' durations follow
    }
    const StageShape shape{model.module(name), meta.layers, meta.first,
                           meta.last};
    if (!shape.module) {
      std::string known;
      for (const ModuleModel &m : model.modules)
        known += (known.empty() ? "'" : ", '") + m.name + "'";
      return llvm::createStringError("the model file has no module '" + name +
                                     "' (stage " + std::to_string(s) +
                                     " belongs to it); it defines " + known);
    }
    StageCost cost = stageCost(shape, model, cluster);
    const double k = sharing[s];
    c.duration[s] = stageDurations(shape, model, cluster, k);
    c.activationBytes[s] = cost.activationBytes / k;
    c.weightGradBytes[s] = cost.weightGradBytes / k;
    c.staticBytes[s] = cost.staticBytes / k;
    c.messageBytes[s] = cost.messageBytes;
    if (profile) {
      c.duration[s] = profile->durationsOr(s, c.duration[s]);
      if (const Profile::Stage *measured = profile->stage(s);
          measured && measured->activationBytes) {
        c.activationBytes[s] = *measured->activationBytes;
        c.weightGradBytes[s] = measured->weightGradOr(c.activationBytes[s]);
      }
    }
  }
  if (llvm::Error error = checkStagesHoldModel(program, model))
    return error;
  // The loss statistics of a vocabulary-parallel head (a shared stage of no
  // layers that holds the head): a ring all-reduce over its actors.
  c.collectiveDuration.assign(program.numStages, 0);
  for (int32_t s = 0; s < program.numStages; ++s) {
    const StageMeta &meta = program.stageMeta[s];
    if (meta.isRegistered()) {
      c.collectiveDuration[s] = registeredCollectiveTime(
          program, s, c.messageBytes, cluster, devices);
      continue;
    }
    if (meta.layers != 0 || !meta.last || sharing[s] < 2)
      continue;
    std::vector<int64_t> group;
    for (int32_t a = 0; a < program.numActors; ++a)
      for (const ProgOp &op : program.actors[a])
        if (op.kind == OpKind::Fwd && op.stage == s) {
          group.push_back(actorDevice(devices, a));
          break;
        }
    const ModuleModel *module = model.module(program.moduleNames[meta.module]);
    c.collectiveDuration[s] =
        vocabStatsTime(cluster, group, *module, model.microBatchSize);
  }
  const int32_t n = program.numActors;
  c.latency.assign(static_cast<size_t>(n) * n, 0);
  c.bandwidth.assign(static_cast<size_t>(n) * n, 0);
  for (int32_t a = 0; a < n; ++a)
    for (int32_t b = 0; b < n; ++b) {
      const size_t pair = static_cast<size_t>(a) * n + b;
      if (profile && profile->pricesMessages()) {
        c.latency[pair] = profile->messageTime(a, b);
        continue;
      }
      const Link &link = cluster.nodeOf(actorDevice(devices, a)) ==
                                 cluster.nodeOf(actorDevice(devices, b))
                             ? cluster.intraNode
                             : cluster.interNode;
      c.latency[pair] = messageLatency(cluster, link);
      c.bandwidth[pair] = link.bandwidth;
    }
  // Also with a run's own profile: the runtime times a computation from
  // its start to its end, and a rank rarely loses its core in the middle of
  // one; ranks wait for a core between computations, which it does not
  // time.
  return shareCores(program, model, cluster, devices, c);
}

llvm::Error flexpipe::sched::profileCosts(const Program &program,
                                          const Profile &profile, SimCosts &c) {
  c = unitCosts(program);
  c.unit = "s";
  c.instructionOverhead = profile.instructionOverhead.value_or(0);
  c.execTime = profile.execSeconds.value_or(c.execTime);
  // Activations in bytes where the profile measured every computing
  // stage's (a registered stage holds none), else counted in
  // stage-micro-batches (unitCosts' 1 each): never a mix.
  auto registered = [&](int32_t s) {
    return s < static_cast<int32_t>(program.stageMeta.size()) &&
           program.stageMeta[s].isRegistered();
  };
  c.memoryInBytes = true;
  for (int32_t s = 0; s < program.numStages; ++s) {
    const Profile::Stage *measured = profile.stage(s);
    c.duration[s] = profile.durationsOr(s, c.duration[s]);
    c.memoryInBytes =
        c.memoryInBytes &&
        (registered(s) || (measured && measured->activationBytes));
  }
  if (c.memoryInBytes) {
    c.weightGradBytes.assign(program.numStages, 0);
    for (int32_t s = 0; s < program.numStages; ++s) {
      const Profile::Stage *measured = profile.stage(s);
      c.activationBytes[s] =
          measured ? measured->activationBytes.value_or(0) : 0;
      if (measured)
        c.weightGradBytes[s] = measured->weightGradOr(c.activationBytes[s]);
    }
  }
  const int32_t n = program.numActors;
  c.latency.assign(static_cast<size_t>(n) * n, 0);
  c.bandwidth.assign(static_cast<size_t>(n) * n, 0);
  for (int32_t a = 0; a < n; ++a)
    for (int32_t b = 0; b < n; ++b)
      c.latency[static_cast<size_t>(a) * n + b] = profile.messageTime(a, b);
  return llvm::Error::success();
}

double SimResult::busyTotal() const {
  return std::accumulate(busy.begin(), busy.end(), 0.0);
}

double SimResult::bubbleRatio() const {
  const double total = iterationTime * static_cast<double>(busy.size());
  return total > 0 ? 1 - busyTotal() / total : 0;
}

llvm::Error Simulator::prepare(const Program &program) {
  numActors = program.numActors;
  if (std::optional<VerifyFailure> failure =
          buildGraph(program, ChannelRule::PerStage, graph))
    return llvm::createStringError(failure->message +
                                   "; run -flexpipe-verify-schedule");
  actorsOfStage = stageActors(program);
  ops.clear();
  ops.reserve(graph.numOps());
  for (int32_t a = 0; a < numActors; ++a)
    for (const ProgOp &p : program.actors[a])
      ops.push_back(
          {p.kind, a, p.stage, p.peer, p.token >= 0 && isCollective(p.kind)});
  return llvm::Error::success();
}

double Simulator::durationOf(const SimCosts &costs, int32_t id) const {
  const Op &op = ops[id];
  if (isCompute(op.kind))
    return costs.durationOf(op.stage, op.kind);
  return op.kind == OpKind::Exec ? costs.execTime : 0.0;
}

double Simulator::waitEnd(const SimCosts &costs, int32_t id, double s,
                          const std::vector<double> &start,
                          int32_t &why) const {
  double end = s;
  int32_t cause = -1;
  if (const int32_t post = graph.waitsPost[id]; post >= 0) {
    // An asynchronous collective ends its duration after the last post.
    double latest = 0;
    for (int32_t m = graph.groupFirst[post]; m >= 0; m = graph.groupNext[m])
      if (cause < 0 || start[m] > latest) {
        latest = start[m];
        cause = m;
      }
    end = latest + costs.collectiveOf(ops[post].stage);
  } else if (const int32_t sent = graph.waitsSend[id]; sent >= 0) {
    // A send is complete when its message is in the receiver's buffer: it
    // moves once both sides are posted, whether or not the runtime buffers
    // messages that arrive before their receive.
    const Op &send = ops[sent];
    const int32_t recv = graph.takenBy[sent];
    end = std::max(start[sent], start[recv]) +
          costs.messageTime(numActors, send.actor, send.peer, send.stage);
    cause = recv;
  } else if (const int32_t dep = graph.dependsOn[id]; dep >= 0) {
    // A message: sent at its send's start, posted by the receive itself, an
    // earlier asynchronous receive, or (no post) at the send.
    const Op &send = ops[dep];
    const int32_t postedBy = graph.postedBy[id];
    const double posted = postedBy < 0     ? start[dep]
                          : postedBy == id ? s
                                           : start[postedBy];
    end = costs.arrival(numActors, send.actor, send.peer, send.stage,
                        start[dep], posted);
    cause = dep;
  }
  if (end <= s)
    return s;
  why = cause;
  return end;
}

int32_t Simulator::untimedDependency(int32_t id,
                                     const std::vector<uint8_t> &done) const {
  if (const int32_t post = graph.waitsPost[id]; post >= 0) {
    for (int32_t m = graph.groupFirst[post]; m >= 0; m = graph.groupNext[m])
      if (!done[m])
        return m;
    return -1;
  }
  if (const int32_t dep = graph.dependsOn[id]; dep >= 0 && !done[dep])
    return dep;
  if (const int32_t send = graph.waitsSend[id];
      send >= 0 && !done[graph.takenBy[send]])
    return graph.takenBy[send];
  return -1;
}

Simulator::Times Simulator::time(const SimCosts &costs) const {
  const int32_t n = numActors;
  const int32_t numOps = static_cast<int32_t>(ops.size());
  Times t(ops.size(), static_cast<size_t>(n));
  EventCore core(n, costs);
  std::vector<int32_t> next(n), lastOp(n, -1);
  std::vector<double> clock(n, 0);
  std::vector<uint8_t> done(numOps, 0), arrived(numOps, 0), computing(n, 0);
  // Per actor: whether it waited for something since its last computation
  // (a rank that has not blocked keeps its core: EventCore::compute).
  std::vector<uint8_t> waited(n, 1);
  for (int32_t a = 0; a < n; ++a)
    next[a] = graph.actorBegin[a];
  // The actors waiting for each op to be timed (a list through waitNext:
  // an actor waits for one op at a time), asked again when it is. Touching
  // every actor instead made a schedule of n actors cost n per op.
  std::vector<int32_t> waitHead(numOps, -1), waitNext(n, -1), waitingOn(n, -1);
  auto waitFor = [&](int32_t a, int32_t op) {
    if (waitingOn[a] == op)
      return false;
    waitingOn[a] = op;
    waitNext[a] = waitHead[op];
    waitHead[op] = a;
    return false;
  };

  auto finishOp = [&](int32_t id, double e, int32_t why) {
    const int32_t a = ops[id].actor;
    t.end[id] = e;
    t.cause[id] = why;
    done[id] = 1;
    clock[a] = std::max(clock[a], e);
    lastOp[a] = id;
    ++next[a];
    core.touch(a);
    for (int32_t w = std::exchange(waitHead[id], -1); w >= 0; w = waitNext[w]) {
      waitingOn[w] = -1;
      core.touch(w);
    }
  };
  // A blocking member of a collective waits for every member to arrive
  // (one that posts asks again when it has); the blocking ones then leave
  // together.
  auto joinBlocking = [&](int32_t a, int32_t id) {
    double latest = 0;
    int32_t last = -1;
    for (int32_t m = graph.groupFirst[id]; m >= 0; m = graph.groupNext[m]) {
      if (!arrived[m])
        return waitFor(a, m);
      if (last < 0 || t.start[m] > latest) {
        latest = t.start[m];
        last = m;
      }
    }
    const double end =
        latest + costs.collectiveOf(ops[id].stage) + costs.instructionOverhead;
    // The last arrival decided the end (a post itself: its actor went on).
    const int32_t byLast = ops[last].asyncPost ? last : lastOp[ops[last].actor];
    for (int32_t m = graph.groupFirst[id]; m >= 0; m = graph.groupNext[m]) {
      if (ops[m].asyncPost)
        continue;               // timed at its post
      waited[ops[m].actor] = 1; // members poll for each other's parts
      t.busy[ops[m].actor] += costs.instructionOverhead;
      finishOp(m, end, t.start[m] < latest ? byLast : lastOp[ops[m].actor]);
    }
    return true;
  };
  // Runs actor a's next op if it can: false while the actor computes, waits
  // for an op of another actor that has not run yet, or is done. Only a
  // computation on a shared core waits for the core's events; an
  // actor runs ahead of the core's time through everything that does not
  // compute on a shared core: its times depend only on what it waits for.
  auto step = [&](int32_t a, bool) {
    if (computing[a] || next[a] == graph.actorBegin[a + 1])
      return false;
    const int32_t id = next[a];
    const Op &op = ops[id];
    const double s = clock[a];
    int32_t why = lastOp[a];
    double e = s;
    switch (op.kind) {
    case OpKind::Fwd:
    case OpKind::Bwd:
    case OpKind::Igrad:
    case OpKind::Wgrad:
    case OpKind::Exec: {
      const double work = durationOf(costs, id) + costs.instructionOverhead;
      t.start[id] = s;
      if (core.groupOf(a) < 0 || work <= 0) {
        t.busy[a] += work;
        finishOp(id, s + work, why);
        return true;
      }
      computing[a] = 1;
      core.compute(a, id, work, std::max(s, core.now()), !waited[a],
                   costs.shapeOf(op.stage));
      waited[a] = 0;
      return true;
    }
    case OpKind::AllGather:
    case OpKind::Gather:
      // A member arrives with its blocking call or its post; a post goes on
      // at once, as a send does (its wait ends when the group does).
      if (!arrived[id]) {
        arrived[id] = 1;
        t.start[id] = s;
      }
      if (!op.asyncPost)
        return joinBlocking(a, id);
      [[fallthrough]];
    case OpKind::SendAct:
    case OpKind::SendGrad:
      break;
    case OpKind::Wait:
    case OpKind::RecvAct:
    case OpKind::RecvGrad:
      // What it waits for must have happened (been timed) first.
      if (const int32_t first = untimedDependency(id, done); first >= 0)
        return waitFor(a, first);
      // Its overhead once what it waits for is there. What comes within
      // that overhead its first poll finds: no wait, the core kept.
      e = waitEnd(costs, id, s, t.start, why);
      waited[a] |= e > s + costs.instructionOverhead;
      break;
    }
    e += costs.instructionOverhead;
    t.busy[a] += costs.instructionOverhead;
    if (!waited[a]) // (after a wait it has let its core go)
      core.hold(a, e);
    t.start[id] = s;
    finishOp(id, e, why);
    return true;
  };
  auto ended = [&](int32_t a, int32_t id) {
    computing[a] = 0;
    t.busy[a] += core.now() - t.start[id];
    finishOp(id, core.now(), lastOp[a]);
  };
  // Every actor is done when no event is left (prepare() replayed the
  // programs).
  core.run(step, ended);
  return t;
}

std::vector<double> flexpipe::sched::actorStaticBytes(
    const std::vector<std::vector<int32_t>> &actorsOfStage, int32_t numActors,
    const SimCosts &costs) {
  std::vector<double> bytes(numActors, 0);
  for (size_t s = 0; s < actorsOfStage.size() && s < costs.staticBytes.size();
       ++s)
    for (int32_t a : actorsOfStage[s])
      bytes[a] += costs.staticBytes[s];
  return bytes;
}

SimResult Simulator::run(const SimCosts &costs) const {
  const Times t = time(costs);
  SimResult r;
  const int32_t n = numActors;
  r.busy = t.busy;
  r.staticBytes = actorStaticBytes(actorsOfStage, n, costs);
  for (double end : t.end)
    r.iterationTime = std::max(r.iterationTime, end);
  for (int32_t a = 0; a < n; ++a) {
    const int32_t begin = graph.actorBegin[a], stop = graph.actorBegin[a + 1];
    r.start.emplace_back(t.start.begin() + begin, t.start.begin() + stop);
    r.end.emplace_back(t.end.begin() + begin, t.end.begin() + stop);
    r.idle.push_back(r.iterationTime - r.busy[a]);
    r.bubble.push_back(r.iterationTime > 0 ? r.idle[a] / r.iterationTime : 0);
    // Activation memory: what each computation takes and frees, in the
    // actor's order (SimCosts::memoryEffect).
    double held = 0, peak = 0;
    for (int32_t id = begin; id < stop; ++id) {
      const SimCosts::MemoryEffect effect =
          costs.memoryEffect(ops[id].kind, ops[id].stage);
      peak = std::max(peak, held + effect.peak);
      held += effect.after;
    }
    r.peakActivation.push_back(peak);
    r.totalBytes.push_back(r.staticBytes[a] + peak);
    r.overMemory.push_back(costs.memoryLimit > 0 &&
                           r.totalBytes[a] > costs.memoryLimit);
  }

  // Critical path: from the op that ends last, follow what decided each
  // start.
  int32_t last = -1;
  for (int32_t id = 0; id < static_cast<int32_t>(ops.size()); ++id)
    if (last < 0 || t.end[id] > t.end[last])
      last = id;
  for (int32_t id = last; id >= 0; id = t.cause[id]) {
    const Op &op = ops[id];
    if (isWork(op.kind) || isSend(op.kind) || isCollective(op.kind))
      r.criticalPath.push_back({op.actor, id - graph.actorBegin[op.actor]});
    if (r.criticalPath.size() > ops.size())
      break;
  }
  std::reverse(r.criticalPath.begin(), r.criticalPath.end());
  return r;
}

StageLayout flexpipe::sched::stageLayoutOf(const BuiltProblem &built) {
  StageLayout layout;
  layout.numActors = built.problem.numActors;
  layout.meta = built.stageMeta;
  layout.moduleNames = built.moduleNames;
  layout.edges = built.stageEdges;
  layout.actorsOf.assign(built.numStages, {});
  for (const StagePart &part : built.problem.parts)
    layout.actorsOf[part.stage].push_back(part.actor);
  for (std::vector<int32_t> &actors : layout.actorsOf) {
    std::sort(actors.begin(), actors.end());
    actors.erase(std::unique(actors.begin(), actors.end()), actors.end());
  }
  return layout;
}

StageLayout flexpipe::sched::stageLayoutOf(const Program &program) {
  StageLayout layout;
  layout.numActors = program.numActors;
  layout.meta = program.stageMeta;
  layout.moduleNames = program.moduleNames;
  layout.edges = program.edges;
  layout.actorsOf = stageActors(program);
  return layout;
}

/// The module model of a stage, or null (a registered stage, or a module
/// the model does not define).
static const ModuleModel *moduleOf(const StageLayout &layout, int32_t s,
                                   const ModelConfig &model) {
  const StageMeta &meta = layout.meta[s];
  if (meta.isRegistered() || meta.module < 0 ||
      meta.module >= static_cast<int32_t>(layout.moduleNames.size()))
    return nullptr;
  return model.module(layout.moduleNames[meta.module]);
}

ActorHoldings flexpipe::sched::actorHoldings(const StageLayout &layout,
                                             const ModelConfig &model,
                                             const ClusterConfig &cluster) {
  ActorHoldings held;
  held.staticBytes.assign(layout.numActors, 0);
  held.parameters.assign(layout.numActors, 0);
  held.gradBytes.assign(layout.numActors, 0);
  for (size_t s = 0; s < layout.actorsOf.size() && s < layout.meta.size();
       ++s) {
    const std::vector<int32_t> &actors = layout.actorsOf[s];
    const ModuleModel *module =
        moduleOf(layout, static_cast<int32_t>(s), model);
    if (actors.empty() || !module)
      continue;
    const StageShape shape{module, layout.meta[s].layers, layout.meta[s].first,
                           layout.meta[s].last};
    const StageCost cost = stageCost(shape, model, cluster);
    const double k = static_cast<double>(actors.size());
    for (int32_t a : actors) {
      held.staticBytes[a] += cost.staticBytes / k;
      held.parameters[a] += cost.parameters / k;
      held.gradBytes[a] +=
          cost.parameters * static_cast<double>(model.dtypeBytes) / k;
    }
  }
  return held;
}

AfterPipeline flexpipe::sched::afterPipeline(const StageLayout &layout,
                                             const ActorHoldings &held,
                                             int64_t dp,
                                             const ModelConfig &model,
                                             const ClusterConfig &cluster,
                                             const Profile *profile) {
  const int32_t n = layout.numActors;
  const int32_t numStages = static_cast<int32_t>(layout.meta.size());
  // Each actor's optimizer step is slowed as its stages' module's shape is
  // (an actor with stages of two modules: its first stage's), not as the
  // model file's first module's.
  std::vector<const ModuleModel *> stepShape(n, nullptr);
  for (int32_t s = numStages - 1; s >= 0; --s)
    if (const int32_t m = layout.meta[s].module;
        m >= 0 && m < static_cast<int32_t>(layout.moduleNames.size()))
      for (int32_t a : layout.actorsOf[s])
        if (a >= 0 && a < n)
          stepShape[a] = model.module(layout.moduleNames[m]);
  AfterPipeline after;
  // Copies of a stage: the first block of each stage (each direction of a
  // bidirectional pipeline starts again at block 0), as the runtime finds
  // them.
  const std::vector<int64_t> firstBlock =
      stageFirstLayers(layout.meta, layout.edges);
  // Bytes each pair of actors exchanges (a < b). (A module's empty middle
  // stage holds nothing: two of them are no copies, as rt::areCopies says.)
  std::map<std::pair<int32_t, int32_t>, double> exchange;
  for (int32_t s = 0; s < numStages; ++s) {
    const StageMeta &x = layout.meta[s];
    const ModuleModel *module = moduleOf(layout, s, model);
    if (!module || layout.actorsOf[s].size() != 1 ||
        (x.layers == 0 && !x.first && !x.last))
      continue;
    for (int32_t t = s + 1; t < numStages; ++t) {
      const StageMeta &y = layout.meta[t];
      const int32_t a = layout.actorsOf[s].front();
      if (layout.actorsOf[t].size() != 1 || layout.actorsOf[t].front() == a ||
          y.module != x.module || y.layers != x.layers || y.first != x.first ||
          y.last != x.last || firstBlock[t] != firstBlock[s])
        continue;
      const StageShape shape{module, x.layers, x.first, x.last};
      const int32_t b = layout.actorsOf[t].front();
      exchange[{std::min(a, b), std::max(a, b)}] +=
          stageCost(shape, model, cluster).parameters *
          static_cast<double>(model.dtypeBytes);
    }
  }
  // Every replica exchanges at once, over its own devices' links.
  double exchanged = 0, replicas = 0;
  for (const auto &[pair, bytes] : exchange)
    for (int64_t r = 0; r < std::max<int64_t>(1, dp); ++r)
      exchanged =
          std::max(exchanged, transferTime(cluster, deviceOf(pair.first, r, dp),
                                           deviceOf(pair.second, r, dp), bytes,
                                           /*collective=*/true));
  for (int32_t a = 0; a < n; ++a) {
    const double analytic =
        optimizerStepTime(cluster, stepShape[a], held.parameters[a]);
    after.step = std::max(
        after.step, profile ? profile->optimizerStepOr(a, analytic) : analytic);
    if (dp < 2)
      continue;
    std::vector<int64_t> group(dp);
    for (int64_t r = 0; r < dp; ++r)
      group[r] = deviceOf(a, r, dp);
    replicas =
        std::max(replicas, allReduceTime(cluster, group, held.gradBytes[a]));
  }
  after.gradSync = exchanged + replicas + iterationOverhead(cluster);
  // The loss (8 bytes), only where a measured cluster prices small
  // messages as this machine does.
  if (!cluster.measured.contention.empty())
    after.gradSync += allReduceTime(cluster, replicaDevices(n * dp, 1), 8);
  return after;
}

/// A stage's part in its module, as messages say it: "first", "last",
/// "first and last", "neither first nor last".
static std::string roles(bool first, bool last) {
  return first && last ? "first and last"
         : first       ? "first"
         : last        ? "last"
                       : "neither first nor last";
}

/// A list of numbers as messages say it: "[0, 2]".
static std::string listed(llvm::ArrayRef<int64_t> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

/// Module sizes as messages say them: "hidden 64, heads 4, seq 32, vocab
/// 256; ...".
static std::string shapes(llvm::ArrayRef<Profile::ModuleShape> modules) {
  std::string text;
  for (const Profile::ModuleShape &m : modules)
    text += (text.empty() ? "" : "; ") +
            ("hidden " + std::to_string(m.hidden)) + ", heads " +
            std::to_string(m.heads) + ", seq " + std::to_string(m.seq) +
            ", vocab " + std::to_string(m.vocab);
  return text;
}

llvm::Error flexpipe::sched::checkProfileFits(const Profile &profile,
                                              const StageLayout &job,
                                              const ModelConfig *model) {
  const int32_t numStages = static_cast<int32_t>(job.actorsOf.size());
  const int32_t numActors = job.numActors;
  auto counted = [](int32_t n, const char *noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
  };
  // `place`: where the file says it; `but`: what the schedule has instead.
  auto other = [&](const std::string &what, const std::string &place,
                   std::string but = "") {
    if (but.empty())
      but = "the schedule has " + counted(numStages, "stage") + " and " +
            counted(numActors, "actor");
    return llvm::createStringError(
        "the profile" +
        (profile.path.empty() ? "" : " '" + profile.path + "'") + " " + what +
        (place.empty() ? "" : " (at " + place + ")") + ", but " + but +
        ": was it measured on another job?");
  };
  // With a model, what the whole job is first: the micro-batch size and
  // the model's sizes rule out every candidate of a search alike.
  if (model && profile.microBatchSize &&
      *profile.microBatchSize != model->microBatchSize)
    return other("was measured at micro-batch size " +
                     std::to_string(*profile.microBatchSize),
                 profile.microBatchPlace,
                 "the job's is " + std::to_string(model->microBatchSize));
  if (model && !profile.modules.empty()) {
    std::vector<Profile::ModuleShape> sizes;
    for (const ModuleModel &m : model->modules)
      sizes.push_back({m.hidden, m.heads, m.seq, m.vocab});
    if (sizes != profile.modules)
      return other("was measured on modules of " + shapes(profile.modules),
                   profile.modulesPlace,
                   "the model file's are " + shapes(sizes));
  }
  for (const Profile::Stage &stage : profile.stages)
    if (stage.stage < 0 || stage.stage >= numStages)
      return other("lists stage " + std::to_string(stage.stage), stage.place);
  for (const Profile::Message &message : profile.messages)
    if (message.from < 0 || message.from >= numActors || message.to < 0 ||
        message.to >= numActors)
      return other("times messages from actor " + std::to_string(message.from) +
                       " to actor " + std::to_string(message.to),
                   message.place);
  if (profile.optimizerStep.size() > static_cast<size_t>(numActors))
    return other("has " + std::to_string(profile.optimizerStep.size()) +
                     " optimizer steps in optimizer_s",
                 profile.optimizerPlace);
  // The same stages on the same actors hold the same layers (a V-shape
  // run's 4 stages are not a bidirectional schedule's 4, nor a circular
  // one's, whose actors hold other stages: the optimizer steps and
  // messages are the actors'). Without a model the schedule's layer counts
  // are the spec's, not the run's.
  for (const Profile::Stage &stage : profile.stages) {
    const std::string id = std::to_string(stage.stage);
    const std::vector<int32_t> &ran = job.actorsOf[stage.stage];
    // (A registered stage's collectives are no computations: no actors.)
    if (!stage.actors.empty() && !ran.empty() &&
        !llvm::equal(stage.actors, ran,
                     [](int64_t x, int32_t y) { return x == y; }))
      return other("lists stage " + id + " run by actors " +
                       listed(stage.actors),
                   stage.place,
                   "the schedule runs it on actors " +
                       listed(std::vector<int64_t>(ran.begin(), ran.end())));
    if (static_cast<size_t>(stage.stage) >= job.meta.size())
      continue;
    const StageMeta &is = job.meta[stage.stage];
    const bool first = stage.first.value_or(is.first),
               last = stage.last.value_or(is.last);
    if (model && stage.layers && *stage.layers != is.layers)
      return other("lists stage " + id + " holding " +
                       std::to_string(*stage.layers) + " layers",
                   stage.place,
                   "the schedule's stage " + id + " holds " +
                       std::to_string(is.layers));
    if (first != is.first || last != is.last)
      return other(
          "lists stage " + id + " as " + roles(first, last), stage.place,
          "the schedule's stage " + id + " is " + roles(is.first, is.last));
  }
  return llvm::Error::success();
}

/// The files of `inputs` for `program` run with `dp` replicas: the profile
/// checked against it, and the cluster as the job sees it (clusterForJob;
/// empty without one).
static llvm::Expected<std::optional<ClusterConfig>>
jobCluster(const Program &program, const CostInputs &inputs, int64_t dp) {
  if (const Profile *profile = inputs.profileOrNull()) {
    // A schedule made for another model is that (the profile of the model's
    // own run would not fit it either).
    if (inputs.hasModel() &&
        program.stageMeta.size() == static_cast<size_t>(program.numStages))
      if (llvm::Error error = checkStagesHoldModel(program, *inputs.model))
        return std::move(error);
    if (llvm::Error error =
            checkProfileFits(*profile, stageLayoutOf(program),
                             inputs.model ? &*inputs.model : nullptr))
      return std::move(error);
  }
  if (!inputs.cluster)
    return std::nullopt;
  llvm::Expected<ClusterConfig> job =
      clusterForJob(*inputs.cluster, program.numActors, dp);
  if (!job)
    return job.takeError();
  return std::optional<ClusterConfig>(std::move(*job));
}

llvm::Error flexpipe::sched::programCosts(const Program &program,
                                          const CostInputs &inputs, int64_t dp,
                                          TimeModel withoutFiles,
                                          SimCosts &costs) {
  llvm::Expected<std::optional<ClusterConfig>> cluster =
      jobCluster(program, inputs, dp);
  if (!cluster)
    return cluster.takeError();
  return programCosts(program, inputs.model ? &*inputs.model : nullptr,
                      *cluster ? &**cluster : nullptr, inputs.profileOrNull(),
                      dp, withoutFiles, costs, /*replica=*/0);
}

llvm::Error flexpipe::sched::programCosts(const Program &program,
                                          const ModelConfig *model,
                                          const ClusterConfig *cluster,
                                          const Profile *profile, int64_t dp,
                                          TimeModel withoutFiles,
                                          SimCosts &costs, int64_t replica) {
  if (model && cluster)
    return modelCosts(program, *model, *cluster, profile,
                      replicaDevices(program.numActors, dp, replica), costs);
  if (profile)
    return profileCosts(program, *profile, costs);
  costs = withoutFiles == TimeModel::Cost ? layerCosts(program)
                                          : unitCosts(program);
  return llvm::Error::success();
}

/// Whether two replicas' costs (modelCosts) price alike: what their devices
/// decide (links, shared cores, collectives over them) is the same.
static bool pricedAlike(const SimCosts &x, const SimCosts &y) {
  return x.latency == y.latency && x.bandwidth == y.bandwidth &&
         x.collectiveDuration == y.collectiveDuration &&
         x.coreGroup == y.coreGroup && x.groupCores == y.groupCores &&
         x.groupNode == y.groupNode && x.groupSlowdown == y.groupSlowdown;
}

llvm::Error Simulator::runSlowestReplica(const Program &program,
                                         const CostInputs &inputs, int64_t dp,
                                         TimeModel withoutFiles,
                                         ReplicaRun &out,
                                         bool rendezvous) const {
  llvm::Expected<std::optional<ClusterConfig>> cluster =
      jobCluster(program, inputs, dp);
  if (!cluster)
    return cluster.takeError();
  return runSlowestReplica(program, inputs.model ? &*inputs.model : nullptr,
                           *cluster ? &**cluster : nullptr,
                           inputs.profileOrNull(), dp, withoutFiles, out,
                           rendezvous);
}

llvm::Error Simulator::runSlowestReplica(
    const Program &program, const ModelConfig *model,
    const ClusterConfig *cluster, const Profile *profile, int64_t dp,
    TimeModel withoutFiles, ReplicaRun &out, bool rendezvous) const {
  const int64_t replicas = model && cluster ? std::max<int64_t>(1, dp) : 1;
  std::vector<SimCosts> priced;
  for (int64_t r = 0; r < replicas; ++r) {
    SimCosts costs;
    if (llvm::Error error = programCosts(program, model, cluster, profile, dp,
                                         withoutFiles, costs, r))
      return error;
    costs.rendezvous = rendezvous;
    if (llvm::any_of(priced, [&](const SimCosts &other) {
          return pricedAlike(other, costs);
        }))
      continue;
    SimResult result = run(costs);
    if (priced.empty() || result.iterationTime > out.result.iterationTime) {
      out.replica = r;
      out.costs = costs;
      out.result = std::move(result);
    }
    priced.push_back(std::move(costs));
  }
  return llvm::Error::success();
}
