//===- GradientSeparation.cpp - Split backward, stash and insert W --------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The re-timer is a list scheduler over fixed per-actor sequences of forwards
// and input gradients, a policy on the simulator's event core (EventCore.h:
// its time, computations, shared cores and tie rule): an actor runs its next
// item when its inputs have arrived, a stashed weight gradient when that item
// is not ready (a bubble) and the W fits before it (or, the input not being
// computed yet, once every actor has acted at that time), and the oldest
// stashed W first when a forward or an input gradient would exceed the
// memory bound (SimCosts::memoryEffect). Arrival of a
// cross-actor input is its producer's end plus the message time, as in the
// simulator, so the re-timed iteration time is the simulated one.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/GradientSeparation.h"
#include "flexpipe/Scheduling/EventCore.h"
#include "flexpipe/Support/StageGraph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ThreadPool.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <set>
#include <sstream>
#include <unordered_map>

using namespace flexpipe::sched;

int64_t flexpipe::sched::splitBackward(Program &program) {
  int64_t split = 0;
  for (auto &ops : program.actors) {
    std::vector<ProgOp> out;
    out.reserve(ops.size());
    for (const ProgOp &op : ops) {
      out.push_back(op);
      if (op.kind != OpKind::Bwd)
        continue;
      out.back().kind = OpKind::Igrad;
      ProgOp &weight = out.emplace_back(op);
      weight.kind = OpKind::Wgrad;
      weight.source = -1;
      weight.token = -1;
      ++split;
    }
    ops = std::move(out);
  }
  return split;
}

namespace {

/// One computation of the program.
struct Item {
  OpKind kind;
  int32_t actor, stage, mb;
  int32_t index;       ///< position in the actor's input program
  int32_t weight = -1; ///< Igrad: its Wgrad item
  double duration = 0;
  /// What it takes and frees of its actor's memory.
  SimCosts::MemoryEffect memory;
};

/// One re-timing: where every item ran, in which order per actor.
struct Timing {
  bool ok = false;
  std::string error;
  std::vector<double> start, end;
  std::vector<std::vector<int32_t>> order; ///< per actor, item ids
  std::vector<double> peak;                ///< per actor
  double makespan = 0;
  double finishSum = 0; ///< sum over actors of their last F / I end
  double maxPeak() const {
    return peak.empty() ? 0 : *std::max_element(peak.begin(), peak.end());
  }
};

class Separator {
public:
  Separator(const Program &program, const SimCosts &costs)
      : program(program), costs(costs) {}

  /// Builds items and dependencies.
  llvm::Error build();
  /// Per actor, memory the bound counts beside its activations (its static
  /// bytes, where the bound is the schedule's peak; else none).
  std::vector<double> reserved;
  /// States of one re-timing at the start of some of its event times,
  /// earliest first (defined below).
  struct Checkpoints;
  /// Re-times with the weight gradients in `stashed` (by Wgrad item id)
  /// deferred to bubbles and every other one fused. Stops early (`cut`)
  /// once some actor cannot end by `cutoff`: its clock plus the work it has
  /// left is past it (a timing the caller would reject anyway).
  ///
  /// `from`: checkpoints of a re-timing under the same bound whose stashed
  /// set differs from `stashed` only in weight gradients whose input
  /// gradients it started at `divergeAt` or later. Until then this
  /// re-timing runs exactly as that one did (`stashed` is read only when an
  /// input gradient starts), so it goes on from the last checkpoint at or
  /// before `divergeAt` instead of from the start. `record`: where to keep
  /// this re-timing's checkpoints (not `from`).
  Timing retime(const std::vector<uint8_t> &stashed, double bound,
                double cutoff = std::numeric_limits<double>::infinity(),
                const Checkpoints *from = nullptr, double divergeAt = 0,
                Checkpoints *record = nullptr) const;
  /// The earliest start in `timing` of an input gradient whose weight
  /// gradient is stashed in exactly one of `a` and `b`.
  double divergence(const Timing &timing, const std::vector<uint8_t> &a,
                    const std::vector<uint8_t> &b) const;
  /// Weight gradients (fused in `stashed`) that delayed the chain of items
  /// leading to `blocked`.
  std::vector<int32_t> chainWeights(const Timing &timing, int32_t blocked,
                                    const std::vector<uint8_t> &stashed) const;
  /// The stashed weight gradient of the last input gradient before
  /// `blocked` on its actor when it still waits in the stash as `blocked`
  /// starts (it did not fit in the bubble before `blocked`); -1 otherwise.
  int32_t waitingWeight(const Timing &timing, int32_t blocked,
                        const std::vector<uint8_t> &stashed) const;
  Program emit(const Timing &timing) const;

  std::vector<Item> items;
  std::vector<int32_t> weights; ///< every Wgrad item
  std::vector<int32_t> inputOf; ///< per Wgrad item its Igrad item
  /// Times closer than this are equal: a billionth of the shortest
  /// duration, so that microsecond costs and unit steps both work.
  double tol = 1e-9;

private:
  class Retimer;

  /// build()'s steps: the items of every actor (an error for what
  /// separation cannot handle); the blocking collectives' instances; each
  /// item's dependencies; those in CSR form with their users.
  llvm::Error collectItems();
  void groupCollectives();
  llvm::Error dependencies(std::vector<std::vector<int32_t>> &deps);
  void flatten(const std::vector<std::vector<int32_t>> &deps);
  /// Items of one (kind, stage, micro-batch) on every actor that runs it (a
  /// shared stage runs on several): the first in `lookup` at slotKey, the
  /// others chained through `sameNext`. All-gathers have no slot: nothing
  /// depends on them across actors.
  int64_t slotKey(OpKind kind, int32_t stage, int32_t mb) const;
  /// Every actor's item of (kind, stage, mb), and the one on `actor` (-1).
  std::vector<int32_t> allOf(OpKind kind, int32_t stage, int32_t mb) const;
  int32_t findOn(OpKind kind, int32_t stage, int32_t mb, int32_t actor) const;

  /// When the output of `dep` is there for `item`, whose actor posts the
  /// receive (insert-comm puts it right before the item) at `posted`.
  double arrival(const Timing &t, int32_t dep, int32_t item,
                 double posted) const {
    const Item &d = items[dep], &i = items[item];
    // A collective waits for its members' forwards themselves; its own
    // duration covers the exchange.
    if (d.actor == i.actor || isCollective(i.kind))
      return t.end[dep];
    return costs.arrival(program.numActors, d.actor, i.actor, d.stage,
                         t.end[dep], posted);
  }

  const Program &program;
  const SimCosts &costs;
  std::vector<std::vector<int32_t>> sequence; ///< per actor: F, I, B items
  std::vector<size_t> weightsOn;              ///< per actor: W items
  /// chainWeights' scratch set of visited items, all 0 between calls (it
  /// runs on the thread that owns the separator, never in the re-timing
  /// tasks).
  mutable std::vector<uint8_t> chainSeen;
  std::vector<int32_t> depStart, depList;     ///< CSR predecessors
  /// CSR: per item, the items that depend on it (their actors may look
  /// again once its end is known).
  std::vector<int32_t> userStart, userList;
  /// Blocking collectives: per item its instance (-1 for other items), and
  /// per instance its members.
  std::vector<int32_t> instanceOf;
  std::vector<std::vector<int32_t>> instanceMembers;
  /// See slotKey: sized by the items, not by stages times micro-batches
  /// (a schedule may declare 2^20 of each and use few).
  llvm::DenseMap<int64_t, int32_t> lookup;
  std::vector<int32_t> sameNext;
  int32_t firstOf(OpKind kind, int32_t stage, int32_t mb) const {
    auto it = lookup.find(slotKey(kind, stage, mb));
    return it == lookup.end() ? -1 : it->second;
  }
  /// Per item its place in its actor's sequence; per (stage, micro-batch)
  /// the members of a blocking collective.
  std::vector<int32_t> position;
  std::unordered_map<int64_t, std::vector<int32_t>> gathersOf;
};

llvm::Error Separator::build() {
  reserved.assign(program.numActors, 0);
  if (std::optional<VerifyFailure> failure = checkSeparable(program))
    return llvm::createStringError(failure->message);
  if (llvm::Error error = collectItems())
    return error;
  double shortest = 0;
  for (const Item &item : items)
    if (item.duration > 0 && (shortest == 0 || item.duration < shortest))
      shortest = item.duration;
  tol = 1e-9 * (shortest > 0 ? shortest : 1);
  groupCollectives();
  std::vector<std::vector<int32_t>> deps;
  if (llvm::Error error = dependencies(deps))
    return error;
  flatten(deps);
  return llvm::Error::success();
}

int64_t Separator::slotKey(OpKind kind, int32_t stage, int32_t mb) const {
  return (static_cast<int64_t>(stage) * program.numMicrobatches + mb) * 4 +
         static_cast<int64_t>(kind);
}

std::vector<int32_t> Separator::allOf(OpKind kind, int32_t stage,
                                      int32_t mb) const {
  std::vector<int32_t> found;
  for (int32_t id = firstOf(kind, stage, mb); id >= 0; id = sameNext[id])
    found.push_back(id);
  return found;
}

int32_t Separator::findOn(OpKind kind, int32_t stage, int32_t mb,
                          int32_t actor) const {
  for (int32_t id = firstOf(kind, stage, mb); id >= 0; id = sameNext[id])
    if (items[id].actor == actor)
      return id;
  return -1;
}

llvm::Error Separator::collectItems() {
  const int32_t numStages = program.numStages, numMbs = program.numMicrobatches;
  lookup.clear();
  sameNext.clear();
  sequence.assign(program.numActors, {});
  weightsOn.assign(program.numActors, 0);
  for (int32_t a = 0; a < program.numActors; ++a) {
    const auto &ops = program.actors[a];
    for (int32_t i = 0; i < static_cast<int32_t>(ops.size()); ++i) {
      const ProgOp &op = ops[i];
      const bool gather = isCollective(op.kind) && op.token < 0;
      if (op.stage < 0 || op.stage >= numStages || op.mb < 0 || op.mb >= numMbs)
        return llvm::createStringError(
            "an instruction names a stage or micro-batch out of range");
      Item item{op.kind, a, op.stage, op.mb, i};
      if (gather) {
        item.duration =
            costs.collectiveOf(op.stage) + costs.instructionOverhead;
        sequence[a].push_back(static_cast<int32_t>(items.size()));
        items.push_back(item);
        sameNext.push_back(-1);
        continue;
      }
      // (No other insertion into `lookup` until `slot` is written.)
      int32_t *slot = &lookup.try_emplace(slotKey(op.kind, op.stage, op.mb), -1)
                           .first->second;
      while (*slot >= 0) {
        if (items[*slot].actor == a)
          return llvm::createStringError("%s stage %d mb %d appears twice on "
                                         "actor %d",
                                         opKindName(op.kind), op.stage, op.mb,
                                         a);
        slot = &sameNext[*slot];
      }
      // Every instruction costs its overhead too, as the simulator times it.
      item.duration =
          costs.durationOf(op.stage, op.kind) + costs.instructionOverhead;
      item.memory = costs.memoryEffect(op.kind, op.stage);
      // `slot` may point into sameNext: write it before that grows.
      const int32_t id = static_cast<int32_t>(items.size());
      *slot = id;
      items.push_back(item);
      sameNext.push_back(-1);
      if (op.kind == OpKind::Wgrad) {
        weights.push_back(id);
        ++weightsOn[a];
      } else {
        sequence[a].push_back(id);
      }
    }
  }
  return llvm::Error::success();
}

void Separator::groupCollectives() {
  const int32_t numMbs = program.numMicrobatches;
  position.assign(items.size(), -1);
  gathersOf.clear();
  for (int32_t a = 0; a < program.numActors; ++a)
    for (size_t k = 0; k < sequence[a].size(); ++k) {
      const int32_t id = sequence[a][k];
      position[id] = static_cast<int32_t>(k);
      if (isCollective(items[id].kind))
        gathersOf[static_cast<int64_t>(items[id].stage) * numMbs + items[id].mb]
            .push_back(id);
    }
  instanceOf.assign(items.size(), -1);
  instanceMembers.clear();
  for (const auto &[key, members] : gathersOf) {
    for (int32_t m : members)
      instanceOf[m] = static_cast<int32_t>(instanceMembers.size());
    instanceMembers.push_back(members);
  }
}

llvm::Error Separator::dependencies(std::vector<std::vector<int32_t>> &deps) {
  const int32_t numStages = program.numStages, numMbs = program.numMicrobatches;
  const flexpipe::StageGraph<int32_t> graph(numStages, program.edges);
  // The gradients a stage receives from a successor, on every actor running
  // it: Igrad, or Bwd when the successor was not split.
  auto gradientsOf = [&](int32_t stage, int32_t mb) {
    std::vector<int32_t> g = allOf(OpKind::Igrad, stage, mb);
    return g.empty() ? allOf(OpKind::Bwd, stage, mb) : g;
  };
  deps.assign(items.size(), {});
  inputOf.assign(items.size(), -1);
  for (int32_t id = 0; id < static_cast<int32_t>(items.size()); ++id) {
    Item &item = items[id];
    const char *missing = nullptr; // what the item lacks
    auto need = [&](int32_t dep, const char *what) {
      if (dep >= 0)
        deps[id].push_back(dep);
      else if (!missing)
        missing = what;
    };
    switch (item.kind) {
    case OpKind::Fwd:
      for (int32_t p : graph.preds[item.stage])
        llvm::append_range(deps[id], allOf(OpKind::Fwd, p, item.mb));
      break;
    case OpKind::AllGather:
    case OpKind::Gather:
      // Its dependencies: every member's forward (on a registered stage,
      // with no forwards of its own, what precedes the other members'
      // instances). A member that reaches it then waits there until the
      // last member has reached it, as the runtime and the simulator do
      // (retime).
      llvm::append_range(deps[id], allOf(OpKind::Fwd, item.stage, item.mb));
      if (deps[id].empty())
        for (int32_t other :
             gathersOf[static_cast<int64_t>(item.stage) * numMbs + item.mb])
          if (other != id && position[other] > 0)
            deps[id].push_back(
                sequence[items[other].actor][position[other] - 1]);
      break;
    case OpKind::Igrad:
    case OpKind::Bwd:
      need(findOn(OpKind::Fwd, item.stage, item.mb, item.actor), "forward");
      for (int32_t s : graph.succs[item.stage])
        llvm::append_range(deps[id], gradientsOf(s, item.mb));
      if (item.kind == OpKind::Igrad && !missing) {
        item.weight = findOn(OpKind::Wgrad, item.stage, item.mb, item.actor);
        if (item.weight < 0)
          missing = "weight gradient";
        else
          inputOf[item.weight] = id;
      }
      break;
    case OpKind::Wgrad:
      need(findOn(OpKind::Igrad, item.stage, item.mb, item.actor),
           "input gradient on its actor");
      break;
    default:
      break;
    }
    if (missing)
      return llvm::createStringError("%s stage %d mb %d has no %s",
                                     opKindName(item.kind), item.stage, item.mb,
                                     missing);
  }
  return llvm::Error::success();
}

void Separator::flatten(const std::vector<std::vector<int32_t>> &deps) {
  // Each item's dependencies, and their transpose: each item's users.
  const int32_t n = static_cast<int32_t>(items.size());
  auto forEachDep = [&](auto &&visit) {
    for (int32_t id = 0; id < n; ++id)
      for (int32_t from : deps[id])
        visit(id, from);
  };
  flexpipe::buildCompressedRows(n, forEachDep, depStart, depList);
  flexpipe::buildCompressedRows(
      n,
      [&](auto &&user) {
        forEachDep([&](int32_t id, int32_t from) { user(from, id); });
      },
      userStart, userList);
}

/// One re-timing: the policy Separator::retime runs on the event core (its
/// step and ended callbacks), with the state it keeps per actor.
class Separator::Retimer {
public:
  Retimer(const Separator &s, const std::vector<uint8_t> &stashed, double bound,
          double cutoff);
  /// This state (a checkpoint) going on with another stashed set and cutoff.
  void resumeWith(const std::vector<uint8_t> &stashedNow, double cutoff);
  /// Runs to the end; with `record`, keeps a copy of the state at about
  /// every (items / kCheckpoints) items started.
  Timing run(Checkpoints *record = nullptr);
  /// The time of the event this state waits to sweep.
  double time() const { return core.now(); }

private:
  static constexpr int64_t kCheckpoints = 16;
  int64_t checkpointEvery() const {
    return std::max<int64_t>(1, static_cast<int64_t>(s.items.size()) /
                                    kCheckpoints);
  }
  /// At the start of an event time: a checkpoint when due.
  void atTime();

  /// Item `id`'s end is known: actors waiting for it look again.
  void known(int32_t id, double end);
  bool fail(std::string error);
  /// Starts item `id` on actor `a` now. Without a core group its end is
  /// known at once (a receiver can plan for its arrival); sharing cores,
  /// when it comes.
  bool start(int32_t a, int32_t id);
  bool startStashed(int32_t a);
  /// What actor `a` does now. An input not known yet may still be produced
  /// at this time by an actor asked later: only once every actor has acted
  /// (`settled`) does a bubble before it get a stashed weight gradient.
  bool step(int32_t a, bool settled);
  /// A blocking collective: member item `x` on `a` has arrived and waits;
  /// the last to arrive releases every member at its arrival plus the
  /// duration.
  bool arrive(int32_t a, int32_t x);
  void ended(int32_t a, int32_t id);
  /// The makespan and finish sum, or an error for an actor whose program
  /// cannot finish.
  void finish();

  const Separator &s;
  const std::vector<uint8_t> *stashed;
  double bound;
  Timing t;
  Checkpoints *record = nullptr;
  /// Items started so far, and the count at which the next checkpoint is
  /// due.
  int64_t startedItems = 0, nextCheckpoint = 0;
  EventCore core;
  std::vector<double> held;
  /// Per actor, the latest end of its forwards and input gradients so far.
  std::vector<double> lastFi;
  /// Per actor, the work it has not started: the time plus that is a lower
  /// bound on when it ends.
  std::vector<double> left;
  std::vector<size_t> next;
  std::vector<int32_t> fused;
  std::vector<std::deque<int32_t>> stash;
  /// Per actor: computing, waiting in a blocking collective, or waiting
  /// until a known time (an input's arrival, a collective's end).
  std::vector<uint8_t> busy, inCollective;
  std::vector<double> waitUntil;
  std::vector<int32_t> arrived; ///< per collective instance
  /// An actor cannot end before the time plus its work left at the fastest
  /// rate a computation gets (slack for `left`'s rounding).
  double limit, rate;
};

Separator::Retimer::Retimer(const Separator &s,
                            const std::vector<uint8_t> &stashed, double bound,
                            double cutoff)
    : s(s), stashed(&stashed), bound(bound),
      core(s.program.numActors, s.costs) {
  const int32_t numActors = s.program.numActors;
  t.start.assign(s.items.size(), -1);
  t.end.assign(s.items.size(), -1);
  t.order.assign(numActors, {});
  t.peak.assign(numActors, 0);
  held.assign(numActors, 0);
  lastFi.assign(numActors, 0);
  left.assign(numActors, 0);
  for (const Item &item : s.items)
    left[item.actor] += item.duration;
  next.assign(numActors, 0);
  fused.assign(numActors, -1);
  stash.assign(numActors, {});
  busy.assign(numActors, 0);
  inCollective.assign(numActors, 0);
  waitUntil.assign(numActors, 0);
  arrived.assign(s.instanceMembers.size(), 0);
  limit = cutoff * (1 + 1e-9);
  rate = core.maxRate();
  nextCheckpoint = checkpointEvery();
}

struct Separator::Checkpoints {
  std::vector<Retimer> states;
};

void Separator::Retimer::resumeWith(const std::vector<uint8_t> &stashedNow,
                                    double cutoff) {
  stashed = &stashedNow;
  limit = cutoff * (1 + 1e-9);
}

void Separator::Retimer::atTime() {
  if (!record || startedItems < nextCheckpoint)
    return;
  nextCheckpoint = startedItems + checkpointEvery();
  Checkpoints *keep = record;
  record = nullptr; // the copy records nothing
  keep->states.push_back(*this);
  record = keep;
}

void Separator::Retimer::known(int32_t id, double end) {
  t.end[id] = end;
  // The makespan and each actor's last F / I end, kept as ends become
  // known, so that finishing a resumed re-timing does not scan every item.
  t.makespan = std::max(t.makespan, end);
  if (s.items[id].kind != OpKind::Wgrad)
    lastFi[s.items[id].actor] = std::max(lastFi[s.items[id].actor], end);
  // Only an idle actor whose next item uses this one may now do something
  // else than when it was last asked: what step does depends on the inputs
  // of that item alone. A user that computes or waits for a known time
  // answers nothing at this time (step's first test) and is asked again
  // when its computation ends or its wait is over; one at an earlier item
  // asks about this one itself when it gets there.
  const double now = core.now();
  for (int32_t i = s.userStart[id]; i < s.userStart[id + 1]; ++i) {
    const int32_t user = s.userList[i];
    const int32_t b = s.items[user].actor;
    if (!busy[b] && waitUntil[b] <= now &&
        next[b] == static_cast<size_t>(s.position[user]))
      core.touch(b);
  }
}

bool Separator::Retimer::fail(std::string error) {
  t.error = std::move(error);
  core.stop();
  return false;
}

bool Separator::Retimer::start(int32_t a, int32_t id) {
  const Item &item = s.items[id];
  const double now = core.now();
  t.peak[a] = std::max(t.peak[a], held[a] + item.memory.peak);
  held[a] += item.memory.after;
  t.start[id] = now;
  if (core.groupOf(a) < 0)
    known(id, now + item.duration);
  t.order[a].push_back(id);
  ++startedItems;
  if (now + left[a] / rate > limit)
    return fail("cannot end by the cutoff");
  left[a] -= item.duration;
  busy[a] = 1;
  core.compute(a, id, item.duration, now, false, s.costs.shapeOf(item.stage));
  if (item.kind == OpKind::Igrad) {
    if ((*stashed)[item.weight])
      stash[a].push_back(item.weight);
    else
      fused[a] = item.weight;
  }
  return true;
}

bool Separator::Retimer::startStashed(int32_t a) {
  const int32_t w = stash[a].front();
  stash[a].pop_front();
  return start(a, w);
}

bool Separator::Retimer::arrive(int32_t a, int32_t x) {
  const double now = core.now();
  const int32_t instance = s.instanceOf[x];
  t.start[x] = now;
  inCollective[a] = 1;
  const std::vector<int32_t> &members = s.instanceMembers[instance];
  if (++arrived[instance] < static_cast<int32_t>(members.size()))
    return true;
  double latest = now;
  for (int32_t m : members)
    latest = std::max(latest, t.start[m]);
  const double end = latest + s.items[x].duration;
  for (int32_t m : members) {
    const int32_t b = s.items[m].actor;
    known(m, end);
    t.order[b].push_back(m);
    ++startedItems;
    left[b] -= s.items[m].duration;
    inCollective[b] = 0;
    waitUntil[b] = end;
    core.wakeAt(end, b);
    ++next[b];
  }
  return true;
}

bool Separator::Retimer::step(int32_t a, bool settled) {
  const double now = core.now();
  if (busy[a] || inCollective[a] || waitUntil[a] > now)
    return false;
  if (fused[a] >= 0) {
    const int32_t w = fused[a];
    fused[a] = -1;
    return start(a, w);
  }
  if (next[a] == s.sequence[a].size())
    return !stash[a].empty() && startStashed(a);
  const int32_t x = s.sequence[a][next[a]];
  const Item &item = s.items[x];
  bool ready = true; // every input's end is known
  double at = 0;
  for (int32_t i = s.depStart[x]; i < s.depStart[x + 1]; ++i) {
    const int32_t d = s.depList[i];
    if (t.end[d] < 0) {
      ready = false;
      break;
    }
    at = std::max(at, s.arrival(t, d, x, now));
  }
  // A computation that takes memory (a forward; an input gradient whose
  // weight-gradient state outweighs its activations) waits for a stashed
  // weight gradient to free some where it would pass the bound.
  if (item.memory.peak > 0 &&
      s.reserved[a] + held[a] + item.memory.peak > bound * (1 + 1e-9)) {
    if (stash[a].empty()) {
      std::ostringstream os;
      os << "actor " << a << " needs more than the memory bound "
         << bound - s.reserved[a] << " for " << opKindName(item.kind)
         << " stage " << item.stage << " mb " << item.mb;
      return fail(os.str());
    }
    return startStashed(a);
  }
  if (ready && at <= now + s.tol) {
    if (s.instanceOf[x] >= 0)
      return arrive(a, x);
    ++next[a];
    return start(a, x);
  }
  // A bubble: a stashed weight gradient goes in if it fits before the
  // item's input arrives (or the input is not even computing yet).
  if (!stash[a].empty() &&
      (ready ? now + s.items[stash[a].front()].duration <= at + s.tol
             : settled))
    return startStashed(a);
  if (ready) {
    if (at + left[a] / rate > limit)
      return fail("cannot end by the cutoff");
    waitUntil[a] = at;
    core.wakeAt(at, a);
  } else if (!stash[a].empty()) {
    core.askWhenSettled(a);
  }
  return false;
}

void Separator::Retimer::ended(int32_t a, int32_t id) {
  busy[a] = 0;
  if (t.end[id] < 0)
    known(id, core.now());
}

void Separator::Retimer::finish() {
  for (int32_t a = 0; a < s.program.numActors; ++a) {
    t.finishSum += lastFi[a];
    if (t.order[a].size() == s.sequence[a].size() + s.weightsOn[a])
      continue;
    // Nothing is left to happen and this actor has work: what it waits for
    // is never computed.
    std::ostringstream os;
    if (next[a] < s.sequence[a].size()) {
      const Item &item = s.items[s.sequence[a][next[a]]];
      os << "actor " << a << " waits forever before " << opKindName(item.kind)
         << " stage " << item.stage << " mb " << item.mb
         << ": its inputs are never computed in this program order";
    } else {
      os << "actor " << a << " did not finish its program";
    }
    t.error = os.str();
    return;
  }
  t.ok = true;
}

Timing Separator::Retimer::run(Checkpoints *keep) {
  record = keep;
  core.run([this](int32_t a, bool settled) { return step(a, settled); },
           [this](int32_t a, int32_t id) { ended(a, id); },
           [this] { atTime(); });
  record = nullptr;
  if (t.error.empty())
    finish();
  return std::move(t);
}

Timing Separator::retime(const std::vector<uint8_t> &stashed, double bound,
                         double cutoff, const Checkpoints *from,
                         double divergeAt, Checkpoints *record) const {
  size_t kept = 0;
  if (from)
    while (kept < from->states.size() && from->states[kept].time() <= divergeAt)
      ++kept;
  if (record) {
    record->states.clear();
    for (size_t i = 0; i < kept; ++i)
      record->states.push_back(from->states[i]);
  }
  if (kept == 0)
    return Retimer(*this, stashed, bound, cutoff).run(record);
  Retimer resumed = from->states[kept - 1];
  resumed.resumeWith(stashed, cutoff);
  return resumed.run(record);
}

double Separator::divergence(const Timing &timing,
                             const std::vector<uint8_t> &a,
                             const std::vector<uint8_t> &b) const {
  double at = std::numeric_limits<double>::infinity();
  for (int32_t w : weights)
    if (a[w] != b[w])
      at = std::min(at, timing.start[inputOf[w]]);
  return at;
}

std::vector<int32_t>
Separator::chainWeights(const Timing &t, int32_t blocked,
                        const std::vector<uint8_t> &stashed) const {
  std::vector<int32_t> found;
  // The inputs visited, in a scratch set cleared on the way out (a set the
  // size of the items per call was quadratic in them).
  std::vector<uint8_t> &seen = chainSeen;
  seen.resize(items.size(), 0);
  std::vector<int32_t> visited;
  llvm::scope_exit clear([&] {
    for (int32_t i : visited)
      seen[i] = 0;
  });
  int32_t cur = blocked;
  for (size_t guard = 0; guard < items.size() && cur >= 0; ++guard) {
    // The input that arrived last decided when `cur` could start (its data:
    // the receive's posting is `cur`'s actor's own business).
    int32_t critical = -1;
    double latest = -1;
    for (int32_t i = depStart[cur]; i < depStart[cur + 1]; ++i) {
      const int32_t d = depList[i];
      if (double at = arrival(t, d, cur, t.end[d]); at > latest) {
        latest = at;
        critical = d;
      }
    }
    if (critical < 0 || seen[critical])
      break;
    seen[critical] = 1;
    visited.push_back(critical);
    // Fused weight gradients that ran on the critical input's actor after
    // that input was ready and before it started held it back.
    double readyAt = 0;
    for (int32_t i = depStart[critical]; i < depStart[critical + 1]; ++i)
      readyAt = std::max(readyAt,
                         arrival(t, depList[i], critical, t.end[depList[i]]));
    // An actor's items run one after another, so their ends (like their
    // starts) do not decrease along its order: the candidates begin at the
    // first that ends after readyAt.
    const auto &order = t.order[items[critical].actor];
    auto first =
        std::upper_bound(order.begin(), order.end(), readyAt + tol,
                         [&](double at, int32_t id) { return at < t.end[id]; });
    for (auto it = first; it != order.end(); ++it) {
      const int32_t id = *it;
      if (t.start[id] >= t.start[critical] - tol)
        break;
      if (items[id].kind == OpKind::Wgrad && !stashed[id])
        found.push_back(id);
    }
    cur = critical;
  }
  return found;
}

int32_t Separator::waitingWeight(const Timing &t, int32_t blocked,
                                 const std::vector<uint8_t> &stashed) const {
  const auto &order = t.order[items[blocked].actor];
  auto at = std::find(order.begin(), order.end(), blocked);
  while (at != order.begin()) {
    const Item &item = items[*--at];
    if (item.kind != OpKind::Igrad)
      continue;
    const int32_t w = item.weight;
    return stashed[w] && t.start[w] > t.start[blocked] ? w : -1;
  }
  return -1;
}

Program Separator::emit(const Timing &t) const {
  Program out = program;
  for (int32_t a = 0; a < program.numActors; ++a) {
    out.actors[a].clear();
    for (int32_t id : t.order[a])
      out.actors[a].push_back(program.actors[a][items[id].index]);
  }
  return out;
}

/// Whether `a` is a better timing than `b`.
bool better(const Timing &a, const Timing &b, double tol) {
  if (a.makespan < b.makespan - tol * 1e3)
    return true;
  if (a.makespan > b.makespan + tol * 1e3)
    return false;
  return a.finishSum < b.finishSum - tol * 1e3;
}

/// Whether `a` is a better result than `b`: sooner, or as soon (within the
/// tolerance better() gives times) with a lower peak memory (the largest
/// of the actors' `reserved` plus activation memory, then the largest
/// activation memory alone), or as soon and as high with forwards and
/// input gradients done sooner. Ties in time went to the sooner forwards,
/// which a looser memory bound buys with memory: 1F1B at pp 4 under a
/// bound of 8 took a peak of 8 for the 27 steps it takes with 4.
bool preferred(const Timing &a, const Timing &b,
               const std::vector<double> &reserved, double tol) {
  if (std::abs(a.makespan - b.makespan) > tol * 1e3)
    return a.makespan < b.makespan;
  auto device = [&](const Timing &t) {
    double most = 0;
    for (size_t i = 0; i < t.peak.size(); ++i)
      most = std::max(most, reserved[i] + t.peak[i]);
    return most;
  };
  for (auto [x, y] :
       {std::pair(device(a), device(b)), std::pair(a.maxPeak(), b.maxPeak())})
    if (std::abs(x - y) > 1e-9 * std::max(std::abs(x), std::abs(y)))
      return x < y;
  return a.finishSum < b.finishSum - tol * 1e3;
}

/// One stash-and-insert attempt: a stashed set and its re-timing.
struct Attempt {
  std::vector<uint8_t> stashed;
  double diverge = 0; ///< see Separator::retime
  Timing timing;
  /// The same set as an attempt made since the best last changed: it would
  /// re-time exactly as that one did (not better), so it is counted and not
  /// run.
  bool repeated = false;
};

/// Re-times `attempts` under `bound` and `cutoff`, resuming from `from`;
/// on `pool` when given, each attempt a task of its own (a re-timing reads
/// only what the attempts share, and its result does not depend on when it
/// runs).
void runAttempts(const Separator &sep, std::vector<Attempt> &attempts,
                 double bound, double cutoff,
                 const Separator::Checkpoints *from,
                 llvm::ThreadPoolInterface *pool) {
  auto run = [&](Attempt &a) {
    if (!a.repeated)
      a.timing = sep.retime(a.stashed, bound, cutoff, from, a.diverge);
  };
  if (!pool || attempts.size() < 2) {
    for (Attempt &a : attempts)
      run(a);
    return;
  }
  llvm::ThreadPoolTaskGroup group(*pool);
  for (Attempt &a : attempts)
    if (!a.repeated)
      group.async([&run, &a] { run(a); });
  group.wait();
}

/// Programs with fewer items re-time too fast for a task to pay off.
constexpr size_t kParallelItems = 2048;

/// The attempts for the bubble before `blocked` in `best`: stash the
/// weight gradients chained to it; with `fill`, also fuse the weight
/// gradient that waits in the stash through the bubble (its input
/// gradient's, the last before `blocked`), which fills the bubble and
/// delays `blocked` by what does not fit. A change (weight gradients to
/// stash; -1 - w for w to fuse) already made since the best last changed
/// is a repeat (`added`).
void bubbleAttempts(const Separator &sep, const SeparationOptions &options,
                    const Timing &best, const std::vector<uint8_t> &stashed,
                    int32_t blocked, bool fill,
                    std::set<std::vector<int32_t>> &added,
                    std::vector<Attempt> &batch) {
  std::vector<int32_t> weights = sep.chainWeights(best, blocked, stashed);
  std::sort(weights.begin(), weights.end());
  weights.erase(std::unique(weights.begin(), weights.end()), weights.end());
  std::vector<std::vector<int32_t>> changes;
  if (!weights.empty())
    changes.push_back(std::move(weights));
  if (fill)
    if (int32_t w = sep.waitingWeight(best, blocked, stashed); w >= 0)
      changes.push_back({-1 - w});
  for (std::vector<int32_t> &change : changes) {
    Attempt &attempt = batch.emplace_back();
    if (options.shortcuts && !added.insert(change).second) {
      attempt.repeated = true;
      continue;
    }
    attempt.stashed = stashed;
    for (int32_t w : change)
      if (w >= 0)
        attempt.stashed[w] = 1;
      else
        attempt.stashed[-1 - w] = 0;
    attempt.diverge = sep.divergence(best, stashed, attempt.stashed);
  }
}

/// Stash and insert, from the earliest bubble on: the weight gradients
/// chained to a bubble are stashed when that makes a better timing than
/// `best`, which then replaces it, and the bubbles are found again. Returns
/// the attempts made. With a pool, the attempts of up to its concurrency
/// bubbles run at once and the first better one in bubble order is kept:
/// the attempts counted and the result are those of one at a time.
///
/// Each attempt differs from the best so far only late in the iteration
/// (bubbles are tried earliest first, and the weights moved precede the
/// bubble), so it resumes from the best's checkpoints (`keep`, unless null).
/// With `fill`, a bubble's attempts also fuse the weight gradient that waits
/// through it (bubbleAttempts).
int64_t stashAndInsert(const Separator &sep, const SeparationOptions &options,
                       double bound, Timing &best,
                       std::vector<uint8_t> &stashed,
                       Separator::Checkpoints *keep, bool fill) {
  const size_t width =
      options.pool && sep.items.size() >= kParallelItems
          ? std::max<size_t>(1, options.pool->getMaxConcurrency())
          : 1;
  int64_t rounds = 0;
  std::set<std::pair<int32_t, int32_t>> tried; // (actor, blocked item)
  // The weight gradients each attempt since the best last changed added:
  // chains of different bubbles often lead back to the same ones.
  std::set<std::vector<int32_t>> added;
  std::vector<Attempt> batch;
  bool changed = true;
  while (changed && rounds < options.maxRounds) {
    changed = false;
    // Bubbles: an actor idle before one of its forwards / input gradients.
    std::vector<std::pair<double, int32_t>> bubbles; // (idle from, blocked)
    for (size_t a = 0; a < best.order.size(); ++a) {
      double free = 0;
      for (int32_t id : best.order[a]) {
        if (best.start[id] > free + sep.tol &&
            sep.items[id].kind != OpKind::Wgrad)
          bubbles.push_back({free, id});
        free = best.end[id];
      }
    }
    std::sort(bubbles.begin(), bubbles.end());
    size_t next = 0;
    while (!changed && rounds < options.maxRounds) {
      batch.clear();
      while (next < bubbles.size() && batch.size() < width &&
             rounds + static_cast<int64_t>(batch.size()) < options.maxRounds) {
        const int32_t blocked = bubbles[next++].second;
        if (tried.insert({sep.items[blocked].actor, blocked}).second)
          bubbleAttempts(sep, options, best, stashed, blocked, fill, added,
                         batch);
      }
      if (batch.empty())
        break;
      batch.resize(std::min<size_t>(batch.size(), options.maxRounds - rounds));
      const double cutoff = best.makespan + sep.tol * 1e3;
      runAttempts(sep, batch, bound, cutoff, keep, options.pool);
      for (Attempt &attempt : batch) {
        ++rounds;
        if (attempt.repeated || !attempt.timing.ok ||
            !better(attempt.timing, best, sep.tol))
          continue;
        if (keep) {
          // The same re-timing again, keeping its checkpoints.
          Separator::Checkpoints marks;
          attempt.timing = sep.retime(attempt.stashed, bound, cutoff, keep,
                                      attempt.diverge, &marks);
          *keep = std::move(marks);
        }
        best = std::move(attempt.timing);
        stashed = std::move(attempt.stashed);
        tried.clear();
        added.clear();
        changed = true;
        break;
      }
    }
  }
  return rounds;
}

} // namespace

std::optional<VerifyFailure>
flexpipe::sched::checkSeparable(const Program &program) {
  for (int32_t a = 0; a < program.numActors; ++a)
    for (int32_t i = 0; i < static_cast<int32_t>(program.actors[a].size());
         ++i) {
      const ProgOp &op = program.actors[a][i];
      if (isCompute(op.kind) || (isCollective(op.kind) && op.token < 0))
        continue;
      return VerifyFailure{
          llvm::formatv("actor {0} has an op of kind '{1}'; gradient "
                        "separation works on programs of computations and "
                        "blocking collectives (run it before communication "
                        "is inserted; asynchronous collectives and exec are "
                        "not supported yet)",
                        a, opKindName(op.kind)),
          {{a, i, ""}}};
    }
  return std::nullopt;
}

llvm::Expected<SeparationResult>
flexpipe::sched::separateGradients(const Program &program,
                                   const SimCosts &costs,
                                   const SeparationOptions &options) {
  SeparationResult result;
  Separator sep(program, costs);
  if (llvm::Error error = sep.build())
    return std::move(error);
  std::vector<uint8_t> stashed(sep.items.size(), 0);
  const double unbounded = std::numeric_limits<double>::infinity();
  Timing fused = sep.retime(stashed, unbounded);
  if (!fused.ok)
    return llvm::createStringError(fused.error);
  result.fusedTime = fused.makespan;
  result.fusedPeak = fused.maxPeak();
  // Without a bound given, what keeps the schedule's peak (an actor's static
  // and activation memory, the largest over actors) where the fused program
  // has it: an actor with less static memory may hold more activations.
  double bound = options.memoryBound;
  if (bound <= 0) {
    sep.reserved =
        actorStaticBytes(stageActors(program), program.numActors, costs);
    for (int32_t a = 0; a < program.numActors; ++a)
      bound = std::max(bound, sep.reserved[a] + fused.peak[a]);
  }
  result.memoryBound = 0; // the most activation memory an actor may hold
  for (int32_t a = 0; a < program.numActors; ++a)
    result.memoryBound = std::max(result.memoryBound, bound - sep.reserved[a]);
  for (int32_t a = 0; a < program.numActors; ++a)
    if (fused.peak[a] > bound * (1 + 1e-9))
      return llvm::createStringError(
          "the memory bound %g is below the %g that actor %d needs even "
          "with every weight gradient right after its input gradient",
          bound, fused.peak[a], a);

  // The fused timing again, under the bound (which never acts when nothing
  // is stashed), keeping the checkpoints the attempts resume from.
  Separator::Checkpoints marks;
  Separator::Checkpoints *keep = options.resume ? &marks : nullptr;
  Timing best = sep.retime(stashed, bound, unbounded, nullptr, 0, keep);
  result.rounds =
      stashAndInsert(sep, options, bound, best, stashed, keep, false);
  // Then bubbles are filled too: a stashed weight gradient that waits
  // through a bubble it does not fit in may still shorten the iteration
  // when fused (what delays the next item may be off the critical path).
  // Its own phase, so that the first phase's result is a candidate.
  // maxRounds counts every search's attempts: the later ones get what the
  // earlier ones left.
  SeparationOptions rest = options;
  rest.maxRounds = options.maxRounds - result.rounds;
  result.rounds += stashAndInsert(sep, rest, bound, best, stashed, keep, true);
  rest.maxRounds = options.maxRounds - result.rounds;
  result.strategy = "stash-and-insert";
  result.stashed = std::count(stashed.begin(), stashed.end(), 1);

  // Stashing every weight gradient: W only in bubbles or when memory forces.
  // Where bubbles are shorter than the weight gradients (uneven stages,
  // messages), those pile up after the actors' last input gradients: the
  // search from there fuses the ones that waited through a bubble.
  std::vector<uint8_t> all(sep.items.size(), 0);
  for (int32_t w : sep.weights)
    all[w] = 1;
  std::vector<uint8_t> allSearched = all;
  Separator::Checkpoints allMarks;
  Separator::Checkpoints *keepAll = options.resume ? &allMarks : nullptr;
  Timing greedy = sep.retime(all, bound, unbounded, nullptr, 0, keepAll);
  const int64_t allRounds =
      greedy.ok
          ? stashAndInsert(sep, rest, bound, greedy, allSearched, keepAll, true)
          : 0;
  result.rounds += allRounds;
  // Under a bound above the fused program's peak, stashing every weight
  // gradient fills what the bound allows (a W waits for a bubble until
  // memory forces it), though under the fused peak it may be as fast:
  // 1F1B at pp 4 takes 27 steps under a bound of 4 or 8, with a peak of 4
  // or 8. Both are tried; the lower peak wins a tie in time.
  const double tight = fused.maxPeak();
  if (options.memoryBound > 0 && tight < bound * (1 - 1e-9)) {
    Timing lean = sep.retime(all, tight, best.makespan + sep.tol * 1e3);
    if (lean.ok &&
        (!greedy.ok || preferred(lean, greedy, sep.reserved, sep.tol))) {
      greedy = std::move(lean);
      allSearched = all;
    }
  }
  if (greedy.ok && preferred(greedy, best, sep.reserved, sep.tol)) {
    best = std::move(greedy);
    const bool searched = allSearched != all;
    result.strategy = searched ? "stash-all-and-insert" : "stash-all";
    result.stashed = std::count(allSearched.begin(), allSearched.end(), 1);
  }
  if (!preferred(best, fused, sep.reserved, sep.tol)) {
    best = fused;
    result.strategy = "fused";
    result.stashed = 0;
  }
  result.time = best.makespan;
  result.peak = best.maxPeak();
  result.program = sep.emit(best);
  return result;
}
