//===- Scheduler.cpp - CSSR and the priority-driven scheduler -------------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// One engine serves both time models: a policy on the event core
// (EventCore.h) that the simulator and gradient separation's re-timer run on
// too, so time, the order of events at one time and which actor acts first
// are decided in one place. Items (kind, part, micro-batch) live in a flat
// pool; a dependency resolver counts unfinished predecessors and moves an
// item into its actor's reorder queue (one min-heap of micro-batches per part
// and kind) when the last one completes. Completion at `end` makes a
// successor visible from `end` on, which is the paper's local buffer: nothing
// scheduled in a step is visible to anyone in that same step. With unit
// durations every decision happens at an integer time and the run is the
// paper's step-synchronous schedule.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Scheduler.h"
#include "flexpipe/Scheduling/EventCore.h"
#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Scheduling/StatementError.h"
#include "flexpipe/Support/InputLimits.h"
#include "flexpipe/Support/StageGraph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Compiler.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>
#include <tuple>

using namespace flexpipe::sched;

const char *flexpipe::sched::compKindName(CompKind kind) {
  return opKindName(toOpKind(kind));
}

char flexpipe::sched::StatementError::ID = 0;

llvm::Error flexpipe::sched::validate(const Problem &p) {
  auto fail = [](const llvm::Twine &what) {
    return llvm::createStringError(what.str());
  };
  if (p.numActors < 1)
    return fail("the problem has no actors");
  if (p.numMicrobatches < 1)
    return fail("the problem has no micro-batches");
  if (static_cast<int32_t>(p.policies.size()) != p.numActors ||
      static_cast<int32_t>(p.actorLimits.size()) != p.numActors)
    return fail("the problem needs one policy and one in-flight limit per "
                "actor");
  std::vector<bool> used(p.numActors, false);
  for (size_t i = 0; i < p.parts.size(); ++i) {
    const StagePart &part = p.parts[i];
    const std::string stage = "stage " + std::to_string(part.stage);
    if (part.actor < 0 || part.actor >= p.numActors)
      return fail("stage part " + llvm::Twine(i) + " sits on actor " +
                  llvm::Twine(part.actor) + ", outside the mesh");
    if (part.mbBegin < 0 || part.mbEnd > p.numMicrobatches ||
        part.mbBegin >= part.mbEnd)
      return fail(stage + " gets no micro-batches");
    if (part.inflightLimit < 1)
      return fail(stage + " has an in-flight limit below 1");
    for (double cost : part.cost)
      if (!(cost >= 0) || !std::isfinite(cost))
        return fail(stage + " has a negative or non-finite duration");
    used[part.actor] = true;
  }
  for (int32_t a = 0; a < p.numActors; ++a) {
    const std::string actor = "actor " + std::to_string(a);
    if (!used[a])
      return fail(actor + " holds no stage");
    const ActorPolicy &pol = p.policies[a];
    if (pol.fwdUnit < 1 || pol.bwdUnit < 1 || pol.fwd.interval < 0 ||
        pol.bwd.interval < 0)
      return fail(actor +
                  " has a scheduling unit below 1 or a negative interval");
    if (p.actorLimits[a] < 1)
      return fail(actor + " has an in-flight limit below 1");
  }
  const int32_t numParts = static_cast<int32_t>(p.parts.size());
  for (auto [from, to] : p.edges)
    if (from < 0 || from >= numParts || to < 0 || to >= numParts || from == to)
      return fail("a stage edge names a stage part out of range or itself");
  for (const ModuleActorLimit &m : p.moduleActorLimits) {
    if (m.limit < 1)
      return fail("a module's per-actor in-flight limit is below 1");
    for (int32_t part : m.parts)
      if (part < 0 || part >= numParts ||
          p.parts[part].actor != p.parts[m.parts.front()].actor)
        return fail("a module's per-actor in-flight limit names a stage part "
                    "out of range or on another actor");
  }
  for (const GlobalLimit &g : p.globalLimits) {
    if (g.limit < 1)
      return fail("a global in-flight limit is below 1");
    for (int32_t s : g.sources)
      if (s < 0 || s >= numParts)
        return fail("a global in-flight limit names a stage part out of "
                    "range");
  }
  for (const ExtraDependency &d : p.extraDependencies)
    if (d.srcPart < 0 || d.srcPart >= numParts || d.dstPart < 0 ||
        d.dstPart >= numParts)
      return fail("an extra dependency names a stage part out of range");
  for (int32_t i = 0; i < static_cast<int32_t>(p.registered.size()); ++i) {
    const Registered &r = p.registered[i];
    // What is wrong with registered instruction i, at its statement.
    auto failAt = [&](const llvm::Twine &what) {
      return llvm::make_error<StatementError>(
          StatementError::Site::Registered, i,
          ("registered instruction @" + r.name + " " + what).str());
    };
    if (r.actors.empty())
      return failAt("runs on no actor");
    for (size_t k = 0; k < r.actors.size(); ++k)
      if (r.actors[k] < 0 || r.actors[k] >= p.numActors ||
          (k > 0 && r.actors[k] <= r.actors[k - 1]))
        return failAt("needs distinct actors of the mesh, ascending");
    if (std::min({r.prev, r.next, r.unit}) < 1 ||
        std::max({r.prev, r.next, r.unit}) > flexpipe::kMaxCount)
      return failAt("has prev, next or unit outside 1 to " +
                    llvm::Twine(flexpipe::kMaxCount));
    if (r.duration < 0)
      return failAt("has a negative duration");
    if (r.runtime == InstRuntime::Gather &&
        std::find(r.actors.begin(), r.actors.end(), r.root) == r.actors.end())
      return failAt("gathers to a root outside its actors");
    for (const auto *ends : {&r.after, &r.before})
      for (const PartKind &end : *ends)
        if (end.part < 0 || end.part >= numParts)
          return failAt("names a stage part out of range");
    // The instances cover the sources' micro-batches; every dependent's
    // micro-batch must map onto one of them.
    const auto [lo, hi] = registeredRange(p, i);
    const int64_t instances = registeredInstances(p, i);
    for (const PartKind &dst : r.before) {
      const int32_t last = std::min(hi, p.parts[dst.part].mbEnd) - 1;
      if (last >= lo && (last - lo) / r.next >= instances)
        return failAt(llvm::formatv(
            "has {0} instances (prev {1}), but next {2} makes micro-batch {3} "
            "of stage {4} wait for instance {5}",
            instances, r.prev, r.next, last, p.parts[dst.part].stage,
            (last - lo) / r.next));
    }
  }
  if (!p.customPriorities.empty() &&
      static_cast<int32_t>(p.customPriorities.size()) != p.numActors)
    return fail("custom priorities must be given for every actor (empty for "
                "the built-in step function)");
  return llvm::Error::success();
}

std::pair<int32_t, int32_t> flexpipe::sched::registeredRange(const Problem &p,
                                                             int32_t r) {
  const Registered &ri = p.registered[r];
  if (ri.after.empty())
    return {0, p.numMicrobatches};
  int32_t lo = p.numMicrobatches, hi = 0;
  for (const PartKind &src : ri.after) {
    lo = std::min(lo, p.parts[src.part].mbBegin);
    hi = std::max(hi, p.parts[src.part].mbEnd);
  }
  return {lo, hi};
}

/// Maps a user-named kind onto the kinds that exist in problem `p`: bwd ends
/// at wgrad (as a source) or starts at igrad (as a target) when split.
static CompKind existingKind(const Problem &p, CompKind kind, bool asSource) {
  if (p.splitBackward && kind == CompKind::Bwd)
    return asSource ? CompKind::Wgrad : CompKind::Igrad;
  if (!p.splitBackward && (kind == CompKind::Igrad || kind == CompKind::Wgrad))
    return CompKind::Bwd;
  return kind;
}

/// The kinds of computation problem `p` schedules: forwards, the kind that
/// carries gradients and, when the backward is split, weight gradients.
static llvm::ArrayRef<CompKind> scheduledKinds(const Problem &p) {
  static constexpr CompKind whole[] = {CompKind::Fwd, CompKind::Bwd};
  static constexpr CompKind split[] = {CompKind::Fwd, CompKind::Igrad,
                                       CompKind::Wgrad};
  return p.splitBackward ? llvm::ArrayRef(split) : llvm::ArrayRef(whole);
}

int64_t flexpipe::sched::registeredInstances(const Problem &p, int32_t r) {
  const auto [lo, hi] = registeredRange(p, r);
  return (hi - lo + p.registered[r].prev - 1) / p.registered[r].prev;
}

bool flexpipe::sched::waitsForInstance(const Problem &p, int32_t r,
                                       int32_t first, CompKind kind,
                                       int32_t part, int32_t mb) {
  const Registered &ri = p.registered[r];
  const auto [lo, hi] = registeredRange(p, r);
  if (mb < lo || mb >= hi)
    return false;
  const int64_t instance = (first - lo) / ri.prev;
  if ((mb - lo) / ri.next != instance)
    return false;
  return llvm::any_of(ri.before, [&](const PartKind &dst) {
    return dst.part == part &&
           existingKind(p, dst.kind, /*asSource=*/false) == kind;
  });
}

namespace {

/// A reorder queue: a min-heap of micro-batches over storage that the
/// engine owns (one flat array for every queue: a queue never holds more
/// than its part's micro-batches).
class ReadyQueue {
public:
  ReadyQueue(int32_t *data, int32_t &size) : data(data), size(size) {}
  bool empty() const { return size == 0; }
  int32_t front() const { return data[0]; }
  void push(int32_t mb) {
    data[size++] = mb;
    std::push_heap(data, data + size, std::greater<int32_t>());
  }
  int32_t pop() {
    std::pop_heap(data, data + size, std::greater<int32_t>());
    return data[--size];
  }

private:
  int32_t *data;
  int32_t &size;
};

class Engine {
public:
  Engine(const Problem &problem, TimeModel model)
      : p(problem), model(model), numParts(problem.parts.size()),
        numActors(problem.numActors) {}
  // The policy the event core runs (EventCore::run).
  bool actorStep(int32_t actor);
  void ended(int32_t id);

  ScheduleResult run() {
    if (!prepare())
      return result;
    return execute();
  }
  /// Validates the problem and builds the dependency graph with the first
  /// ready items queued; false (with result().error) for a bad problem. A
  /// prepared engine may be copied to run the same problem again another
  /// way (the graph is built once).
  bool prepare();
  /// Runs a prepared engine to the end; the result moves out (the engine is
  /// spent).
  ScheduleResult execute();
  /// This prepared engine (moved: its last run) timing `order` under its
  /// own time model instead of choosing, with `cutoff` as in cutAt().
  Engine replaying(const std::vector<std::vector<ScheduledItem>> &order,
                   double cutoff) && {
    replay = &order;
    diagnose = false;
    return std::move(cutAt(cutoff));
  }
  /// Makes the run give up (fail, with ScheduleResult::cut) as soon as some
  /// actor cannot end by `at`: its clock plus the computation it has left
  /// is past it.
  Engine &cutAt(double at) {
    cutoff = at;
    return *this;
  }
  /// Makes a step-model run give up (fail, with ScheduleResult::cut) as
  /// soon as its order, replayed under the parts' durations with cutoff
  /// `at` (replaying), would give up: it keeps the earliest each computation
  /// could end in that replay (its inputs' and its actor's previous
  /// computation's ends; registered instructions, which only delay it,
  /// left out) and checks it as cutAt() does.
  Engine &replayCutAt(double at) {
    replayCutoff = at;
    return *this;
  }
  /// A copy of this prepared engine with another time model, without a
  /// per-actor diagnosis.
  Engine withModel(TimeModel timeModel) const {
    Engine copy(*this);
    copy.model = timeModel;
    copy.diagnose = false;
    return copy;
  }

private:
  // --- Item pool -----------------------------------------------------------
  // An item is (slot, kind) with slot = partBase[part] + mb - mbBegin
  // = slotOrigin[part] + mb.
  int32_t itemId(CompKind kind, int32_t part, int32_t mb) const {
    return (slotOrigin[part] + mb) * kNumCompKinds + static_cast<int32_t>(kind);
  }
  /// The micro-batch of slot `slot` of `part`.
  int32_t mbOf(int32_t part, int32_t slot) const {
    return slot - slotOrigin[part];
  }
  bool flowsThrough(int32_t part, int32_t mb) const {
    return mb >= p.parts[part].mbBegin && mb < p.parts[part].mbEnd;
  }
  /// The kind that releases a forward's activations.
  CompKind releaseKind() const {
    return p.splitBackward ? CompKind::Wgrad : CompKind::Bwd;
  }
  /// The kind that carries gradients to the previous stage.
  CompKind gradKind() const {
    return p.splitBackward ? CompKind::Igrad : CompKind::Bwd;
  }
  /// existingKind() in this problem.
  CompKind existing(CompKind kind, bool asSource) const {
    return existingKind(p, kind, asSource);
  }

  void build();
  /// Calls `edge(from, to)` for every dependency between items: the stage
  /// DAG forward and reversed for the gradients, forward before backward,
  /// input before weight gradient, the extra dependencies.
  template <typename Edge> void forEachItemEdge(Edge &&edge) const;
  void addRegisteredEdges();
  void initRegistered();
  void addEdge(int32_t from, int32_t to) { regEdges.push_back({from, to}); }
  /// The unfinished predecessor of `item` that keeps it waiting, or -1.
  int32_t unfinishedPredecessor(int32_t item) const;

  // --- Scheduling ----------------------------------------------------------
  /// Whether an in-flight limit lets (kind, part, mb) start now: only
  /// forwards count.
  bool admissible(CompKind kind, int32_t part, int32_t mb) const {
    return kind != CompKind::Fwd || admissibleForward(part, mb);
  }
  bool admissibleForward(int32_t part, int32_t mb) const;
  bool admissibleFront(CompKind kind, int32_t part) {
    return admissible(kind, part, queue(part, kind).front());
  }
  LLVM_ATTRIBUTE_ALWAYS_INLINE int32_t fetch(int32_t actor, CompKind kind);
  int32_t step(int32_t actor);
  bool replayStep(int32_t actor, double now);
  LLVM_ATTRIBUTE_ALWAYS_INLINE void start(int32_t item, double now);
  void complete(int32_t item, double now);
  void enqueue(int32_t item);
  /// The check functions (register_new_checkfunc) on the item `kind` of
  /// `part` would fetch next: all must accept it.
  bool passesChecks(int32_t actor, CompKind kind, int32_t part) {
    return p.checks.empty() || vetoingCheck(actor, kind, part) < 0;
  }
  /// The index of (actor, registered instruction `r`) in the per-actor
  /// tables (regReady, regLeft).
  size_t regSlot(int32_t actor, int32_t r) const {
    return static_cast<size_t>(actor) * p.registered.size() + r;
  }
  /// Whether `actor` may start the next item of `kind` of `part` now: one is
  /// ready, the in-flight limits admit it and the checks accept it.
  bool takeable(int32_t actor, CompKind kind, int32_t part) {
    return !queue(part, kind).empty() && admissibleFront(kind, part) &&
           passesChecks(actor, kind, part);
  }
  /// The first check that refuses that item, or -1.
  int32_t vetoingCheck(int32_t actor, CompKind kind, int32_t part) {
    return vetoingCheck(
        actor, {kind, part, p.parts[part].stage, queue(part, kind).front()});
  }
  /// The first check that refuses `item` on `actor` now, or -1.
  int32_t vetoingCheck(int32_t actor, const ReadyItem &item);
  /// Why a ready item stays: check `check` refuses it (by name where the
  /// problem names its checks).
  std::string checkRefuses(int32_t check) const;
  /// " 'NAME'" of actor `actor`'s plugin priority where the problem names
  /// it, else nothing.
  std::string priorityName(int32_t actor) const {
    return static_cast<size_t>(actor) < p.customPriorityNames.size() &&
                   !p.customPriorityNames[actor].empty()
               ? " '" + p.customPriorityNames[actor] + "'"
               : "";
  }
  int32_t customStep(int32_t actor);
  StepView view(int32_t actor) const;
  int32_t pickRegistered(int32_t actor) const;
  void runRegistered(int32_t actor, int32_t r, double now);
  void instanceReady(int32_t node);
  void completeRegistered(int32_t event);
  void diagnoseStuck(ScheduleResult &result, double now);
  /// diagnoseStuck's explanations of why `actor` cannot go on, appended to
  /// `os`: it waits in or for a registered instruction (when it has no
  /// computations left or is blocked in one); a ready forward held back by
  /// an in-flight limit; a stage traversal interval holding it at a stage
  /// with nothing it may run while another stage's item could run (after
  /// the limit, where both hold it); its first unstarted item and what that
  /// waits for.
  void explainRegistered(int32_t actor, std::ostream &os) const;
  /// The first ready item at the front of its queue (dependencies met,
  /// in-flight limits admit it) when plugin checks veto every such item:
  /// said before the limits that the vetoes leave reached (they were blamed
  /// instead).
  bool explainVetoed(int32_t actor, std::ostream &os);
  bool explainInflight(int32_t actor, std::ostream &os);
  /// `more`: a reason was written already (this one is appended to it).
  bool explainInterval(int32_t actor, std::ostream &os, bool more);
  void explainFirstWaiting(int32_t actor, std::ostream &os);
  /// A cycle among the unfinished computations that an extra dependency
  /// closes (the stage graph and the spec's dependencies together): says
  /// which and returns its PipelineSpec index, or -1 when there is none.
  int32_t explainDependencyCycle(std::ostream &os) const;
  /// A registered instruction one of whose dependents comes before one of
  /// its sources in a micro-batch (through the stage graph): its first
  /// instance waits for itself. Writes the cycle and returns the spec
  /// dependency into the dependent (or -1: none).
  int32_t explainRegisteredCycle(std::ostream &os) const;
  /// After an in-flight explanation: the actor's first backward that waits
  /// for a registered instance (whose sources the limit may hold back).
  void explainHeldInstance(int32_t actor, std::ostream &os) const;
  /// Item (kind, part, mb) waits for an instance of a registered
  /// instruction that has not completed: says which.
  bool explainRegisteredWait(int32_t part, int32_t mb, CompKind kind,
                             std::ostream &os) const;
  std::string describeItem(CompKind kind, int32_t part, int32_t mb) const;
  /// The same for an item id.
  std::string describeItem(int32_t item) const;

  ReadyQueue queue(int32_t part, CompKind kind) {
    const int32_t k = static_cast<int32_t>(kind);
    return ReadyQueue(queueStore.data() + queueBase[part * kNumCompKinds + k],
                      queueSize[part * kNumCompKinds + k]);
  }
  int32_t &remainingIn(int32_t part, CompKind kind) {
    return remainingInPart[part * kNumCompKinds + static_cast<int32_t>(kind)];
  }

  const Problem &p;
  TimeModel model;
  int32_t numParts, numActors;
  /// With a replay (replaying()), each actor runs the given order (items of
  /// an earlier schedule of the same problem) instead of choosing: the same
  /// dependency graph, clocks and in-flight accounting time it under this
  /// engine's durations.
  const std::vector<std::vector<ScheduledItem>> *replay = nullptr;
  /// Without it (withModel(), replaying()), a schedule that cannot finish
  /// fails with the summary only (no per-actor waits), which saves a scan of
  /// the graph when the caller has a diagnosis from elsewhere.
  bool diagnose = true;
  // A replay's cutoff, and per actor the computation it has not started
  // (only kept with a finite cutoff).
  double cutoff = std::numeric_limits<double>::infinity();
  std::vector<double> workLeft;
  // replayCutAt: its cutoff; per item the latest end of its inputs (once
  // started: its own end) and per actor its clock and its work left, in
  // the replay.
  double replayCutoff = std::numeric_limits<double>::infinity();
  std::vector<double> replayEnd, replayFree, replayLeft;
  /// Whether either cutoff is finite (set by execute()).
  bool bounded = false;
  /// At the start of `item` (ending at `end`, `duration` long): whether it
  /// passes either cutoff.
  void checkCutoffs(int32_t item, double end, double duration);
  bool cut = false;
  std::vector<size_t> replayPos; // per actor: next entry of its replay order

  // Time and completions. An actor is touched when its state changes
  // (freed, an item or instance became ready, a global limit released):
  // only touched actors are asked at the next decision time, every other
  // free actor would find what it found before.
  EventCore core{0};
  bool hasPlugins() const { return plugins; }
  bool plugins = false;

  std::vector<int32_t> partBase;
  std::vector<int32_t> slotOrigin; // per part: partBase - mbBegin
  std::vector<int32_t> slotPart;   // the part owning each slot
  int32_t numSlots = 0;
  unsigned kindExists = 0; // bit k: every slot has an item of kind k
  bool hasKind(int32_t k) const { return kindExists >> k & 1; }
  bool exists(int32_t item) const { return hasKind(item % kNumCompKinds); }
  // Edges into the registered instances' readiness nodes and out of them.
  std::vector<std::pair<int32_t, int32_t>> regEdges;
  std::vector<int32_t> succStart, succList; // CSR successors
  std::vector<int32_t> pending;             // unfinished predecessors
  std::vector<uint8_t> finished, started;

  // Reorder queues: per (part, kind) its storage's offset in queueStore
  // (room for the part's micro-batches) and its size.
  std::vector<int32_t> queueStore, queueBase, queueSize; // see queue()
  std::vector<int32_t> remainingInPart;
  std::vector<int64_t> remainingOnActor; // per actor * kind
  /// The computations `actor` has not started.
  int64_t leftOn(int32_t actor) const {
    const int64_t *r = &remainingOnActor[actor * kNumCompKinds];
    return r[0] + r[1] + r[2] + r[3];
  }
  std::vector<int32_t> readyByKind; // per actor * kind: items in its queues
  int32_t &readyOf(int32_t actor, CompKind kind) {
    return readyByKind[actor * kNumCompKinds + static_cast<int>(kind)];
  }
  bool anyReady(int32_t actor) const {
    const int32_t *r = &readyByKind[actor * kNumCompKinds];
    return r[0] + r[1] + r[2] + r[3] > 0;
  }

  std::vector<std::vector<int32_t>> actorParts; // sorted by (depth, stage)
  std::vector<std::vector<int32_t>> partGroups; // global limits per source
  /// Per part: the module per-actor limits that count it, and per such
  /// limit the forwards in flight.
  std::vector<std::vector<int32_t>> partModuleLimits;
  std::vector<int64_t> moduleLimitInflight;
  std::vector<int64_t> actorInflight, partInflight, groupInflight;
  // Global limits count micro-batches: per (group, micro-batch), the sources
  // that started its forward, the sources that released it, and the sources
  // it flows through. A micro-batch is in flight in a group from its first
  // source forward until it is released on every source it flows through.
  std::vector<int32_t> groupStarted, groupReleased, groupSources;
  size_t groupSlot(int32_t g, int32_t mb) const {
    return static_cast<size_t>(g) * p.numMicrobatches + mb;
  }

  struct IntervalState {
    bool started = false;
    int32_t pos = 0;
    int64_t stepped = 0;
  };
  std::vector<IntervalState> intervals; // per actor * kind
  struct UnitState {
    CompKind kind = CompKind::Fwd;
    int64_t left = 0;
    bool preferFwd = true; // interleaved
    int64_t count = 0;     // interleaved
  };
  std::vector<UnitState> units;
  std::vector<double> freeAt;

  // Registered instructions. Their instances are numbered instBase[r] + i;
  // instance i's readiness is node numItems + instance in the dependency
  // graph (sources point at it, plus a chain from instance i - 1).
  struct RegState {
    int32_t lo = 0, hi = 0, instances = 0, base = 0;
    /// The micro-batches [first, second) of instance `i` (from 0) in blocks
    /// of `size`: prev for its sources, next for its dependents. (In 64
    /// bits: instances times next passes 2^31 at large counts.)
    std::pair<int32_t, int32_t> range(int64_t i, int64_t size) const {
      return {static_cast<int32_t>(std::min<int64_t>(hi, lo + i * size)),
              static_cast<int32_t>(std::min<int64_t>(hi, lo + (i + 1) * size))};
    }
  };
  std::vector<RegState> reg;
  /// The first micro-batch of registered instance `instance` of `r`.
  int32_t firstMbOf(int32_t r, int32_t instance) const {
    return reg[r].range(instance - reg[r].base, p.registered[r].prev).first;
  }
  int32_t numInstances = 0;
  std::vector<int32_t> instJoined;            // per instance: members in it
  std::vector<int32_t> instCompleted;         // per instance: completions
  std::vector<std::vector<int32_t>> regReady; // per actor * r: FIFO
  std::vector<size_t> regHead;                // per actor * r
  /// Per actor: the registered instructions with an instance ready, in
  /// registration order (a spec may register thousands; scanning them all at
  /// every step was quadratic).
  std::vector<std::set<int32_t>> regWithReady;
  std::vector<int32_t> regLeft;               // per actor * r: not yet run
  std::vector<int64_t> regUnitLeft;           // per actor * r
  std::vector<int32_t> blockedIn;             // per actor: instance or -1
  /// Completion events of registered instances: (instance, member actor or
  /// -1 for all members). Events in the queue are -1 - index.
  std::vector<std::pair<int32_t, int32_t>> regEvents;
  bool isMember(int32_t r, int32_t actor) const {
    return std::binary_search(p.registered[r].actors.begin(),
                              p.registered[r].actors.end(), actor);
  }
  int32_t regOf(int32_t instance) const {
    return static_cast<int32_t>(
        std::upper_bound(
            reg.begin(), reg.end(), instance,
            [](int32_t x, const RegState &st) { return x < st.base; }) -
        reg.begin() - 1);
  }

  // Hooks.
  std::string hookError;
  int32_t numItems = 0;

  int64_t total = 0, scheduled = 0;
  ScheduleResult result;
};

void Engine::build() {
  partBase.assign(numParts + 1, 0);
  slotOrigin.resize(numParts);
  for (int32_t i = 0; i < numParts; ++i) {
    const int32_t mbs = p.parts[i].mbEnd - p.parts[i].mbBegin;
    partBase[i + 1] = partBase[i] + mbs;
    slotOrigin[i] = partBase[i] - p.parts[i].mbBegin;
    slotPart.insert(slotPart.end(), mbs, i);
  }
  numSlots = partBase[numParts];
  numItems = numSlots * kNumCompKinds;
  // Every micro-batch of a part has a forward and the kind that carries its
  // gradient, and a weight gradient when the backward is split.
  kindExists = 1u << static_cast<int>(CompKind::Fwd) |
               1u << static_cast<int>(gradKind());
  if (p.splitBackward)
    kindExists |= 1u << static_cast<int>(CompKind::Wgrad);
  addRegisteredEdges();

  // Successor lists and predecessor counts, over the items and the
  // registered instances' readiness nodes.
  const int32_t numNodes = numItems + numInstances;
  flexpipe::buildCompressedRows(
      numNodes,
      [&](auto &&edge) {
        forEachItemEdge(edge);
        for (auto [from, to] : regEdges)
          edge(from, to);
      },
      succStart, succList);
  pending.assign(numNodes, 0);
  for (int32_t to : succList)
    ++pending[to];

  finished.assign(numItems, 0);
  started.assign(numItems, 0);
  queueStore.assign(numItems, 0);
  queueSize.assign(numParts * kNumCompKinds, 0);
  queueBase.resize(numParts * kNumCompKinds);
  remainingInPart.assign(numParts * kNumCompKinds, 0);
  remainingOnActor.assign(numActors * kNumCompKinds, 0);
  readyByKind.assign(numActors * kNumCompKinds, 0);
  for (int32_t part = 0; part < numParts; ++part)
    for (int32_t k = 0; k < kNumCompKinds; ++k) {
      const int32_t mbs = partBase[part + 1] - partBase[part];
      queueBase[part * kNumCompKinds + k] =
          partBase[part] * kNumCompKinds + k * mbs;
      if (hasKind(k)) {
        remainingInPart[part * kNumCompKinds + k] = mbs;
        remainingOnActor[p.parts[part].actor * kNumCompKinds + k] += mbs;
        total += mbs;
      }
    }

  actorParts.assign(numActors, {});
  for (int32_t part = 0; part < numParts; ++part)
    actorParts[p.parts[part].actor].push_back(part);
  // Ties keep part order (what a stable sort by (depth, stage) gives,
  // without its buffer).
  for (auto &parts : actorParts)
    std::sort(parts.begin(), parts.end(), [&](int32_t a, int32_t b) {
      const StagePart &x = p.parts[a], &y = p.parts[b];
      return std::tie(x.depth, x.stage, a) < std::tie(y.depth, y.stage, b);
    });

  partGroups.assign(numParts, {});
  for (size_t g = 0; g < p.globalLimits.size(); ++g)
    for (int32_t source : p.globalLimits[g].sources)
      partGroups[source].push_back(static_cast<int32_t>(g));
  partModuleLimits.assign(numParts, {});
  for (size_t l = 0; l < p.moduleActorLimits.size(); ++l)
    for (int32_t part : p.moduleActorLimits[l].parts)
      partModuleLimits[part].push_back(static_cast<int32_t>(l));
  moduleLimitInflight.assign(p.moduleActorLimits.size(), 0);
  actorInflight.assign(numActors, 0);
  partInflight.assign(numParts, 0);
  groupInflight.assign(p.globalLimits.size(), 0);
  const size_t groupSlots = p.globalLimits.size() * p.numMicrobatches;
  groupStarted.assign(groupSlots, 0);
  groupReleased.assign(groupSlots, 0);
  groupSources.assign(groupSlots, 0);
  for (size_t g = 0; g < p.globalLimits.size(); ++g)
    for (int32_t source : p.globalLimits[g].sources)
      for (int32_t mb = p.parts[source].mbBegin; mb < p.parts[source].mbEnd;
           ++mb)
        ++groupSources[groupSlot(static_cast<int32_t>(g), mb)];
  intervals.assign(numActors * kNumCompKinds, {});
  units.assign(numActors, {});
  freeAt.assign(numActors, 0);
  result.actors.assign(numActors, {});

  blockedIn.assign(numActors, -1);
  replayPos.assign(numActors, 0);
  core = EventCore(numActors); // every actor is asked at the start
  plugins = !p.checks.empty() || !p.customPriorities.empty();
  initRegistered();
}

template <typename Edge> void Engine::forEachItemEdge(Edge &&edge) const {
  const CompKind grad = gradKind();
  for (auto [from, to] : p.edges)
    for (int32_t mb = std::max(p.parts[from].mbBegin, p.parts[to].mbBegin);
         mb < std::min(p.parts[from].mbEnd, p.parts[to].mbEnd); ++mb) {
      edge(itemId(CompKind::Fwd, from, mb), itemId(CompKind::Fwd, to, mb));
      edge(itemId(grad, to, mb), itemId(grad, from, mb));
    }
  for (int32_t part = 0; part < numParts; ++part)
    for (int32_t mb = p.parts[part].mbBegin; mb < p.parts[part].mbEnd; ++mb) {
      edge(itemId(CompKind::Fwd, part, mb), itemId(grad, part, mb));
      if (p.splitBackward)
        edge(itemId(grad, part, mb), itemId(CompKind::Wgrad, part, mb));
    }
  for (const ExtraDependency &dep : p.extraDependencies) {
    const CompKind src = existing(dep.srcKind, /*asSource=*/true);
    const CompKind dst = existing(dep.dstKind, /*asSource=*/false);
    for (int32_t mb = p.parts[dep.srcPart].mbBegin;
         mb < p.parts[dep.srcPart].mbEnd; ++mb)
      if (flowsThrough(dep.dstPart, mb))
        edge(itemId(src, dep.srcPart, mb), itemId(dst, dep.dstPart, mb));
  }
}

int32_t Engine::unfinishedPredecessor(int32_t item) const {
  for (int32_t from = 0; from < numItems; ++from)
    if (!finished[from])
      for (int32_t i = succStart[from]; i < succStart[from + 1]; ++i)
        if (succList[i] == item)
          return from;
  return -1;
}

/// Registered instructions: their instances, numbered after the items as
/// readiness nodes, and the edges from their sources.
void Engine::addRegisteredEdges() {
  const int32_t numRegs = static_cast<int32_t>(p.registered.size());
  reg.assign(numRegs, {});
  numInstances = 0;
  for (int32_t r = 0; r < numRegs; ++r) {
    const Registered &ri = p.registered[r];
    RegState &st = reg[r];
    std::tie(st.lo, st.hi) = registeredRange(p, r);
    st.instances = static_cast<int32_t>(registeredInstances(p, r));
    st.base = numInstances;
    numInstances += st.instances;
    for (int32_t i = 0; i < st.instances; ++i) {
      const auto [from, to] = st.range(i, ri.prev);
      for (const PartKind &src : ri.after) {
        const CompKind kind = existing(src.kind, /*asSource=*/true);
        for (int32_t mb = std::max(from, p.parts[src.part].mbBegin);
             mb < std::min(to, p.parts[src.part].mbEnd); ++mb)
          addEdge(itemId(kind, src.part, mb), numItems + st.base + i);
      }
    }
  }
}

/// Registered instructions, once the graph is built: the chain between
/// consecutive instances, the extra pending counts of their dependents, and
/// the members' queues.
void Engine::initRegistered() {
  const int32_t numRegs = static_cast<int32_t>(p.registered.size());
  for (int32_t r = 0; r < numRegs; ++r) {
    const Registered &ri = p.registered[r];
    const RegState &st = reg[r];
    // Instance i is released when instance i - 1 is ready.
    for (int32_t i = 1; i < st.instances; ++i)
      ++pending[numItems + st.base + i];
    // Dependents wait for their instance: once for a collective or for the
    // member on their own actor, once per member otherwise.
    for (const PartKind &dst : ri.before) {
      const CompKind kind = existing(dst.kind, /*asSource=*/false);
      const int32_t waits =
          ri.mode == InstMode::Local && !isMember(r, p.parts[dst.part].actor)
              ? static_cast<int32_t>(ri.actors.size())
              : 1;
      for (int32_t mb = std::max(st.lo, p.parts[dst.part].mbBegin);
           mb < std::min(st.hi, p.parts[dst.part].mbEnd); ++mb)
        pending[itemId(kind, dst.part, mb)] += waits;
    }
    total += static_cast<int64_t>(st.instances) * ri.actors.size();
  }
  instJoined.assign(numInstances, 0);
  instCompleted.assign(numInstances, 0);
  regReady.assign(static_cast<size_t>(numActors) * numRegs, {});
  regHead.assign(regReady.size(), 0);
  regWithReady.assign(numActors, {});
  regLeft.assign(regReady.size(), 0);
  regUnitLeft.assign(regReady.size(), 0);
  for (int32_t r = 0; r < numRegs; ++r)
    for (int32_t actor : p.registered[r].actors)
      regLeft[regSlot(actor, r)] = reg[r].instances;
}

/// Instance `node - numItems` has every source done: queue it on its members
/// and let the next instance follow.
void Engine::instanceReady(int32_t node) {
  const int32_t r = regOf(node - numItems);
  const int32_t end = numItems + reg[r].base + reg[r].instances;
  for (;;) {
    for (int32_t actor : p.registered[r].actors) {
      regReady[regSlot(actor, r)].push_back(node - numItems);
      regWithReady[actor].insert(r);
      core.touch(actor);
    }
    if (++node >= end || --pending[node] != 0)
      return;
  }
}

/// The registered instruction `actor` runs next, or -1: the first (in
/// registration order) with an instance ready and, at the start of a
/// scheduling unit, `unit` of them (or all that are left).
int32_t Engine::pickRegistered(int32_t actor) const {
  for (int32_t r : regWithReady[actor]) {
    const size_t k = regSlot(actor, r);
    const size_t ready = regReady[k].size() - regHead[k];
    if (regUnitLeft[k] > 0 ||
        static_cast<int64_t>(ready) >=
            std::min<int64_t>(p.registered[r].unit, regLeft[k]))
      return r;
  }
  return -1;
}

void Engine::runRegistered(int32_t actor, int32_t r, double now) {
  const Registered &ri = p.registered[r];
  const size_t k = regSlot(actor, r);
  const int32_t instance = regReady[k][regHead[k]++];
  if (regHead[k] == regReady[k].size())
    regWithReady[actor].erase(r);
  regUnitLeft[k] = regUnitLeft[k] > 0
                       ? regUnitLeft[k] - 1
                       : std::min<int64_t>(ri.unit, regLeft[k]) - 1;
  --regLeft[k];
  const int32_t mb = firstMbOf(r, instance);
  const double duration = model == TimeModel::Step ? 1.0 : ri.duration;
  auto record = [&](int32_t member, double start, double end) {
    ScheduledItem &item = result.actors[member].emplace_back();
    item.kind = CompKind::Fwd;
    item.part = -1;
    item.mb = mb;
    item.start = start;
    item.end = end;
    item.inst = r;
    ++scheduled;
  };
  // Its completion (on `member`, or -1: on all members) ends `duration` on.
  auto post = [&](int32_t member) {
    regEvents.push_back({instance, member});
    core.compute(actor, -1 - static_cast<int32_t>(regEvents.size() - 1),
                 duration, now);
  };
  switch (ri.mode) {
  case InstMode::Local:
    record(actor, now, now + duration);
    freeAt[actor] = now + duration;
    post(actor);
    return;
  case InstMode::Async:
    record(actor, now, now);
    if (++instJoined[instance] == static_cast<int32_t>(ri.actors.size()))
      post(-1);
    return;
  case InstMode::Collective:
    blockedIn[actor] = instance;
    freeAt[actor] = std::numeric_limits<double>::infinity();
    if (++instJoined[instance] < static_cast<int32_t>(ri.actors.size()))
      return;
    for (int32_t member : ri.actors) {
      record(member, now, now + duration);
      freeAt[member] = now + duration;
      blockedIn[member] = -1;
    }
    post(-1);
    return;
  }
}

/// A registered instance finished (on one member of a Local instruction, or
/// on all): its dependents may run.
void Engine::completeRegistered(int32_t event) {
  const auto [instance, member] = regEvents[event];
  ++instCompleted[instance];
  const int32_t r = regOf(instance);
  for (int32_t actor : p.registered[r].actors)
    core.touch(actor); // members leave the instance
  const Registered &ri = p.registered[r];
  const auto [from, to] = reg[r].range(instance - reg[r].base, ri.next);
  for (const PartKind &dst : ri.before) {
    const StagePart &part = p.parts[dst.part];
    if (member >= 0 && part.actor != member && isMember(r, part.actor))
      continue; // waits for its own actor's instance
    const CompKind kind = existing(dst.kind, /*asSource=*/false);
    for (int32_t mb = std::max(from, part.mbBegin);
         mb < std::min(to, part.mbEnd); ++mb) {
      const int32_t item = itemId(kind, dst.part, mb);
      if (--pending[item] == 0)
        enqueue(item);
    }
  }
}

void Engine::enqueue(int32_t item) {
  const int32_t slot = item / kNumCompKinds;
  const CompKind kind = static_cast<CompKind>(item % kNumCompKinds);
  const int32_t part = slotPart[slot];
  core.touch(p.parts[part].actor);
  if (replay)
    return; // a replay reads readiness from `pending`, not the queues
  queue(part, kind).push(mbOf(part, slot));
  ++readyOf(p.parts[part].actor, kind);
}

bool Engine::admissibleForward(int32_t part, int32_t mb) const {
  const StagePart &sp = p.parts[part];
  if (partInflight[part] >= sp.inflightLimit)
    return false;
  if (!sp.countsInflight)
    return true;
  if (actorInflight[sp.actor] >= p.actorLimits[sp.actor])
    return false;
  for (int32_t l : partModuleLimits[part])
    if (moduleLimitInflight[l] >= p.moduleActorLimits[l].limit)
      return false;
  // A global limit counts micro-batches: one already in flight in the group
  // (entered through another source) takes no new place.
  for (int32_t g : partGroups[part])
    if (groupStarted[groupSlot(g, mb)] == 0 &&
        groupInflight[g] >= p.globalLimits[g].limit)
      return false;
  return true;
}

/// fetch_inst of Algorithm 1: the next item of `kind` on `actor` under its
/// stage traversal priority, or -1.
int32_t Engine::fetch(int32_t actor, CompKind kind) {
  const ActorPolicy &pol = p.policies[actor];
  const StagePriority &sp = kind == CompKind::Fwd ? pol.fwd : pol.bwd;
  const std::vector<int32_t> &parts = actorParts[actor];
  const int32_t n = static_cast<int32_t>(parts.size());
  const bool reverse = sp.order == StageOrder::DepthFirst;
  auto partAt = [&](int32_t i) { return parts[reverse ? n - 1 - i : i]; };
  auto take = [&](int32_t part) {
    const int32_t mb = queue(part, kind).pop();
    --readyOf(actor, kind);
    return itemId(kind, part, mb);
  };
  // The first position in the direction that `pred` admits and whose stage
  // has a takeable item, or -1.
  auto firstAt = [&](auto pred) -> int32_t {
    for (int32_t i = 0; i < n; ++i)
      if (pred(i) && takeable(actor, kind, partAt(i)))
        return i;
    return -1;
  };

  if (sp.interval == 0) {
    // Without an interval: the first schedulable item in the direction.
    const int32_t i = firstAt([](int32_t) { return true; });
    return i < 0 ? -1 : take(partAt(i));
  }

  // With an interval (Algorithm 1's fetch_inst1): take items of the current
  // stage `interval` times in a row, then move on in the direction
  // (cyclically, skipping stages with nothing left), waiting at the current
  // stage while its next item is not schedulable. The traversal begins at the
  // first stage in the direction that has a schedulable item.
  //
  // The slices of a vocabulary-parallel embedding or head are outside the
  // traversal, as they are outside the in-flight limits: a schedulable one
  // is taken first. Inside it, the head would wait for the traversal to come
  // round while the forward the traversal holds at waits for the backward
  // the head starts (interleaved 1F1B at every m > 1).
  auto inTraversal = [&](int32_t i) {
    return p.parts[partAt(i)].countsInflight;
  };
  if (const int32_t i = firstAt([&](int32_t i) { return !inTraversal(i); });
      i >= 0)
    return take(partAt(i));
  IntervalState &st = intervals[actor * kNumCompKinds + static_cast<int>(kind)];
  if (!st.started) {
    const int32_t i = firstAt(inTraversal);
    if (i < 0)
      return -1;
    st.started = true;
    st.pos = i;
    st.stepped = 1;
    return take(partAt(i));
  }
  if (st.stepped >= sp.interval || remainingIn(partAt(st.pos), kind) == 0) {
    for (int32_t step = 1; step <= n; ++step) {
      int32_t next = (st.pos + step) % n;
      if (inTraversal(next) && remainingIn(partAt(next), kind) > 0) {
        st.pos = next;
        break;
      }
    }
    st.stepped = 0;
  }
  if (!takeable(actor, kind, partAt(st.pos)))
    return -1;
  ++st.stepped;
  return take(partAt(st.pos));
}

StepView Engine::view(int32_t actor) const {
  StepView v;
  v.problem = &p;
  v.actor = actor;
  v.now = core.now();
  v.scheduled = static_cast<int64_t>(result.actors[actor].size());
  v.inflight = actorInflight[actor];
  if (!result.actors[actor].empty()) {
    const ScheduledItem &last = result.actors[actor].back();
    v.hasLast = true;
    v.last = {last.kind, last.part,
              last.isRegistered() ? p.registered[last.inst].stage
                                  : p.parts[last.part].stage,
              last.mb};
  }
  return v;
}

int32_t Engine::vetoingCheck(int32_t actor, const ReadyItem &item) {
  const StepView v = view(actor);
  for (size_t c = 0; c < p.checks.size(); ++c)
    if (!p.checks[c](v, item)) {
      if (std::string failure = takeHookFailure(); !failure.empty())
        hookError =
            describeItem(item.kind, item.part, item.mb) + ": " + failure;
      return static_cast<int32_t>(c);
    }
  return -1;
}

/// A plugin priority's step: every item the actor may run now, in reorder
/// queue order; the priority picks one (or none).
int32_t Engine::customStep(int32_t actor) {
  std::vector<ReadyItem> candidates;
  for (CompKind kind : scheduledKinds(p))
    for (int32_t part : actorParts[actor])
      if (takeable(actor, kind, part))
        candidates.push_back(
            {kind, part, p.parts[part].stage, queue(part, kind).front()});
  if (candidates.empty())
    return -1;
  const int choice = p.customPriorities[actor](view(actor), candidates);
  if (std::string failure = takeHookFailure(); !failure.empty()) {
    hookError = "actor " + std::to_string(actor) + ": " + failure;
    return -1;
  }
  if (choice == -1)
    return -1; // stays idle
  if (choice < 0 || choice >= static_cast<int>(candidates.size())) {
    std::ostringstream os;
    os << "the custom priority" << priorityName(actor) << " of actor " << actor
       << " picked candidate " << choice << " of " << candidates.size()
       << " (a candidate's index, or -1 to stay idle)";
    hookError = os.str();
    return -1;
  }
  const ReadyItem &c = candidates[choice];
  queue(c.part, c.kind).pop();
  --readyOf(actor, c.kind);
  return itemId(c.kind, c.part, c.mb);
}

/// Algorithm 1's StepFunction: the computation-type traversal priority
/// decides which reorder queue is read first.
int32_t Engine::step(int32_t actor) {
  const ActorPolicy &pol = p.policies[actor];
  UnitState &unit = units[actor];
  const CompKind grad = gradKind();

  // A scheduling unit in progress keeps its type while items are available.
  if (unit.left > 0) {
    if (int32_t item = fetch(actor, unit.kind); item >= 0) {
      --unit.left;
      return item;
    }
    unit.left = 0;
  }

  const bool fwdFirst = pol.cttp == Cttp::FwdFirst ||
                        (pol.cttp == Cttp::Interleaved && unit.preferFwd);
  // Weight gradients fill what is left.
  const CompKind order[] = {fwdFirst ? CompKind::Fwd : grad,
                            fwdFirst ? grad : CompKind::Fwd, CompKind::Wgrad};
  for (int i = 0; i < (p.splitBackward ? 3 : 2); ++i) {
    const CompKind kind = order[i];
    if (remainingOnActor[actor * kNumCompKinds + static_cast<int>(kind)] <= 0)
      continue;
    // Nothing of this kind ready: a fetch without an interval would find
    // nothing and change nothing (one with an interval may move on).
    if (readyOf(actor, kind) == 0 &&
        (kind == CompKind::Fwd ? pol.fwd : pol.bwd).interval == 0)
      continue;
    int32_t item = fetch(actor, kind);
    if (item < 0) {
      // Algorithm 1 as written: the first type whose reorder queue holds an
      // item decides, and a fetch that finds nothing schedulable there
      // (in-flight limit, interval, check function) is a bubble.
      if (p.stepRule == StepRule::Literal && readyOf(actor, kind) > 0) {
        unit.count = 0;
        return -1;
      }
      continue;
    }
    const int64_t size = kind == CompKind::Fwd ? pol.fwdUnit
                         : kind == grad        ? pol.bwdUnit
                                               : 1;
    if (pol.cttp != Cttp::Interleaved) {
      unit.kind = kind;
      unit.left = size - 1;
    } else if (kind != CompKind::Wgrad &&
               (kind == CompKind::Fwd) == unit.preferFwd) {
      if (++unit.count >= size) {
        unit.preferFwd = !unit.preferFwd;
        unit.count = 0;
      }
    } else {
      // A pick of another type ends the preferred type's unit, which starts
      // again; the preference stays (the count used to run on across it).
      unit.count = 0;
    }
    return item;
  }
  unit.count = 0;
  return -1;
}

/// Replay: the actor's next entry starts once it is ready. Returns whether
/// it started (the actor may go on at once after an asynchronous post). An
/// entry that is ready but over an in-flight limit under this timing is not
/// started, and the replay ends stuck.
bool Engine::replayStep(int32_t actor, double now) {
  const std::vector<ScheduledItem> &order = (*replay)[actor];
  size_t &pos = replayPos[actor];
  if (pos >= order.size())
    return false;
  const ScheduledItem &next = order[pos];
  if (next.isRegistered()) {
    const size_t k = regSlot(actor, next.inst);
    if (regHead[k] >= regReady[k].size())
      return false;
    ++pos;
    runRegistered(actor, next.inst, now);
    return true;
  }
  const int32_t item = itemId(next.kind, next.part, next.mb);
  if (pending[item] != 0 || started[item] ||
      !admissible(next.kind, next.part, next.mb))
    return false;
  // The plugin checks hold in the replayed order too, at its times (a
  // check that refused a backward at a time of the cost model let it run
  // in the step model's order replayed at that time).
  if (!p.checks.empty() &&
      vetoingCheck(actor, {next.kind, next.part, p.parts[next.part].stage,
                           next.mb}) >= 0) {
    if (!hookError.empty())
      core.stop();
    return false;
  }
  ++pos;
  start(item, now);
  return true;
}

void Engine::checkCutoffs(int32_t item, double end, double duration) {
  const CompKind kind = static_cast<CompKind>(item % kNumCompKinds);
  const StagePart &sp = p.parts[slotPart[item / kNumCompKinds]];
  if (!replayFree.empty()) {
    const double cost = sp.cost[static_cast<int>(kind)];
    double &at = replayEnd[item];
    at = std::max(at, replayFree[sp.actor]) + cost;
    replayFree[sp.actor] = at;
    replayLeft[sp.actor] -= cost;
    cut |= at + replayLeft[sp.actor] > replayCutoff * (1 + 1e-9);
  }
  if (!workLeft.empty()) {
    workLeft[sp.actor] -= duration;
    // Relative slack for the rounding of the running sum.
    cut |= end + workLeft[sp.actor] > cutoff * (1 + 1e-9);
  }
}

void Engine::start(int32_t item, double now) {
  const int32_t slot = item / kNumCompKinds;
  const CompKind kind = static_cast<CompKind>(item % kNumCompKinds);
  const int32_t part = slotPart[slot];
  const StagePart &sp = p.parts[part];
  const int32_t mb = mbOf(part, slot);
  const double duration =
      model == TimeModel::Step ? 1.0 : sp.cost[static_cast<int>(kind)];
  const double end = now + duration;
  if (LLVM_UNLIKELY(bounded))
    checkCutoffs(item, end, duration);
  // Field by field, for the same reason as EventHeap's (EventCore.h).
  ScheduledItem &scheduledItem = result.actors[sp.actor].emplace_back();
  scheduledItem.kind = kind;
  scheduledItem.part = part;
  scheduledItem.mb = mb;
  scheduledItem.start = now;
  scheduledItem.end = end;
  freeAt[sp.actor] = end;
  started[item] = 1;
  --remainingIn(part, kind);
  --remainingOnActor[sp.actor * kNumCompKinds + static_cast<int>(kind)];
  ++scheduled;
  if (kind == CompKind::Fwd) {
    ++partInflight[part];
    if (sp.countsInflight) {
      ++actorInflight[sp.actor];
      for (int32_t l : partModuleLimits[part])
        ++moduleLimitInflight[l];
      for (int32_t g : partGroups[part])
        if (groupStarted[groupSlot(g, mb)]++ == 0)
          ++groupInflight[g];
    }
  }
  core.compute(sp.actor, item, duration, now);
}

void Engine::complete(int32_t item, double) {
  finished[item] = 1;
  const CompKind kind = static_cast<CompKind>(item % kNumCompKinds);
  const int32_t slot = item / kNumCompKinds;
  const int32_t part = slotPart[slot];
  if (kind == releaseKind()) {
    --partInflight[part];
    if (p.parts[part].countsInflight) {
      --actorInflight[p.parts[part].actor];
      for (int32_t l : partModuleLimits[part])
        --moduleLimitInflight[l];
      const int32_t mb = mbOf(part, slot);
      for (int32_t g : partGroups[part])
        if (++groupReleased[groupSlot(g, mb)] ==
            groupSources[groupSlot(g, mb)]) {
          --groupInflight[g];
          core.touchAll(); // a place in a global limit opened
        }
    }
  }
  if (LLVM_UNLIKELY(bounded) && !replayEnd.empty())
    for (int32_t i = succStart[item]; i < succStart[item + 1]; ++i)
      if (const int32_t succ = succList[i]; succ < numItems)
        replayEnd[succ] = std::max(replayEnd[succ], replayEnd[item]);
  for (int32_t i = succStart[item]; i < succStart[item + 1]; ++i) {
    const int32_t succ = succList[i];
    if (--pending[succ] == 0) {
      if (succ >= numItems)
        instanceReady(succ);
      else
        enqueue(succ);
    }
  }
}

bool Engine::prepare() {
  if (llvm::Error error = validate(p)) {
    result.error = llvm::toString(std::move(error));
    return false;
  }
  build();
  for (int32_t slot = 0; slot < numSlots; ++slot)
    for (int32_t k = 0; k < kNumCompKinds; ++k)
      if (const int32_t item = slot * kNumCompKinds + k;
          hasKind(k) && pending[item] == 0)
        enqueue(item);
  // Registered instructions without sources are ready at once (each first
  // instance releases the next).
  for (size_t r = 0; r < reg.size(); ++r)
    if (reg[r].instances > 0 && pending[numItems + reg[r].base] == 0)
      instanceReady(numItems + reg[r].base);
  return true;
}

ScheduleResult Engine::execute() {
  // Here rather than in build(): a copy of a prepared engine does not keep
  // reserved capacity.
  for (int32_t a = 0; a < numActors; ++a)
    result.actors[a].reserve(leftOn(a));
  const bool replayBounded =
      replayCutoff < std::numeric_limits<double>::infinity();
  const bool cutBounded = cutoff < std::numeric_limits<double>::infinity();
  bounded = replayBounded || cutBounded;
  if (replayBounded) {
    replayEnd.assign(numItems, 0);
    replayFree.assign(numActors, 0);
    replayLeft.assign(numActors, 0);
  }
  if (cutBounded)
    workLeft.assign(numActors, 0);
  for (int32_t item = 0; bounded && item < numItems; ++item)
    if (exists(item) && !started[item]) {
      const StagePart &sp = p.parts[slotPart[item / kNumCompKinds]];
      const double cost = sp.cost[item % kNumCompKinds];
      if (replayBounded)
        replayLeft[sp.actor] += cost;
      if (cutBounded)
        workLeft[sp.actor] += model == TimeModel::Step ? 1.0 : cost;
    }
  if (scheduled < total)
    core.run([this](int32_t actor, bool) { return actorStep(actor); },
             [this](int32_t, int32_t id) { ended(id); });
  // The last computation may be the one that passes the cutoff.
  if (!hookError.empty() || cut || scheduled < total) {
    if (!hookError.empty()) {
      result.error = hookError;
      result.hookFailed = true;
    } else if (cut) {
      result.cut = true;
      result.error = "cannot end by the cutoff";
    } else if (diagnose) {
      diagnoseStuck(result, core.now());
    } else {
      result.error = "no actor can make progress";
    }
    result.actors.clear();
    return std::move(result);
  }
  for (const auto &items : result.actors)
    for (const ScheduledItem &item : items)
      result.makespan = std::max(result.makespan, item.end);
  result.ok = true;
  return std::move(result);
}

/// What `actor` does at the core's time: registered instances first (an
/// asynchronous post leaves it free to go on at once), then at most one
/// computation (it is asked again when something it waits for changes).
/// True when it may do more at this time.
bool Engine::actorStep(int32_t actor) {
  const double now = core.now();
  if (freeAt[actor] > now)
    return false;
  if (replay) {
    const bool startedOne = replayStep(actor, now);
    if (cut || scheduled == total)
      core.stop();
    return startedOne;
  }
  if (int32_t r = pickRegistered(actor); r >= 0) {
    runRegistered(actor, r, now);
    if (scheduled == total)
      core.stop();
    return true;
  }
  if (!anyReady(actor)) {
    // Nothing to fetch: step would find nothing either, and end a unit in
    // progress (its items are not available). Skipping it kept the unit
    // across the bubble.
    units[actor].left = 0;
    units[actor].count = 0;
    return false;
  }
  const int32_t item = p.customPriorities.empty() || !p.customPriorities[actor]
                           ? step(actor)
                           : customStep(actor);
  if (!hookError.empty()) {
    core.stop();
    return false;
  }
  if (item >= 0) {
    start(item, now);
    if (cut || scheduled == total)
      core.stop();
  }
  return false;
}

/// Computation `id` (or, negative, registered event -1 - id) ended at the
/// core's time.
void Engine::ended(int32_t id) {
  if (id < 0)
    completeRegistered(-1 - id);
  else
    complete(id, core.now());
  // Plugin hooks may decide differently at another time: with them every
  // actor is asked at every decision time.
  if (hasPlugins())
    core.touchAll();
}

void Engine::diagnoseStuck(ScheduleResult &res, double now) {
  std::ostringstream summary;
  summary << "no actor can make progress at "
          << (model == TimeModel::Step ? "step " : "time ") << now << " with "
          << scheduled << " of " << total
          << " computations scheduled; the priorities and in-flight limits "
             "admit no further step";
  if (hasPlugins())
    summary << " (plugin check functions or priorities may hold items back)";
  if (p.stepRule == StepRule::Literal)
    summary << " (with the literal step rule an actor whose preferred "
               "instruction type is held back stays idle; the default "
               "next-type rule would try the next type)";
  res.error = summary.str();
  // The explanations ask plugin checks, which view the actors' programs as
  // scheduled so far (vetoingCheck): execute() drops them afterwards.
  std::ostringstream cycle;
  if ((res.cycleDependency = explainDependencyCycle(cycle)) >= 0 ||
      (res.cycleDependency = explainRegisteredCycle(cycle)) >= 0) {
    res.error = cycle.str();
    return;
  }
  const int32_t numRegs = static_cast<int32_t>(p.registered.size());
  for (int32_t actor = 0; actor < numActors; ++actor) {
    const int64_t left = leftOn(actor);
    int64_t regs = 0;
    for (int32_t r = 0; r < numRegs; ++r)
      regs += regLeft[regSlot(actor, r)];
    if (left == 0 && regs == 0)
      continue;
    std::ostringstream os;
    os << "actor " << actor << " has " << left << " computations";
    if (regs > 0)
      os << " and " << regs << " registered instructions";
    os << " left: ";
    if (left == 0 || blockedIn[actor] >= 0)
      explainRegistered(actor, os);
    else if (explainVetoed(actor, os))
      ;
    else if (const bool limited = explainInflight(actor, os);
             !explainInterval(actor, os, limited) && !limited)
      explainFirstWaiting(actor, os);
    else if (limited)
      explainHeldInstance(actor, os);
    res.waits.push_back(os.str());
  }
}

std::string Engine::describeItem(int32_t item) const {
  const int32_t slot = item / kNumCompKinds, part = slotPart[slot];
  return describeItem(static_cast<CompKind>(item % kNumCompKinds), part,
                      mbOf(part, slot));
}

std::string Engine::describeItem(CompKind kind, int32_t part,
                                 int32_t mb) const {
  std::ostringstream os;
  os << compKindName(kind) << " stage " << p.parts[part].stage << " mb " << mb
     << " (actor " << p.parts[part].actor << ")";
  return os.str();
}

void Engine::explainRegistered(int32_t actor, std::ostream &os) const {
  const int32_t numRegs = static_cast<int32_t>(p.registered.size());
  if (blockedIn[actor] >= 0) {
    const int32_t r = regOf(blockedIn[actor]);
    os << "it waits in @" << p.registered[r].name << " (micro-batch "
       << firstMbOf(r, blockedIn[actor]) << ") for members that do not arrive";
    return;
  }
  for (int32_t r = 0; r < numRegs; ++r) {
    const size_t k = regSlot(actor, r);
    if (regLeft[k] == 0)
      continue;
    const int32_t next = reg[r].base + reg[r].instances - regLeft[k];
    os << "@" << p.registered[r].name << " (micro-batch " << firstMbOf(r, next)
       << ") "
       << (regHead[k] < regReady[k].size()
               ? "is ready but its scheduling unit waits for more instances"
               : "waits for sources that never complete");
    return;
  }
}

std::string Engine::checkRefuses(int32_t check) const {
  if (check < 0 || static_cast<size_t>(check) >= p.checkNames.size())
    return "a plugin check function refuses it";
  return "the plugin check function '" + p.checkNames[check] + "' refuses it";
}

bool Engine::explainVetoed(int32_t actor, std::ostream &os) {
  if (p.checks.empty())
    return false;
  // Only when the checks veto every such item: with one they pass, the
  // actor idles for another reason (its priority, an interval).
  // The first such item, and the check that refuses it.
  std::optional<std::tuple<CompKind, int32_t, int32_t>> vetoed;
  for (CompKind kind : scheduledKinds(p))
    for (int32_t part : actorParts[actor])
      if (!queue(part, kind).empty() && admissibleFront(kind, part)) {
        const int32_t check = vetoingCheck(actor, kind, part);
        if (check < 0)
          return false;
        if (!vetoed)
          vetoed = {kind, part, check};
      }
  if (!vetoed)
    return false;
  const auto [kind, part, check] = *vetoed;
  os << describeItem(kind, part, queue(part, kind).front()) << " is ready, but "
     << checkRefuses(check);
  return true;
}

bool Engine::explainInflight(int32_t actor, std::ostream &os) {
  std::vector<int32_t> held;
  for (int32_t part : actorParts[actor])
    if (!queue(part, CompKind::Fwd).empty() &&
        !admissibleFront(CompKind::Fwd, part))
      held.push_back(part);
  if (held.empty())
    return false;
  for (size_t i = 0; i < held.size(); ++i)
    os << (i == 0                 ? ""
           : i + 1 == held.size() ? " and "
                                  : ", ")
       << describeItem(CompKind::Fwd, held[i],
                       queue(held[i], CompKind::Fwd).front());
  os << (held.size() == 1 ? " is" : " are") << " ready but ";
  const StagePart &sp = p.parts[held.front()];
  const auto moduleLimit =
      llvm::find_if(partModuleLimits[held.front()], [&](int32_t l) {
        return moduleLimitInflight[l] >= p.moduleActorLimits[l].limit;
      });
  if (actorInflight[actor] >= p.actorLimits[actor])
    os << "the actor's in-flight limit " << p.actorLimits[actor]
       << " is reached";
  else if (moduleLimit != partModuleLimits[held.front()].end())
    os << "the actor's in-flight limit "
       << p.moduleActorLimits[*moduleLimit].limit
       << " for its module's stages is reached";
  else if (partInflight[held.front()] >= sp.inflightLimit)
    os << "stage " << sp.stage << "'s in-flight limit " << sp.inflightLimit
       << " is reached";
  else
    os << "a global in-flight limit is reached";
  return true;
}

bool Engine::explainInterval(int32_t actor, std::ostream &os, bool more) {
  for (CompKind kind : scheduledKinds(p)) {
    const ActorPolicy &pol = p.policies[actor];
    const StagePriority &sp = kind == CompKind::Fwd ? pol.fwd : pol.bwd;
    const IntervalState &st =
        intervals[actor * kNumCompKinds + static_cast<int>(kind)];
    if (sp.interval == 0 || !st.started)
      continue;
    const std::vector<int32_t> &parts = actorParts[actor];
    const int32_t n = static_cast<int32_t>(parts.size());
    const int32_t held =
        parts[sp.order == StageOrder::DepthFirst ? n - 1 - st.pos : st.pos];
    // The traversal holds the actor at a stage with nothing to run, or
    // with a next item an in-flight limit holds back.
    if (!queue(held, kind).empty() && admissibleFront(kind, held))
      continue;
    for (int32_t other : parts) {
      if (other == held || queue(other, kind).empty() ||
          !admissibleFront(kind, other))
        continue;
      os << (more ? "; and " : "") << "its "
         << (kind == CompKind::Fwd ? "forward" : "backward")
         << " traversal (interval " << sp.interval << ") waits at stage "
         << p.parts[held].stage << " while "
         << describeItem(kind, other, queue(other, kind).front())
         << " is ready";
      return true;
    }
  }
  return false;
}

bool Engine::explainRegisteredWait(int32_t part, int32_t mb, CompKind kind,
                                   std::ostream &os) const {
  for (int32_t r = 0; r < static_cast<int32_t>(p.registered.size()); ++r)
    for (const PartKind &dst : p.registered[r].before) {
      if (dst.part != part || existing(dst.kind, /*asSource=*/false) != kind ||
          mb < reg[r].lo || mb >= reg[r].hi)
        continue;
      const int32_t instance =
          (mb - reg[r].lo) / static_cast<int32_t>(p.registered[r].next);
      const int32_t needed =
          p.registered[r].mode == InstMode::Local
              ? static_cast<int32_t>(p.registered[r].actors.size())
              : 1;
      if (instCompleted[reg[r].base + instance] >= needed)
        continue;
      os << describeItem(kind, part, mb) << " waits for @"
         << p.registered[r].name << " (micro-batch "
         << firstMbOf(r, reg[r].base + instance) << ")";
      return true;
    }
  return false;
}

int32_t Engine::explainDependencyCycle(std::ostream &os) const {
  if (p.extraDependencies.empty())
    return -1;
  // The unfinished items' edges: what no topological order reaches lies on
  // a cycle or after one.
  std::vector<std::pair<int32_t, int32_t>> edges;
  forEachItemEdge([&](int32_t from, int32_t to) {
    if (!finished[from] && !finished[to])
      edges.push_back({from, to});
  });
  const flexpipe::StageGraph<int32_t> graph(numItems, edges);
  std::vector<uint8_t> left(numItems, 1);
  for (int32_t item : graph.topologicalOrder())
    left[item] = 0;
  // From an item left, predecessors left lead back into a cycle.
  int32_t at = static_cast<int32_t>(llvm::find(left, 1) - left.begin());
  if (at == numItems)
    return -1;
  std::vector<int32_t> seenAt(numItems, -1), path;
  while (seenAt[at] < 0) {
    seenAt[at] = static_cast<int32_t>(path.size());
    path.push_back(at);
    at = *llvm::find_if(graph.preds[at],
                        [&](int32_t from) { return left[from] != 0; });
  }
  // path[seenAt[at]..] walks the cycle backwards; forwards, with the
  // dependency that closes it.
  std::vector<int32_t> loop(path.begin() + seenAt[at], path.end());
  std::reverse(loop.begin(), loop.end());
  for (size_t i = 0; i < loop.size(); ++i) {
    const int32_t from = loop[i], to = loop[(i + 1) % loop.size()];
    const int32_t fromPart = slotPart[from / kNumCompKinds];
    const int32_t toPart = slotPart[to / kNumCompKinds];
    for (const ExtraDependency &dep : p.extraDependencies) {
      if (dep.srcPart != fromPart || dep.dstPart != toPart ||
          existing(dep.srcKind, true) !=
              static_cast<CompKind>(from % kNumCompKinds) ||
          existing(dep.dstKind, false) !=
              static_cast<CompKind>(to % kNumCompKinds))
        continue;
      os << "the dependency closes a cycle with the stage graph, so none of "
            "its computations can ever run: ";
      for (size_t k = 0; k <= loop.size(); ++k)
        os << (k ? " -> " : "")
           << describeItem(loop[(i + 1 + k) % loop.size()]);
      return dep.source;
    }
  }
  return -1;
}

void Engine::explainHeldInstance(int32_t actor, std::ostream &os) const {
  for (int32_t part : actorParts[actor])
    for (int32_t mb = p.parts[part].mbBegin; mb < p.parts[part].mbEnd; ++mb)
      for (CompKind kind : {gradKind(), CompKind::Wgrad}) {
        const int32_t item = itemId(kind, part, mb);
        if (!exists(item) || started[item])
          continue;
        std::ostringstream wait;
        if (explainRegisteredWait(part, mb, kind, wait)) {
          os << "; " << wait.str()
             << ", whose sources may be what the limit holds back";
          return;
        }
      }
}

int32_t Engine::explainRegisteredCycle(std::ostream &os) const {
  if (p.registered.empty())
    return -1;
  std::vector<std::vector<int32_t>> succs(numItems);
  forEachItemEdge([&](int32_t from, int32_t to) { succs[from].push_back(to); });
  std::vector<int32_t> parent(numItems);
  for (size_t r = 0; r < p.registered.size(); ++r) {
    const Registered &ri = p.registered[r];
    const int32_t lo = reg[r].lo; // instance 0 covers it on both sides
    for (const PartKind &dst : ri.before) {
      if (!flowsThrough(dst.part, lo))
        continue;
      // Everything that waits for the dependent's item of micro-batch lo.
      const int32_t start = itemId(existing(dst.kind, false), dst.part, lo);
      std::fill(parent.begin(), parent.end(), -2);
      parent[start] = -1;
      std::vector<int32_t> todo = {start};
      while (!todo.empty()) {
        const int32_t item = todo.back();
        todo.pop_back();
        for (int32_t next : succs[item])
          if (parent[next] == -2) {
            parent[next] = item;
            todo.push_back(next);
          }
      }
      for (const PartKind &src : ri.after) {
        if (!flowsThrough(src.part, lo))
          continue;
        const int32_t end = itemId(existing(src.kind, true), src.part, lo);
        if (parent[end] == -2)
          continue;
        std::vector<int32_t> path;
        for (int32_t item = end; item >= 0; item = parent[item])
          path.push_back(item);
        os << "the dependency closes a cycle with the stage graph through @"
           << ri.name << ", so none of its computations can ever run: @"
           << ri.name;
        for (auto it = path.rbegin(); it != path.rend(); ++it)
          os << " -> " << describeItem(*it);
        os << " -> @" << ri.name;
        auto half = [](CompKind kind) {
          return kind == CompKind::Igrad || kind == CompKind::Wgrad;
        };
        if (!p.splitBackward && (half(dst.kind) || half(src.kind)))
          os << " (the scheduler orders whole backwards, which "
                "flexpipe.optimize may split after scheduling: igrad and "
                "wgrad of a stage are one item here)";
        return dst.source >= 0 ? dst.source : src.source;
      }
    }
  }
  return -1;
}

void Engine::explainFirstWaiting(int32_t actor, std::ostream &os) {
  // A ready item the actor does not run says why it is stuck; only when
  // none is ready, the first waiting one says what it waits for (a check
  // that refused a ready item was reported as the waits it caused).
  auto firstUnstarted = [&](bool ready, auto &&explain) {
    for (int32_t part : actorParts[actor])
      for (int32_t mb = p.parts[part].mbBegin; mb < p.parts[part].mbEnd; ++mb)
        for (int k = 0; k < kNumCompKinds; ++k) {
          const int32_t item = itemId(static_cast<CompKind>(k), part, mb);
          if (exists(item) && !started[item] && (pending[item] == 0) == ready &&
              explain(static_cast<CompKind>(k), part, mb, item))
            return true;
        }
    return false;
  };
  if (firstUnstarted(
          true, [&](CompKind kind, int32_t part, int32_t mb, int32_t) {
            const int32_t check =
                p.checks.empty() ? -1 : vetoingCheck(actor, kind, part);
            os << describeItem(kind, part, mb) << " is ready, but "
               << (check >= 0 ? checkRefuses(check)
                   : !p.customPriorities.empty() && p.customPriorities[actor]
                       ? "the actor's plugin priority" + priorityName(actor) +
                             " chooses to stay idle"
                       : "its stage traversal interval holds the actor on "
                         "another stage");
            return true;
          }))
    return;
  firstUnstarted(
      false, [&](CompKind kind, int32_t part, int32_t mb, int32_t item) {
        if (explainRegisteredWait(part, mb, kind, os))
          return true;
        // An unfinished predecessor, from the edges into `item`.
        const int32_t from = unfinishedPredecessor(item);
        if (from < 0)
          return false;
        os << describeItem(kind, part, mb) << " waits for "
           << describeItem(from) << ", which "
           << (started[from] ? "has not finished" : "is not scheduled");
        return true;
      });
}

} // namespace

/// Whether every computation and registered instance takes the same time:
/// then the cost time model is the step model scaled, decision for decision.
static bool uniformDurations(const Problem &p) {
  const double d = p.parts.empty() ? 1.0 : p.parts.front().cost[0];
  for (const StagePart &part : p.parts)
    for (CompKind kind : scheduledKinds(p))
      if (part.cost[static_cast<int>(kind)] != d)
        return false;
  for (const Registered &r : p.registered)
    if (r.duration != d)
      return false;
  return true;
}

/// The sum of every computation's end: lower when work finishes earlier.
static double flowTime(const ScheduleResult &result) {
  double sum = 0;
  for (const auto &items : result.actors)
    for (const ScheduledItem &item : items)
      sum += item.end;
  return sum;
}

bool flexpipe::sched::sameOrder(const ScheduleResult &a,
                                const ScheduleResult &b) {
  // (What runs, not when: the items' times may differ.)
  auto same = [](const ScheduledItem &x, const ScheduledItem &y) {
    return std::tie(x.kind, x.part, x.mb, x.inst) ==
           std::tie(y.kind, y.part, y.mb, y.inst);
  };
  return llvm::equal(a.actors, b.actors, [&](const auto &x, const auto &y) {
    return llvm::equal(x, y, same);
  });
}

ScheduleResult flexpipe::sched::schedule(const Problem &problem,
                                         TimeModel model,
                                         const ScheduleJudge &judge,
                                         double cutoff) {
  if (model == TimeModel::Step)
    return Engine(problem, TimeModel::Step).run();
  // The cost time model: actors choose when they become free, with the
  // parts' durations. Choosing greedily can lose to the cost-blind step
  // order when stages are uneven (a fast downstream actor returns backwards
  // faster than an upstream one can alternate, so it runs bursts of them and
  // starves the pipeline of forwards). The step model's order is therefore
  // timed on the same engine under the same durations and kept when it
  // finishes strictly earlier (or as early with less total flow time): never
  // slower than the step model.
  Engine prepared(problem, TimeModel::Cost);
  if (!prepared.prepare())
    return Engine(problem, TimeModel::Cost).run(); // reports the error
  if (uniformDurations(problem))
    return prepared.cutAt(cutoff).execute();
  // The graph is built once; each run starts from a copy (the last from
  // the prepared engine itself).
  ScheduleResult greedy = Engine(prepared).cutAt(cutoff).execute();
  // A plugin hook that failed is reported as it failed (the step model's
  // order, whose hooks saw other times, stood in for it without a word).
  if (greedy.hookFailed)
    return greedy;
  // The step model's order is only replayed, with this cutoff (a replay
  // that cannot end by the greedy order's makespan would not be kept,
  // unless a judge decides): where the greedy run finished or was cut, the
  // step run gives up as soon as that replay would, and the greedy result
  // stands. (Where the greedy run is stuck, whether the step run is stuck
  // too decides what is reported, so it runs to the end.) Only the greedy
  // run's diagnosis is ever reported.
  const double replayCutoff =
      greedy.ok && !judge ? std::min(cutoff, greedy.makespan * (1 + 1e-12))
                          : cutoff;
  ScheduleResult stepOrder =
      prepared.withModel(TimeModel::Step)
          .replayCutAt(greedy.ok || greedy.cut
                           ? replayCutoff
                           : std::numeric_limits<double>::infinity())
          .execute();
  if (!stepOrder.ok)
    return greedy;
  if (greedy.ok && sameOrder(greedy, stepOrder))
    return greedy; // the same order takes the same time
  ScheduleResult replayed =
      std::move(prepared).replaying(stepOrder.actors, replayCutoff).execute();
  if (!replayed.ok) // cut: the problem can be scheduled, just not in time
    return replayed.cut && !greedy.ok ? replayed : greedy;
  // A fuller model (ranks sharing cores, messages) may order the two
  // differently than the scheduler's durations do.
  if (judge && greedy.ok) {
    const std::optional<double> g = judge(greedy), s = judge(replayed);
    if (g && s && *s < *g * (1 - 1e-9))
      return replayed;
    if (g && s && *g < *s * (1 - 1e-9))
      return greedy;
  }
  if (!greedy.ok || replayed.makespan < greedy.makespan * (1 - 1e-12))
    return replayed;
  // On equal makespans, the order whose computations end earlier in total:
  // it leaves later bubbles that a bubble optimization can still fill (ZB-V
  // separated from the greedy order of an equal makespan ends half a unit
  // later than from the step order at pp >= 6).
  if (replayed.makespan <= greedy.makespan * (1 + 1e-12) &&
      flowTime(replayed) < flowTime(greedy) * (1 - 1e-12))
    return replayed;
  return greedy;
}

namespace {
thread_local std::string hookFailureMessage;
} // namespace

void flexpipe::sched::setHookFailure(std::string message) {
  if (hookFailureMessage.empty())
    hookFailureMessage = std::move(message);
}

std::string flexpipe::sched::takeHookFailure() {
  return std::exchange(hookFailureMessage, std::string());
}
