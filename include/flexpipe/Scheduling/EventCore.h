//===- EventCore.h - Time, computations and the tie rule --------*- C++ -*-===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The event core that times actors' work where what an actor does next
// depends on what the others have done by then: the scheduler's engine
// (Algorithm 1's step function in either time model, and replays of a
// given order), the simulator's event driver (fixed orders, ranks sharing
// cores) and gradient separation's re-timer (orders chosen while timing).
// Each keeps its own policy, a step function that says what an actor does
// at the current time; the core owns time, computations in progress and the
// one tie rule:
//
//  - At each event time the actors are asked in id order, each until it
//    does nothing more, and the sweep repeats until a whole sweep moves no
//    actor: a lower actor acts first, and every actor sees what the actors
//    before it did at that time. Then the actors that asked for it are
//    asked once more with `settled` set (every actor that could act at this
//    time has acted), for decisions that should wait for that, and the
//    sweeps repeat if one acted.
//  - Only actors whose situation changed are asked (touch: the policy's
//    part, for what its actors wait on; a computation's end and a wake-up
//    touch their actor): the others would answer as before.
//  - Time then moves to the next event: a computation's end, a delayed
//    computation's start, or a wake-up an actor asked for. The computations
//    that end at one time are reported in ascending id order.
//  - A computation of an actor without a core group ends exactly its work
//    after its start (equal durations tie exactly). The computations of a
//    core group (ranks sharing a node's cores, SimCosts::coreGroup) progress
//    together at min(1, cores / k) / slowdown[n] each while k of them and n
//    of their node's run (processor sharing); their ends are known only
//    when they come. With a
//    time slice (SimCosts::groupSlice), a group of at most one core runs
//    one computation at a time instead, as an OS scheduler does: the rank
//    holding the core keeps it, across its computations, until it waits or
//    its slice runs out while another is ready, which then takes the core
//    (round robin in the order they became ready). The one computing
//    progresses at min(1, cores) / slowdown[n]: the group does as much work
//    as under processor sharing, in another order.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_EVENTCORE_H
#define FLEXPIPE_SCHEDULING_EVENTCORE_H

#include "flexpipe/Scheduling/Simulator.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <vector>

namespace flexpipe::sched {

/// Timed events, earliest first, ties by ascending id. A binary heap written
/// out so that an event is stored field by field: building the entry and
/// copying it whole made a store-forwarding stall that cost the scheduler a
/// quarter of a schedule.
class EventHeap {
public:
  bool empty() const { return heap.empty(); }
  double topTime() const { return heap.front().time; }
  int32_t topId() const { return heap.front().id; }
  int32_t topActor() const { return heap.front().actor; }
  void push(double time, int32_t id, int32_t actor) {
    size_t i = heap.size();
    heap.emplace_back();
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!before(time, id, heap[parent]))
        break;
      heap[i] = heap[parent];
      i = parent;
    }
    heap[i].time = time;
    heap[i].id = id;
    heap[i].actor = actor;
  }
  void pop() {
    const Event last = heap.back();
    heap.pop_back();
    if (heap.empty())
      return;
    size_t i = 0;
    const size_t n = heap.size();
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n)
        break;
      if (child + 1 < n &&
          before(heap[child + 1].time, heap[child + 1].id, heap[child]))
        ++child;
      if (!before(heap[child].time, heap[child].id, last))
        break;
      heap[i] = heap[child];
      i = child;
    }
    heap[i] = last;
  }

private:
  struct Event {
    double time;
    int32_t id, actor;
  };
  static bool before(double time, int32_t id, const Event &e) {
    return time < e.time || (time == e.time && id < e.id);
  }
  std::vector<Event> heap;
};

/// A set of actor ids (a bitset), visited in ascending order: finding the
/// next member skips 64 absent actors at a time, where a scan of one flag
/// per actor at every sweep cost the separation re-timer a third of its
/// time at pp = 16.
class ActorSet {
public:
  explicit ActorSet(int32_t size = 0, bool full = false)
      : size(size), words((size + 63) / 64, 0) {
    if (full)
      fill();
  }
  void insert(int32_t a) { words[a >> 6] |= uint64_t(1) << (a & 63); }
  void erase(int32_t a) { words[a >> 6] &= ~(uint64_t(1) << (a & 63)); }
  void fill() {
    std::fill(words.begin(), words.end(), ~uint64_t(0));
    if (size % 64 != 0)
      words.back() = (uint64_t(1) << (size % 64)) - 1;
  }
  /// The smallest member at or after `from`, or -1.
  int32_t next(int32_t from) const {
    size_t w = static_cast<size_t>(from) >> 6;
    if (w >= words.size())
      return -1;
    uint64_t bits = words[w] & (~uint64_t(0) << (from & 63));
    while (bits == 0) {
      if (++w == words.size())
        return -1;
      bits = words[w];
    }
    return static_cast<int32_t>(w * 64 + __builtin_ctzll(bits));
  }

private:
  int32_t size;
  std::vector<uint64_t> words;
};

class EventCore {
public:
  /// Every actor has a core of its own.
  explicit EventCore(int32_t numActors);
  /// The core groups of `costs` (none: every actor has a core of its own).
  EventCore(int32_t numActors, const SimCosts &costs);

  double now() const { return time; }
  /// The core group of `actor`, or -1.
  int32_t groupOf(int32_t actor) const {
    return actor < static_cast<int32_t>(group.size()) ? group[actor] : -1;
  }

  /// Starts computation `id` of `actor`, `work` long at a whole core, at
  /// time `at` (not before now). Its end is reported to the run's `ended`,
  /// and touches the actor. Ids of computations that may end at the same
  /// time are distinct (they order the reports). `continuing`: the actor
  /// came to it from its previous computation without waiting (its
  /// instructions' overhead in between, at most): holding its group's
  /// core, it keeps it, busy from now on, as a rank that has not blocked
  /// keeps its core.
  /// `shape`: which of its group's slowdowns it suffers
  /// (SimCosts::stageShape).
  void compute(int32_t actor, int32_t id, double work, double at,
               bool continuing = false, int32_t shape = 0) {
    if (groupOf(actor) < 0 || work <= 0)
      exactEnds.push(at + std::max(0.0, work), id, actor);
    else
      computeShared(actor, id, work, at, continuing, shape);
  }
  /// `actor` works on its core, between computations, until `until` (its
  /// instructions' overhead): holding a core its group takes turns on, it
  /// keeps it until then, unless it computes again, as a rank that has not
  /// blocked keeps its core.
  void hold(int32_t actor, double until) {
    if (actor < static_cast<int32_t>(busyUntil.size()))
      busyUntil[actor] = std::max(busyUntil[actor], until);
  }
  /// Asks `actor` again at time `at` (a wait that ends then).
  void wakeAt(double at, int32_t actor);
  /// `actor` is asked again at this time (something it waits for changed).
  void touch(int32_t actor) { dirty.insert(actor); }
  void touchAll() { dirty.fill(); }
  /// `actor` is asked with `settled` set once nobody else acts at this time.
  void askWhenSettled(int32_t actor) { settleAsk.insert(actor); }

  /// The fastest any computation progresses (work per second): 1 without
  /// core groups, more only where a group's slowdown is below 1.
  double maxRate() const;

  /// Ends the run after the current sweep (the policy failed or gave up).
  void stop() { stopped = true; }

  /// Sweeps and moves time until no event is left (or stop()). `step(actor,
  /// settled)` is what an actor does at now(): true when it did something
  /// (it is asked again), false when it has nothing to do at this time.
  /// `ended(actor, id)`: computation `id` of `actor` ended at now(); it
  /// starts nothing (the end touches the actor, whose step then does).
  /// Returns the time of the last event.
  /// `atTime()` is called at each new event time once its ends have been
  /// reported, before any actor is asked: a copy of the core (and of the
  /// policy's state) made there goes on exactly as this run would when run
  /// again.
  template <typename Step, typename Ended, typename AtTime>
  double run(Step &&step, Ended &&ended, AtTime &&atTime) {
    for (;;) {
      // Sweeps until nobody acts; then those waiting for that, settled.
      while (sweep(dirty, false, step) ||
             (!stopped && sweep(settleAsk, true, step)))
        ;
      if (stopped)
        return time;
      if (!advance(ended))
        return time;
      atTime();
    }
  }
  template <typename Step, typename Ended>
  double run(Step &&step, Ended &&ended) {
    return run(step, ended, [] {});
  }

private:
  struct Job {
    int32_t actor, id;
    double left, work;
    int32_t shape = 0;
    double rate = 0; ///< its progress per second now (groupRates)
  };
  struct Timed {
    double time;
    int32_t actor, id;
    double work; ///< `later`: the computation's work
    int32_t shape = 0;
    bool operator>(const Timed &o) const {
      return time > o.time || (time == o.time && id > o.id);
    }
  };
  using MinHeap =
      std::priority_queue<Timed, std::vector<Timed>, std::greater<Timed>>;
  /// Group `g`'s computations of `shape` progress at rate(g) each while
  /// `onNode` computations run on its node.
  double rate(int32_t g, int32_t shape, size_t onNode) const;
  /// rate() of every running computation now (Job::rate).
  void groupRates();
  /// Whether group `g`'s computations take turns on its core. Once time is
  /// so far on that a slice no longer moves it (a double's resolution;
  /// 1e13 s against 1e-4 s slices), they share the core instead, the limit
  /// of turns as slices shrink: turns would no longer advance time.
  bool takesTurns(size_t g) const {
    return slice > 0 && cores[g] <= 1 && time + slice > time;
  }
  /// Puts group `g`'s computation that holds the core first: the holder's,
  /// while its slice lasts, else the next in line, whose slice starts now.
  /// Returns when the holder's slice ends (infinity while no other waits).
  double settleTurn(size_t g);
  /// The earliest exact end, group start or wake queued; infinity if none.
  double queuedEvent() const;
  /// The time of the next event (an end, a start, a wake, a slice that runs
  /// out), settling the groups' turns and `progressing`; after groupRates().
  double nextEvent();
  /// Moves time on by whole rounds of the groups taking turns (each
  /// computation of such a group gets one slice a round, whatever the
  /// phase) while nothing else happens and no computation ends; true when
  /// it did.
  bool fastForward();
  /// compute() on a core group.
  void computeShared(int32_t actor, int32_t id, double work, double at,
                     bool continuing, int32_t shape);
  /// Asks the actors flagged in `asked`, in id order, each until it does
  /// nothing more (clearing its flag first); true when one acted.
  template <typename Step>
  bool sweep(ActorSet &asked, bool settled, Step &step) {
    bool moved = false;
    for (int32_t a = asked.next(0); a >= 0 && !stopped; a = asked.next(a + 1)) {
      asked.erase(a);
      while (!stopped && step(a, settled))
        moved = true;
    }
    return moved;
  }
  /// Moves time to the next event and reports the computations that end
  /// then; false when no event is left.
  template <typename Ended> bool advance(Ended &&ended);

  double time = 0;
  bool stopped = false;
  std::vector<int32_t> group;
  std::vector<double> cores;
  std::vector<int32_t> node; ///< per group, its node (0 ..)
  std::vector<std::vector<std::vector<double>>> slowdown; ///< [g][shape][n]
  /// advance()'s per node: computations running.
  std::vector<size_t> onNode;
  std::vector<std::vector<Job>> running; ///< per group
  /// Groups taking turns (slice > 0): the actor holding the core and when
  /// its slice started (renewed every `slice` while nobody else waits).
  double slice = 0;
  double handoff = 0; ///< work a computation gains taking a core over
  struct Turn {
    int32_t holder = -1;
    double start = 0;
  };
  std::vector<Turn> turns;
  /// advance()'s per group: the computations progressing (the first ones).
  std::vector<size_t> progressing;
  /// Per actor: until when it works on its core between computations
  /// (hold()).
  std::vector<double> busyUntil;
  EventHeap exactEnds; ///< computations without a group
  MinHeap later;       ///< group computations to start
  EventHeap wakes;
  ActorSet dirty, settleAsk;
};

template <typename Ended> bool EventCore::advance(Ended &&ended) {
  groupRates();
  double at = nextEvent();
  // Computations many slices long: whole rounds of turns at once (one
  // event per slice took hours for a computation of 1e6 s).
  if (slice > 0 && fastForward()) {
    groupRates(); // (time moved on: turns may have become sharing)
    at = nextEvent();
  }
  if (at == std::numeric_limits<double>::infinity())
    return false;
  for (size_t g = 0; g < running.size(); ++g)
    for (size_t j = 0; j < progressing[g]; ++j)
      running[g][j].left -= (at - time) * running[g][j].rate;
  time = at;
  for (size_t g = 0; g < running.size(); ++g) {
    if (running[g].empty())
      continue;
    auto done = [&](const Job &job) {
      if (job.left > 1e-9 * job.work && time + job.left / job.rate > time)
        return false;
      dirty.insert(job.actor);
      ended(job.actor, job.id);
      return true;
    };
    // (A slice that ran out passes the core on in the next settleTurn.)
    running[g].erase(std::remove_if(running[g].begin(),
                                    running[g].begin() + progressing[g], done),
                     running[g].begin() + progressing[g]);
  }
  while (!exactEnds.empty() && exactEnds.topTime() <= time) {
    const int32_t actor = exactEnds.topActor(), id = exactEnds.topId();
    exactEnds.pop();
    dirty.insert(actor);
    ended(actor, id);
  }
  while (!later.empty() && later.top().time <= time) {
    const Timed start = later.top();
    later.pop();
    running[group[start.actor]].push_back(
        {start.actor, start.id, start.work, start.work, start.shape});
  }
  while (!wakes.empty() && wakes.topTime() <= time) {
    dirty.insert(wakes.topActor());
    wakes.pop();
  }
  return true;
}

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_EVENTCORE_H
