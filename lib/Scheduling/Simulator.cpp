//===- Simulator.cpp - Time, bubbles and memory of a program --------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Simulator.h"

#include <algorithm>
#include <numeric>

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
  std::vector<double> layers(program.numStages, 1),
      forwards(program.numStages, 0);
  for (int32_t s = 0; s < program.numStages; ++s)
    if (s < static_cast<int32_t>(program.stageMeta.size()))
      layers[s] = static_cast<double>(
          std::max<int64_t>(1, program.stageMeta[s].layers));
  for (const auto &ops : program.actors)
    for (const ProgOp &op : ops)
      if (op.kind == OpKind::Fwd && op.stage >= 0 &&
          op.stage < program.numStages)
        forwards[op.stage] += 1;
  double work = 0;
  for (int32_t s = 0; s < program.numStages; ++s)
    work += layers[s] * forwards[s];
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
  std::vector<std::vector<int32_t>> actors(program.numStages);
  for (int32_t a = 0; a < program.numActors; ++a)
    for (const ProgOp &op : program.actors[a])
      if (isCompute(op.kind) && op.stage >= 0 && op.stage < program.numStages &&
          (actors[op.stage].empty() || actors[op.stage].back() != a))
        actors[op.stage].push_back(a);
  std::vector<int32_t> count(program.numStages, 1);
  for (int32_t s = 0; s < program.numStages; ++s) {
    std::sort(actors[s].begin(), actors[s].end());
    count[s] = std::max<int32_t>(
        1,
        static_cast<int32_t>(std::unique(actors[s].begin(), actors[s].end()) -
                             actors[s].begin()));
  }
  return count;
}

double flexpipe::sched::registeredCollectiveTime(
    const Program &program, int32_t stage,
    const std::vector<double> &messageBytes, const ClusterConfig &cluster,
    const std::vector<int64_t> &devices) {
  std::vector<int64_t> group;
  double bytes = 0;
  for (int32_t a = 0; a < program.numActors; ++a) {
    bool member = false;
    double contribution = 0;
    for (const ProgOp &op : program.actors[a]) {
      if ((op.kind == OpKind::AllGather || op.kind == OpKind::Gather) &&
          op.stage == stage)
        member = true;
      if (op.kind == OpKind::Fwd && op.stage >= 0 &&
          op.stage < static_cast<int32_t>(program.stageMeta.size()) &&
          op.stage < static_cast<int32_t>(messageBytes.size()) &&
          program.stageMeta[op.stage].last)
        contribution = std::max(contribution, messageBytes[op.stage]);
    }
    if (!member)
      continue;
    group.push_back(a < static_cast<int32_t>(devices.size()) ? devices[a] : a);
    bytes = std::max(bytes, contribution);
  }
  return allGatherTime(cluster, group, bytes);
}

std::string flexpipe::sched::modelCosts(const Program &program,
                                        const ModelConfig &model,
                                        const ClusterConfig &cluster,
                                        const Profile *profile,
                                        const std::vector<int64_t> &devices,
                                        SimCosts &c) {
  if (static_cast<int32_t>(program.stageMeta.size()) != program.numStages)
    return "the schedule does not say what its stages hold (no stage_info); "
           "schedule it from a spec to use a model file";
  const std::vector<int32_t> sharing = actorsPerStage(program);
  c = SimCosts();
  c.unit = "s";
  c.memoryLimit = cluster.memoryBytes;
  c.duration.resize(program.numStages);
  c.activationBytes.resize(program.numStages);
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
    StageShape shape;
    shape.module = model.module(name);
    if (!shape.module) {
      std::string known;
      for (const ModuleModel &m : model.modules)
        known += (known.empty() ? "'" : ", '") + m.name + "'";
      return "the model file has no module '" + name + "' (stage " +
             std::to_string(s) + " belongs to it); it defines " + known;
    }
    shape.layers = meta.layers;
    shape.first = meta.first;
    shape.last = meta.last;
    StageCost cost = stageCost(shape, model, cluster);
    const double k = sharing[s];
    c.duration[s] = stageDurations(shape, model, cluster, k);
    c.activationBytes[s] = cost.activationBytes / k;
    c.staticBytes[s] = cost.staticBytes / k;
    c.messageBytes[s] = cost.messageBytes;
    if (profile) {
      c.duration[s] = profile->durationsOr(s, c.duration[s]);
      if (const Profile::Stage *measured = profile->stage(s);
          measured && measured->activationBytes)
        c.activationBytes[s] = *measured->activationBytes;
    }
  }
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
          group.push_back(a < static_cast<int32_t>(devices.size()) ? devices[a]
                                                                   : a);
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
      if (profile &&
          (!profile->messages.empty() || profile->defaultMessageTime > 0)) {
        c.latency[pair] = profile->messageTime(a, b);
        continue;
      }
      const int64_t da =
          a < static_cast<int32_t>(devices.size()) ? devices[a] : a;
      const int64_t db =
          b < static_cast<int32_t>(devices.size()) ? devices[b] : b;
      const int64_t perNode = std::max<int64_t>(1, cluster.devicesPerNode);
      const Link &link =
          da / perNode == db / perNode ? cluster.intraNode : cluster.interNode;
      c.latency[pair] = messageLatency(cluster, link);
      c.bandwidth[pair] = link.bandwidth;
    }
  return {};
}

std::string flexpipe::sched::profileCosts(const Program &program,
                                          const Profile &profile, SimCosts &c) {
  c = unitCosts(program);
  c.unit = "s";
  for (int32_t s = 0; s < program.numStages; ++s)
    if (const Profile::Stage *measured = profile.stage(s)) {
      c.duration[s] = measured->durations();
      c.activationBytes[s] = measured->activationBytes.value_or(1);
    }
  const int32_t n = program.numActors;
  c.latency.assign(static_cast<size_t>(n) * n, 0);
  c.bandwidth.assign(static_cast<size_t>(n) * n, 0);
  for (int32_t a = 0; a < n; ++a)
    for (int32_t b = 0; b < n; ++b)
      c.latency[static_cast<size_t>(a) * n + b] = profile.messageTime(a, b);
  return {};
}

double SimResult::busyTotal() const {
  return std::accumulate(busy.begin(), busy.end(), 0.0);
}

double SimResult::bubbleRatio() const {
  const double total = iterationTime * static_cast<double>(busy.size());
  return total > 0 ? 1 - busyTotal() / total : 0;
}

bool Simulator::prepare(const Program &program, std::string &error) {
  numActors = program.numActors;
  numStages = program.numStages;
  if (std::optional<VerifyFailure> failure =
          buildGraph(program, ChannelRule::PerStage, graph)) {
    error = failure->message + "; run -flexpipe-verify-schedule";
    return false;
  }
  ops.clear();
  ops.reserve(graph.numOps());
  splitActor.assign(numActors, 0);
  for (int32_t a = 0; a < numActors; ++a)
    for (const ProgOp &p : program.actors[a]) {
      ops.push_back({p.kind, a, p.stage, p.mb, p.peer,
                     p.token >= 0 && (p.kind == OpKind::AllGather ||
                                      p.kind == OpKind::Gather)});
      splitActor[a] |= p.kind == OpKind::Wgrad;
    }
  return true;
}

SimResult Simulator::run(const SimCosts &costs) const {
  SimResult r;
  const int32_t n = numActors;
  r.busy.assign(n, 0);
  r.idle.assign(n, 0);
  r.bubble.assign(n, 0);
  r.peakActivation.assign(n, 0);
  r.staticBytes.assign(n, 0);
  r.totalBytes.assign(n, 0);
  r.overMemory.assign(n, false);
  r.start.resize(n);
  r.end.resize(n);
  for (int32_t a = 0; a < n; ++a) {
    r.start[a].assign(graph.actorBegin[a + 1] - graph.actorBegin[a], 0);
    r.end[a].assign(graph.actorBegin[a + 1] - graph.actorBegin[a], 0);
  }
  std::vector<double> start(ops.size(), 0), end(ops.size(), 0);
  std::vector<int32_t> cause(ops.size(), -1); // what decided the start
  std::vector<double> arrival(ops.size(), 0), finish(ops.size(), 0);
  std::vector<double> clock(n, 0), held(n, 0);
  std::vector<int32_t> lastOp(n, -1);

  auto collectiveTime = [&](const Op &op) {
    return op.stage < static_cast<int32_t>(costs.collectiveDuration.size())
               ? costs.collectiveDuration[op.stage]
               : costs.collectiveTime;
  };
  for (int32_t id : graph.order) {
    const Op &op = ops[id];
    const int32_t a = op.actor;
    double s = clock[a], e = s;
    int32_t why = lastOp[a];
    switch (op.kind) {
    case OpKind::Fwd:
      held[a] += costs.activationOf(op.stage);
      r.peakActivation[a] = std::max(r.peakActivation[a], held[a]);
      [[fallthrough]];
    case OpKind::Bwd:
    case OpKind::Igrad:
    case OpKind::Wgrad: {
      const double d = costs.durationOf(op.stage, op.kind);
      e = s + d;
      r.busy[a] += d;
      if (op.kind == (splitActor[a] ? OpKind::Wgrad : OpKind::Bwd))
        held[a] -= costs.activationOf(op.stage);
      break;
    }
    case OpKind::SendAct:
    case OpKind::SendGrad:
      // Free for the sender; the message arrives later (end[id] below is
      // the arrival time, used by the receiver).
      break;
    case OpKind::Wait:
      if (const int32_t post = graph.waitsPost[id]; post >= 0) {
        // An asynchronous collective ends its duration after the last post.
        double latest = 0;
        int32_t lastPost = -1;
        for (int32_t m = graph.groupFirst[post]; m >= 0; m = graph.groupNext[m])
          if (lastPost < 0 || start[m] > latest) {
            latest = start[m];
            lastPost = m;
          }
        const double done = latest + collectiveTime(ops[post]);
        if (done > s) {
          e = done;
          why = lastPost;
        }
        break;
      }
      [[fallthrough]];
    case OpKind::RecvAct:
    case OpKind::RecvGrad:
      if (const int32_t dep = graph.dependsOn[id]; dep >= 0) {
        const Op &send = ops[dep];
        const double sent = start[dep];
        const int32_t postedBy = graph.postedBy[id];
        const double posted = postedBy < 0     ? sent
                              : postedBy == id ? s
                                               : start[postedBy];
        const double arrival =
            costs.arrival(n, send.actor, send.peer, send.stage, sent, posted);
        if (arrival > s) {
          e = arrival;
          why = dep;
        }
      }
      break;
    case OpKind::AllGather:
    case OpKind::Gather:
      if (op.asyncPost) {
        // Posted; it completes at its wait.
      } else if (graph.lastOfGroup[id]) {
        // Every other member is already waiting at its actor's clock; all
        // leave when the last one has arrived.
        double latest = s;
        for (int32_t m = graph.groupFirst[id]; m >= 0; m = graph.groupNext[m]) {
          if (m == id)
            continue;
          arrival[m] = clock[ops[m].actor];
          if (arrival[m] > latest) {
            latest = arrival[m];
            why = lastOp[ops[m].actor];
          }
        }
        finish[graph.groupFirst[id]] = latest + collectiveTime(op);
        e = finish[graph.groupFirst[id]];
      } else {
        s = arrival[id];
        e = finish[graph.groupFirst[id]];
      }
      break;
    case OpKind::Exec:
      e = s + costs.execTime;
      r.busy[a] += costs.execTime;
      break;
    }
    start[id] = s;
    end[id] = e;
    cause[id] = why;
    clock[a] = std::max(clock[a], e);
    lastOp[a] = id;
    r.start[a][id - graph.actorBegin[a]] = s;
    r.end[a][id - graph.actorBegin[a]] = e;
  }

  for (int32_t a = 0; a < n; ++a)
    r.iterationTime = std::max(r.iterationTime, clock[a]);
  for (int32_t a = 0; a < n; ++a) {
    r.idle[a] = r.iterationTime - r.busy[a];
    r.bubble[a] = r.iterationTime > 0 ? r.idle[a] / r.iterationTime : 0;
  }

  // Static memory: every stage an actor computes, once.
  for (int32_t a = 0; a < n; ++a) {
    std::vector<int32_t> stages;
    for (int32_t id = graph.actorBegin[a]; id < graph.actorBegin[a + 1]; ++id)
      if (isCompute(ops[id].kind))
        stages.push_back(ops[id].stage);
    std::sort(stages.begin(), stages.end());
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
    for (int32_t s : stages)
      if (s >= 0 && s < static_cast<int32_t>(costs.staticBytes.size()))
        r.staticBytes[a] += costs.staticBytes[s];
    r.totalBytes[a] = r.staticBytes[a] + r.peakActivation[a];
    r.overMemory[a] =
        costs.memoryLimit > 0 && r.totalBytes[a] > costs.memoryLimit;
  }

  // Critical path: from the op that ends last, follow what decided each
  // start.
  int32_t last = -1;
  for (int32_t id = 0; id < static_cast<int32_t>(ops.size()); ++id)
    if (last < 0 || end[id] > end[last])
      last = id;
  for (int32_t id = last; id >= 0; id = cause[id]) {
    const Op &op = ops[id];
    if (isCompute(op.kind) || op.kind == OpKind::SendAct ||
        op.kind == OpKind::SendGrad || op.kind == OpKind::Exec ||
        op.kind == OpKind::AllGather || op.kind == OpKind::Gather)
      r.criticalPath.push_back({op.actor, id - graph.actorBegin[op.actor]});
    if (r.criticalPath.size() > ops.size())
      break;
  }
  std::reverse(r.criticalPath.begin(), r.criticalPath.end());
  return r;
}
