//===- Lowering.cpp - From a spec's problem to the program that runs ------===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Lowering.h"

#include <deque>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>

using namespace flexpipe::sched;

Program flexpipe::sched::programOf(const BuiltProblem &built,
                                   const ScheduleResult &schedule) {
  Program program = toProgram(built.problem, schedule, built.numStages,
                              built.stageEdges, built.sharedStages);
  // What each stage holds, for the cost model and the runtime: modules,
  // then registered stages (named by themselves).
  program.stageMeta = built.stageMeta;
  program.moduleNames = built.moduleNames;
  return program;
}

llvm::Error flexpipe::sched::finishProgram(Program &program,
                                           const SimCosts &costs,
                                           const BubbleOptimizations &opts,
                                           SeparationResult *figures) {
  if (opts.splitBackward || opts.separation)
    splitBackward(program);
  if (opts.separation) {
    llvm::Expected<SeparationResult> separated =
        separateGradients(program, costs, *opts.separation);
    if (!separated)
      return llvm::make_error<StatementError>(
          StatementError::Site::Optimize, 0,
          "gradient separation failed: " +
              llvm::toString(separated.takeError()));
    program = std::move(separated->program);
    if (figures)
      *figures = std::move(*separated);
  }
  insertCommunication(program);
  if (opts.asyncLookahead > 0)
    postReceivesEarly(program, opts.asyncLookahead);
  return llvm::Error::success();
}

namespace {

/// The ops of a program's computations by (actor, kind, stage), each a
/// list by micro-batch, made as the dependencies ask for them (one pass
/// over the actor's program each).
class ComputationIndex {
public:
  ComputationIndex(const Program &program, const ProgramGraph &graph)
      : program(program), graph(graph) {}

  /// The op of `actor` that computes `kind` of (`stage`, `mb`), or -1:
  /// where the backward was split, a whole backward ends with its weight
  /// gradient and begins with its input gradient; where it was not, either
  /// half is it.
  int32_t find(int32_t actor, CompKind kind, int32_t stage, int32_t mb,
               bool asSource) {
    if (int32_t id = op(actor, toOpKind(kind), stage, mb);
        id >= 0 || kind == CompKind::Fwd)
      return id;
    // Else the backward in its other form: a half's whole, or the whole's
    // half at this end.
    return op(actor,
              kind != CompKind::Bwd ? OpKind::Bwd
              : asSource            ? OpKind::Wgrad
                                    : OpKind::Igrad,
              stage, mb);
  }

private:
  int32_t op(int32_t actor, OpKind kind, int32_t stage, int32_t mb) {
    auto [it, fresh] = byMb.try_emplace({actor, kind, stage});
    std::vector<int32_t> &ids = it->second;
    if (fresh) {
      ids.assign(program.numMicrobatches, -1);
      const std::vector<ProgOp> &ops = program.actors[actor];
      for (size_t i = 0; i < ops.size(); ++i)
        if (ops[i].kind == kind && ops[i].stage == stage && ops[i].mb >= 0 &&
            ops[i].mb < program.numMicrobatches)
          ids[ops[i].mb] = graph.actorBegin[actor] + static_cast<int32_t>(i);
    }
    return mb >= 0 && mb < static_cast<int32_t>(ids.size()) ? ids[mb] : -1;
  }

  const Program &program;
  const ProgramGraph &graph;
  std::map<std::tuple<int32_t, OpKind, int32_t>, std::vector<int32_t>> byMb;
};

/// A program as it runs, for the checks of what it keeps: `program`, or
/// where it has no transfers yet, a copy with those insertCommunication
/// adds; its graph, its computations and what happens before what. Not
/// ok() where the graph cannot be built (the verifier says why). It stays
/// where it is made (the index and the order refer to it).
class RunView {
public:
  explicit RunView(const Program &program) : run(&program) {
    auto isTransferOp = [](const ProgOp &op) { return isTransfer(op.kind); };
    if (llvm::none_of(program.actors, [&](const std::vector<ProgOp> &ops) {
          return llvm::any_of(ops, isTransferOp);
        })) {
      withComm = program;
      insertCommunication(withComm);
      run = &withComm;
    }
    if (buildGraph(*run, ChannelRule::PerStage, graph)) {
      run = nullptr;
      return;
    }
    index.emplace(*run, graph);
    order.emplace(*run, graph);
  }
  RunView(const RunView &) = delete;
  RunView &operator=(const RunView &) = delete;

  bool ok() const { return run != nullptr; }

  /// Per op, the last op of `actor` that happens before it or is it; made
  /// on demand and kept (the limit sweep asks several actors at once).
  const std::vector<int32_t> &lastOf(int32_t actor) {
    auto [it, fresh] = tables.try_emplace(actor);
    if (fresh)
      order->lastOf(actor, it->second);
    return it->second;
  }

  const Program *run = nullptr;
  ProgramGraph graph;
  std::optional<ComputationIndex> index;
  std::optional<HappensBefore> order;

private:
  Program withComm;
  std::map<int32_t, std::vector<int32_t>> tables;
};

/// Asks whether op `from` of `actor` happens before op `to`.
using Ask = llvm::function_ref<bool(int32_t actor, int32_t from, int32_t to)>;

/// Runs `walk`, which asks its questions through the Ask it is given and
/// stops at the first "no", with every question answered one source actor
/// at a time: a first walk records them, each actor's table answers its
/// own and is dropped, and a second walk gets the answers in order. One
/// table is alive at a time, not one per actor (4096 dependencies between
/// 2048 actors took 1.7 GB that way).
template <typename Walk>
std::optional<BrokenDependency> answerByActor(const HappensBefore &order,
                                              Walk walk) {
  struct Question {
    int32_t actor, from, to;
  };
  std::vector<Question> asked;
  walk([&](int32_t actor, int32_t from, int32_t to) {
    asked.push_back({actor, from, to});
    return true;
  });
  std::vector<uint32_t> byActor(asked.size());
  std::iota(byActor.begin(), byActor.end(), 0u);
  llvm::stable_sort(byActor, [&](uint32_t x, uint32_t y) {
    return asked[x].actor < asked[y].actor;
  });
  std::vector<uint8_t> holds(asked.size());
  std::vector<int32_t> last;
  for (size_t k = 0; k < byActor.size(); ++k) {
    const Question &q = asked[byActor[k]];
    if (k == 0 || q.actor != asked[byActor[k - 1]].actor)
      order.lastOf(q.actor, last);
    holds[byActor[k]] = last[q.to] >= q.from;
  }
  size_t next = 0;
  return walk([&](int32_t, int32_t, int32_t) { return holds[next++] != 0; });
}

/// Why a dependency between two things of one actor is not kept.
constexpr const char *kOtherWayRound =
    ": the actor runs them the other way round (the split backward's weight "
    "gradients are placed after scheduling, which sees no extra "
    "dependency); start the dependency at igrad, or leave the backward "
    "whole";

/// Whether an end of a registered instruction is one of the spec's
/// dependencies (not a vocabulary-parallel head's loss statistics, which
/// the verifier checks as data).
bool isSpecDependency(const PartKind &end) { return end.source >= 0; }

/// Why an end of a dependency on registered instruction `inst` is not kept
/// at `mb` (the check is against `member`'s instance; for an end outside a
/// collective, against every member's).
std::string registeredEndBroken(const Problem &problem, const Registered &inst,
                                const PartKind &end, int32_t mb, bool fromExec,
                                int32_t member) {
  const bool collective = inst.runtime != InstRuntime::Exec;
  const StagePart &part = problem.parts[end.part];
  const bool outside = collective && part.actor != member;
  std::ostringstream os, on;
  if (outside) {
    on << "no instance of @" << inst.name << " (on actors [";
    for (size_t i = 0; i < inst.actors.size(); ++i)
      on << (i ? ", " : "") << inst.actors[i];
    on << "])";
  }
  const std::string computation = std::string(compKindName(end.kind)) +
                                  " of stage " + std::to_string(part.stage) +
                                  " (actor " + std::to_string(part.actor) + ")";
  os << "is not kept when the schedule runs: at micro-batch " << mb << ", ";
  if (outside)
    os << (fromExec ? on.str() + " happens before " + computation
                    : computation + " happens before " + on.str());
  else if (fromExec)
    os << "@" << inst.name << " on actor " << member
       << " does not happen before " << computation;
  else
    os << computation << " does not happen before @" << inst.name
       << " on actor " << member;
  if (part.actor == member)
    os << kOtherWayRound;
  else if (outside)
    os << ": actor " << part.actor
       << " does not join the collective, and no message orders them; "
          "add actor "
       << part.actor
       << " to the registered stage's actors, or make this end a "
          "computation of a member, or one whose data reaches a member "
          "first";
  else
    os << ": a runtime operation (kind(compute)) orders nothing "
          "between actors, and no message orders these two; attach the "
          "instruction to a stage of actor "
       << part.actor
       << ", connect the stages with data (`inputs`), or make it a "
          "collective (kind(all_gather)), which every member joins";
  return os.str();
}

/// The first dependency between a computation and a registered instruction
/// that the run does not keep. An exec (a runtime operation) orders nothing
/// between actors: its instance on one actor and a computation on another
/// are ordered only through messages and collectives. A collective's end
/// on a member must be ordered against that member's own instance (its
/// wait, when asynchronous) by the member's program, which passes that move
/// computations after scheduling (the split backward's weight gradients) do
/// not see; an end on an actor outside the collective, with some member's
/// instance through messages (the data of an earlier stage reaching a
/// member), or nothing keeps it.
std::optional<BrokenDependency>
brokenRegisteredDependency(const Problem &problem, const Program &run,
                           const ProgramGraph &graph, ComputationIndex &index,
                           Ask holds) {
  // Per (actor, instruction): its instances' first micro-batches and ops,
  // in order, with the op that completes each there (an asynchronous
  // collective's wait); one pass over the programs (a pass per instruction
  // was quadratic in the instructions a spec registers).
  struct Instance {
    int32_t mb, op, done;
  };
  using Instances = std::vector<Instance>;
  std::map<std::pair<int32_t, int32_t>, Instances> execs;
  std::vector<int32_t> waitOf(graph.numOps(), -1);
  for (int32_t id = 0; id < graph.numOps(); ++id)
    if (graph.waitsPost[id] >= 0)
      waitOf[graph.waitsPost[id]] = id;
  for (int32_t actor = 0; actor < static_cast<int32_t>(run.actors.size());
       ++actor)
    for (size_t i = 0; i < run.actors[actor].size(); ++i) {
      const ProgOp &op = run.actors[actor][i];
      if (op.inst < 0 || !(op.kind == OpKind::Exec || isCollective(op.kind)))
        continue;
      const int32_t id = graph.actorBegin[actor] + static_cast<int32_t>(i);
      execs[{actor, op.inst}].push_back(
          {op.mb, id, waitOf[id] >= 0 ? waitOf[id] : id});
    }
  for (int32_t r = 0; r < static_cast<int32_t>(problem.registered.size());
       ++r) {
    const Registered &inst = problem.registered[r];
    // Per member: its instances.
    std::map<int32_t, const Instances *> instances;
    for (int32_t actor : inst.actors)
      if (auto it = execs.find({actor, r}); it != execs.end())
        instances[actor] = &it->second;
    const bool collective = inst.runtime != InstRuntime::Exec;
    auto fail = [&](const PartKind &end, int32_t mb, bool fromExec,
                    int32_t member) {
      return BrokenDependency{
          end.source,
          registeredEndBroken(problem, inst, end, mb, fromExec, member)};
    };
    // The micro-batches whose dependents wait for an instance, as the
    // scheduler has them.
    const auto [lo, hi] = registeredRange(problem, r);
    // Each member runs its own instances on what it computed: a source or
    // dependent on another member's actor is that member's. An end on an
    // actor outside a collective is kept where messages order it with some
    // member's instance (no member leaves one before every member joined);
    // an exec's, with every member's.
    auto elsewhere = [&](int32_t actor, int32_t member) {
      return actor != member && llvm::is_contained(inst.actors, actor);
    };
    auto outside = [&](int32_t actor) {
      return collective && !llvm::is_contained(inst.actors, actor);
    };
    // Whether `end` at `mb` is ordered with `member`'s `k`-th instance.
    auto kept = [&](const PartKind &end, int32_t mb, bool fromInst,
                    int32_t member, size_t k) {
      const StagePart &part = problem.parts[end.part];
      const Instances &list = *instances.at(member);
      if (k >= list.size())
        return true;
      const int32_t op =
          index.find(part.actor, end.kind, part.stage, mb, !fromInst);
      return op < 0 || (fromInst ? holds(member, list[k].done, op)
                                 : holds(part.actor, op, list[k].op));
    };
    auto check = [&](const PartKind &end, int32_t mb, bool fromInst,
                     auto &&instanceOf) -> std::optional<BrokenDependency> {
      const StagePart &part = problem.parts[end.part];
      if (outside(part.actor)) {
        for (auto [member, list] : instances)
          if (kept(end, mb, fromInst, member, instanceOf(*list)))
            return std::nullopt;
        return instances.empty()
                   ? std::nullopt
                   : std::optional(
                         fail(end, mb, fromInst, instances.begin()->first));
      }
      for (auto [member, list] : instances)
        if (!elsewhere(part.actor, member) &&
            !kept(end, mb, fromInst, member, instanceOf(*list)))
          return fail(end, mb, fromInst, member);
      return std::nullopt;
    };
    // Sources: every micro-batch an instance covers comes first. Per
    // member, the instance covering each micro-batch (none: past the list).
    std::map<const Instances *, std::vector<size_t>> cover;
    for (auto [member, list] : instances) {
      std::vector<size_t> &of = cover[list];
      of.assign(problem.numMicrobatches, list->size());
      for (size_t k = list->size(); k-- > 0;)
        for (int64_t mb = (*list)[k].mb;
             mb < std::min<int64_t>((*list)[k].mb + inst.prev,
                                    problem.numMicrobatches);
             ++mb)
          of[mb] = k;
    }
    for (const PartKind &src : inst.after) {
      const StagePart &part = problem.parts[src.part];
      if (!isSpecDependency(src))
        continue;
      for (int32_t mb = part.mbBegin; mb < part.mbEnd; ++mb)
        if (auto broken = check(src, mb, false, [&](const Instances &list) {
              return cover[&list][mb];
            }))
          return broken;
    }
    // Dependents: micro-batch j after instance (j - lo) / next.
    for (const PartKind &dst : inst.before) {
      const StagePart &part = problem.parts[dst.part];
      if (!isSpecDependency(dst))
        continue;
      for (int32_t mb = std::max(lo, part.mbBegin);
           mb < std::min(hi, part.mbEnd); ++mb) {
        const size_t k = static_cast<size_t>((mb - lo) / inst.next);
        if (auto broken =
                check(dst, mb, true, [&](const Instances &) { return k; }))
          return broken;
      }
    }
  }
  return std::nullopt;
}

/// The first extra dependency between computations that the run does not
/// keep.
std::optional<BrokenDependency> brokenExtraDependency(const Problem &problem,
                                                      const Program &run,
                                                      const ProgramGraph &graph,
                                                      ComputationIndex &index,
                                                      Ask holds) {
  for (const ExtraDependency &dep : problem.extraDependencies) {
    const StagePart &src = problem.parts[dep.srcPart];
    const StagePart &dst = problem.parts[dep.dstPart];
    for (int32_t mb = std::max(src.mbBegin, dst.mbBegin);
         mb < std::min(src.mbEnd, dst.mbEnd); ++mb) {
      const int32_t from = index.find(src.actor, dep.srcKind, src.stage, mb,
                                      /*asSource=*/true);
      const int32_t to = index.find(dst.actor, dep.dstKind, dst.stage, mb,
                                    /*asSource=*/false);
      if (from < 0 || to < 0 || holds(src.actor, from, to))
        continue;
      std::ostringstream os;
      os << "is not kept when the schedule runs: at micro-batch " << mb << ", "
         << compKindName(dep.srcKind) << " of stage " << src.stage << " (actor "
         << src.actor << ") does not happen before "
         << compKindName(dep.dstKind) << " of stage " << dst.stage << " (actor "
         << dst.actor << ")";
      if (graph.op(run, from).kind == OpKind::Wgrad)
        os << ": the backward was split after scheduling and the weight "
              "gradient placed on its own, where no message or later "
              "computation orders it (flexpipe.optimize split_backward or "
              "gradient_separation); start the dependency at igrad, or "
              "leave the backward whole";
      else if (src.actor == dst.actor)
        os << kOtherWayRound;
      else
        os << ": nothing the two actors exchange orders them (the "
              "scheduler did, but no message makes actor "
           << dst.actor
           << " wait); connect the stages with data (`inputs`), place "
              "them on one actor, or order them through a collective "
              "instruction (kind(all_gather)) both actors join";
      return BrokenDependency{dep.source, os.str()};
    }
  }
  return std::nullopt;
}

} // namespace

/// Whether brokenDependency has anything to check.
static bool hasCheckedDependencies(const Problem &problem) {
  return !problem.extraDependencies.empty() ||
         llvm::any_of(problem.registered, [](const Registered &r) {
           return llvm::any_of(r.after, isSpecDependency) ||
                  llvm::any_of(r.before, isSpecDependency);
         });
}

std::optional<BrokenDependency>
flexpipe::sched::brokenDependency(const Problem &problem,
                                  const Program &program) {
  if (!hasCheckedDependencies(problem))
    return std::nullopt;
  RunView view(program);
  if (!view.ok())
    return std::nullopt; // the verifier reports what is wrong with it
  return answerByActor(*view.order, [&](Ask holds) {
    if (std::optional<BrokenDependency> broken = brokenExtraDependency(
            problem, *view.run, view.graph, *view.index, holds))
      return broken;
    return brokenRegisteredDependency(problem, *view.run, view.graph,
                                      *view.index, holds);
  });
}

namespace {

/// The largest of prefix sums P[lo..hi] for windows [lo, hi] whose ends
/// only move on (a deque of candidates, each pushed and popped once).
class WindowMax {
public:
  explicit WindowMax(const std::vector<int64_t> &prefix) : prefix(prefix) {}
  /// The largest P[k], lo <= k <= hi, and a k that has it.
  std::pair<int64_t, size_t> over(size_t lo, size_t hi) {
    for (; pushed <= hi; ++pushed) {
      while (!best.empty() && prefix[best.back()] <= prefix[pushed])
        best.pop_back();
      best.push_back(pushed);
    }
    while (best.front() < lo)
      best.pop_front();
    return {prefix[best.front()], best.front()};
  }

private:
  const std::vector<int64_t> &prefix;
  std::deque<size_t> best;
  size_t pushed = 0;
};

/// The most source actors times instructions looseGlobalLimit checks (a
/// 32-bit entry each, 256 MiB).
constexpr size_t kLooseCheckBudget = size_t(1) << 26;

/// A micro-batch's computation on a source: (op, micro-batch); for the
/// steps of LimitSweep, -1 - mb where the micro-batch leaves.
struct Event {
  int32_t op, mb;
};

/// One global limit checked on a run (looseGlobalLimit). A micro-batch
/// whose sources are all on one actor is in flight there from its first
/// forward to its last release (a backward's end), in that actor's program
/// order: per actor, +1 and -1 steps whose prefix sums count them. One over
/// several actors (two towers) is counted apart: in flight where one of its
/// forwards may have run and one of its releases may not.
class LimitSweep {
public:
  LimitSweep(const Problem &problem, const GlobalLimit &limit, RunView &view)
      : limit(limit), view(view), m(view.run->numMicrobatches), forwardsOf(m),
        releasesOf(m) {
    for (int32_t part : limit.sources) {
      const StagePart &p = problem.parts[part];
      for (int32_t mb = p.mbBegin; mb < p.mbEnd; ++mb) {
        const int32_t f =
            view.index->find(p.actor, CompKind::Fwd, p.stage, mb, true);
        const int32_t r =
            view.index->find(p.actor, CompKind::Bwd, p.stage, mb, true);
        if (f >= 0 && r >= 0) {
          forwardsOf[mb].push_back({p.actor, f});
          releasesOf[mb].push_back({p.actor, r});
        }
      }
    }
    for (int32_t mb = 0; mb < m; ++mb)
      classify(mb);
    auto byOp = [](Event x, Event y) { return x.op < y.op; };
    for (auto *lists : {&steps, &entries, &spreadForwards, &spreadReleases})
      for (auto &[actor, list] : *lists)
        llvm::sort(list, byOp);
    // Per actor, its micro-batches in flight after each prefix of its steps.
    for (const auto &[b, list] : steps) {
      std::vector<int64_t> &prefix = prefixes[b];
      prefix.assign(1, 0);
      for (const Event &e : list)
        prefix.push_back(prefix.back() + (e.mb >= 0 ? 1 : -1));
    }
  }

  /// The first forward that may enter while `limit` others are in flight,
  /// as the warning says it.
  std::optional<std::string> find() {
    for (const auto &[a, mine] : entries)
      if (std::optional<std::string> found = sweep(a, mine))
        return found;
    return std::nullopt;
  }

private:
  using Place = std::pair<int32_t, int32_t>; // (actor, op)

  void classify(int32_t mb) {
    if (forwardsOf[mb].empty())
      return;
    for (auto [actor, op] : forwardsOf[mb])
      entries[actor].push_back({op, mb});
    const int32_t home = forwardsOf[mb].front().first;
    auto atHome = [&](Place x) { return x.first == home; };
    if (llvm::all_of(forwardsOf[mb], atHome) &&
        llvm::all_of(releasesOf[mb], atHome)) {
      steps[home].push_back(
          {llvm::min_element(forwardsOf[mb], llvm::less_second())->second, mb});
      steps[home].push_back(
          {llvm::max_element(releasesOf[mb], llvm::less_second())->second,
           -1 - mb});
      return;
    }
    for (auto [actor, op] : forwardsOf[mb])
      spreadForwards[actor].push_back({op, mb});
    for (auto [actor, op] : releasesOf[mb])
      spreadReleases[actor].push_back({op, mb});
  }

  /// Actor a's forwards in its program order. At forward f, actor b has
  /// run at least its ops that happen before f and at most those f does not
  /// happen before: a prefix of its steps between two ends that only move
  /// on as f does. Its micro-batches in flight are at most the largest
  /// prefix sum in that window (one prefix on a itself). Summed over the
  /// actors, this bounds the micro-batches in flight at f under any timing:
  /// exact for each actor alone, a bound where the actors' windows cannot
  /// all be at their largest at once.
  std::optional<std::string> sweep(int32_t a, const std::vector<Event> &mine) {
    const std::vector<int32_t> &fromA = view.lastOf(a);
    std::map<int32_t, Window> windows;
    for (const auto &[b, list] : steps)
      windows.try_emplace(b, list, prefixes.at(b));
    entered.assign(m, 0);
    released.assign(m, 0);
    spreadInFlight = 0;
    std::map<int32_t, size_t> enteredUpTo, releasedUpTo;
    for (const Event &f : mine) {
      // On b, what happens before f has run; what f happens before has not
      // (on a: exactly what precedes f).
      auto before = [&](int32_t b, int32_t op) {
        return op != f.op && op <= view.lastOf(b)[f.op];
      };
      auto mayHaveRun = [&](int32_t op) { return fromA[op] < f.op; };
      int64_t local = 0;
      for (auto &[b, w] : windows) {
        while (w.lo < w.list.size() && before(b, w.list[w.lo].op))
          ++w.lo;
        w.hi = std::max(w.hi, w.lo);
        while (w.hi < w.list.size() && mayHaveRun(w.list[w.hi].op))
          ++w.hi;
        local += w.max.over(w.lo, w.hi).first;
      }
      for (const auto &[b, list] : spreadForwards)
        for (size_t &q = enteredUpTo[b];
             q < list.size() && mayHaveRun(list[q].op); ++q)
          count(entered, list[q].mb);
      for (const auto &[b, list] : spreadReleases)
        for (size_t &k = releasedUpTo[b];
             k < list.size() && before(b, list[k].op); ++k)
          count(released, list[k].mb);
      // f is where its micro-batch enters unless another of its forwards
      // happens before it.
      const bool entry = llvm::none_of(forwardsOf[f.mb], [&](Place x) {
        return x.second != f.op && before(x.first, x.second);
      });
      const int64_t others = local + spreadInFlight - (maybe(f.mb) ? 1 : 0);
      if (entry && others >= limit.limit)
        return message(a, f, others, windows);
    }
    return std::nullopt;
  }

  struct Window {
    Window(const std::vector<Event> &list, const std::vector<int64_t> &prefix)
        : list(list), max(prefix) {}
    const std::vector<Event> &list;
    WindowMax max;
    size_t lo = 0, hi = 0;
  };

  bool maybe(int32_t mb) const {
    return entered[mb] > 0 &&
           released[mb] < static_cast<int32_t>(releasesOf[mb].size());
  }
  void count(std::vector<int32_t> &counts, int32_t mb) {
    const bool was = maybe(mb);
    ++counts[mb];
    spreadInFlight += static_cast<int64_t>(maybe(mb)) - was;
  }

  /// The warning, with one state of the actors that has the others in
  /// flight: each at its window's largest prefix.
  std::string message(int32_t a, const Event &f, int64_t others,
                      std::map<int32_t, Window> &windows) {
    std::vector<uint8_t> inFlight(m, 0);
    for (auto &[b, w] : windows) {
      const size_t k = w.max.over(w.lo, w.hi).second;
      for (size_t i = 0; i < k; ++i) {
        const Event &e = w.list[i];
        inFlight[e.mb >= 0 ? e.mb : -1 - e.mb] = e.mb >= 0;
      }
    }
    std::vector<int32_t> shown;
    for (int32_t mb = 0; mb < m && shown.size() < 8; ++mb)
      if (mb != f.mb && (inFlight[mb] || maybe(mb)))
        shown.push_back(mb);
    const ProgOp &op = view.graph.op(*view.run, f.op);
    std::ostringstream os;
    os << "limits micro-batches in flight to " << limit.limit
       << ", which the programs do not keep when they run: micro-batch " << f.mb
       << " may enter at the forward of stage " << op.stage << " (actor " << a
       << ") while " << others << (others == 1 ? " other is" : " others are")
       << " in flight (micro-batch";
    for (size_t i = 0; i < shown.size(); ++i)
      os << (i ? ", " : shown.size() > 1 ? "es " : " ") << shown[i];
    os << (static_cast<int64_t>(shown.size()) < others ? ", ..." : "")
       << "): nothing the actors exchange makes actor " << a << " wait until "
       << (others == 1 ? "it is" : "they are")
       << " released (the scheduler kept the limit in its own timing only); "
          "a limit whose first stages share one actor, or a per_actor or "
          "per_stage limit, is kept by the actors' programs";
    return os.str();
  }

  const GlobalLimit &limit;
  RunView &view;
  const int32_t m;
  std::vector<std::vector<Place>> forwardsOf, releasesOf;
  std::map<int32_t, std::vector<Event>> steps, entries, spreadForwards,
      spreadReleases;
  std::map<int32_t, std::vector<int64_t>> prefixes; ///< per actor, of steps
  std::vector<int32_t> entered, released;
  int64_t spreadInFlight = 0;
};

} // namespace

std::optional<LooseLimit>
flexpipe::sched::looseGlobalLimit(const Problem &problem,
                                  const Program &program) {
  // A limit whose sources share one actor is kept by its program order.
  auto spread = [&](const GlobalLimit &g) {
    return llvm::any_of(g.sources, [&](int32_t part) {
      return problem.parts[part].actor !=
             problem.parts[g.sources.front()].actor;
    });
  };
  if (llvm::none_of(problem.globalLimits, spread))
    return std::nullopt;
  RunView view(program);
  if (!view.ok())
    return std::nullopt; // the verifier reports what is wrong with it
  const size_t numOps = view.graph.numOps();
  for (const GlobalLimit &g : problem.globalLimits) {
    // (No more than m - 1 others can be in flight.)
    if (!spread(g) || g.limit >= view.run->numMicrobatches)
      continue;
    // The sweep keeps, per source actor, what of it happens before each op:
    // 4096 towers of a 16-micro-batch pipeline took 283 s and 6.5 GB.
    std::set<int32_t> sourceActors;
    for (int32_t part : g.sources)
      sourceActors.insert(problem.parts[part].actor);
    if (sourceActors.size() * numOps > kLooseCheckBudget)
      return LooseLimit{
          g.inflight,
          "limits micro-batches in flight to " + std::to_string(g.limit) +
              ", which is not checked against the programs: its first "
              "stages are on " +
              std::to_string(sourceActors.size()) +
              " actors, and the check takes their number times the " +
              std::to_string(numOps) +
              " instructions; the scheduler keeps it in its own timing, and "
              "the programs only where messages make the actors wait"};
    if (std::optional<std::string> found = LimitSweep(problem, g, view).find())
      return LooseLimit{g.inflight, std::move(*found)};
  }
  return std::nullopt;
}

namespace {

/// The bubble optimizations and communication on a lowered order
/// (finishProgram), keeping separation's figures.
llvm::Error finishLowered(const LoweringOptions &options,
                          LoweredProgram &lowered) {
  std::optional<SeparationResult> figures;
  if (llvm::Error error = finishProgram(
          lowered.program, lowered.costs ? *lowered.costs : SimCosts(),
          options.bubbles,
          options.bubbles.separation ? &figures.emplace() : nullptr))
    return error;
  lowered.separation = std::move(figures);
  return llvm::Error::success();
}

/// One order of the problem lowered: programOf, priced where `price`
/// (always, to finish with separation), finished where `finish`.
llvm::Error lowerOrder(const BuiltProblem &built, const ScheduleResult &order,
                       const LoweringOptions &options, bool finish, bool price,
                       LoweredProgram &out) {
  out.program = programOf(built, order);
  if (price || (finish && options.bubbles.separation))
    if (llvm::Error error = programCosts(
            out.program, options.model, options.cluster, options.profile,
            options.dp, options.timeModel, out.costs.emplace()))
      return error;
  return finish ? finishLowered(options, out) : llvm::Error::success();
}

/// Unfinished, a program gets its bubble optimizations later, from passes
/// that cannot see the spec's dependencies (the schedule IR does not record
/// them; a weight gradient moved past its dependent passed the passes run
/// one by one). Sets out.broken to the first dependency broken by what
/// those passes make of out.schedule with these options' costs (as the
/// finished pipeline makes it), else out.brokenByDefaults to the first
/// broken with the passes' defaults (the step model, no files) where those
/// differ. An order that cannot be finished is left to the passes.
void checkLater(const BuiltProblem &built, const LoweringOptions &options,
                LoweredProgram &out) {
  if (!(options.bubbles.splitBackward || options.bubbles.separation) ||
      !hasCheckedDependencies(built.problem))
    return;
  LoweringOptions defaults; // the step model, no files, one replica
  defaults.bubbles = options.bubbles;
  // (Only separation looks at the costs.)
  const bool same = !options.bubbles.separation ||
                    (options.timeModel == TimeModel::Step && !options.model &&
                     !options.cluster && !options.profile && options.dp == 1);
  const LoweringOptions *variants[] = {&options, &defaults};
  for (const LoweringOptions *costs : variants) {
    if (costs == &defaults && same)
      break;
    LoweredProgram finished;
    if (llvm::errorToBool(lowerOrder(built, out.schedule, *costs,
                                     /*finish=*/true, /*price=*/false,
                                     finished)))
      continue;
    if (std::optional<BrokenDependency> broken =
            brokenDependency(built.problem, finished.program)) {
      (costs == &options ? out.broken : out.brokenByDefaults) =
          std::move(broken);
      return;
    }
  }
}

} // namespace

Durations flexpipe::sched::profiledDurations(const StagePart &part,
                                             const Profile &profile,
                                             bool analytic) {
  return profile.durationsOr(part.stage,
                             analytic ? part.cost : Durations{1, 1, 1, 1});
}

llvm::Error flexpipe::sched::lowerProblem(const BuiltProblem &built,
                                          const LoweringOptions &options,
                                          LoweredProgram &out) {
  // A profile prices the job it was measured on, for every output (the
  // simulation refused another job's, but the program was built with it).
  if (options.profile)
    if (llvm::Error error = checkProfileFits(
            *options.profile, stageLayoutOf(built), options.model))
      return error;
  // With a model and a cluster, the cost model's choice between its greedy
  // order and the step model's is judged by the simulation: the scheduler's
  // durations see neither messages (on a fast device a small model's
  // latencies outweigh its computations) nor ranks that share cores. Each
  // order is judged as it will run, finished, so that one whose weight
  // gradients are then separated is judged separated (without files too:
  // the order that ends first may not be the one that ends first
  // separated). The judged orders are kept: the chosen one is not lowered
  // twice.
  std::vector<LoweredProgram> judged;
  std::vector<double> judgedTimes;
  ScheduleJudge judge;
  if ((options.model && options.cluster) || options.profile ||
      (options.finish && options.bubbles.separation))
    judge = [&](const ScheduleResult &order) -> std::optional<double> {
      LoweredProgram lowered;
      lowered.schedule = order;
      Simulator simulator;
      Simulator::ReplicaRun slowest;
      // An order that cannot be lowered or replayed is not a candidate.
      // (With dp replicas, judged by the slowest, as it is reported.)
      if (llvm::errorToBool(lowerOrder(built, order, options,
                                       /*finish=*/false, /*price=*/true,
                                       lowered)) ||
          llvm::errorToBool(finishLowered(options, lowered)) ||
          llvm::errorToBool(simulator.prepare(lowered.program)) ||
          llvm::errorToBool(simulator.runSlowestReplica(
              lowered.program, options.model, options.cluster, options.profile,
              options.dp, options.timeModel, slowest)))
        return std::nullopt;
      const double time = slowest.result.iterationTime;
      judged.push_back(std::move(lowered));
      judgedTimes.push_back(time);
      return time;
    };

  out = LoweredProgram();
  // A profile's durations are the ones the greedy order should see. They
  // make the better order far more often than not, not always (a sweep of
  // 320 random uneven profiles: 122 faster, up to 18%; 11 slower, up to
  // 14%), so the order of the problem's own durations is judged as well.
  std::optional<Problem> measured;
  if (options.profile && options.timeModel == TimeModel::Cost) {
    measured = built.problem;
    for (StagePart &part : measured->parts)
      part.cost = profiledDurations(part, *options.profile,
                                    options.model && options.cluster);
  }
  out.schedule = schedule(measured ? *measured : built.problem,
                          options.timeModel, judge, options.cutoff);
  // (An order schedule() kept without judging it, as where its greedy and
  // step orders agree, is judged here.)
  auto timeOf = [&](const ScheduleResult &order) -> std::optional<double> {
    for (size_t i = 0; i < judged.size(); ++i)
      if (sameOrder(judged[i].schedule, order))
        return judgedTimes[i];
    return judge(order);
  };
  if (measured && out.schedule.ok) {
    ScheduleResult own =
        schedule(built.problem, options.timeModel, judge, options.cutoff);
    const std::optional<double> was = timeOf(out.schedule), is = timeOf(own);
    if (own.ok && was && is && *is < *was * (1 - 1e-9))
      out.schedule = std::move(own);
  }
  if (!out.schedule.ok)
    return llvm::Error::success();
  auto kept = judged.end();
  if (options.finish)
    kept = llvm::find_if(judged, [&](const LoweredProgram &lowered) {
      return sameOrder(lowered.schedule, out.schedule);
    });
  if (kept != judged.end()) {
    out.program = std::move(kept->program);
    out.costs = std::move(kept->costs);
    out.separation = std::move(kept->separation);
  } else if (llvm::Error error =
                 lowerOrder(built, out.schedule, options, options.finish,
                            options.wantCosts, out)) {
    return error;
  }
  out.broken = brokenDependency(built.problem, out.program);
  if (!out.broken && !options.finish)
    checkLater(built, options, out);
  if (!out.separation)
    out.loose = looseGlobalLimit(built.problem, out.program);
  return llvm::Error::success();
}
