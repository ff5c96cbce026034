//===- Program.cpp - Communication insertion and schedule verification ----===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Program.h"
#include "flexpipe/Support/StageGraph.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/IntEqClasses.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

using namespace flexpipe::sched;

namespace {
/// Per OpKind, in its order: the op's name and PyTorch's CSV letter.
struct OpKindNames {
  const char *name, *letter;
};
constexpr OpKindNames kOpKindNames[] = {{"fwd", "F"},
                                        {"bwd", "B"},
                                        {"igrad", "I"},
                                        {"wgrad", "W"},
                                        {"send_act", "SEND_F"},
                                        {"recv_act", "RECV_F"},
                                        {"send_grad", "SEND_B"},
                                        {"recv_grad", "RECV_B"},
                                        {"all_gather", nullptr},
                                        {"gather", nullptr},
                                        {"exec", nullptr},
                                        {"wait", nullptr}};
static_assert(std::size(kOpKindNames) == static_cast<size_t>(OpKind::Wait) + 1,
              "one entry per OpKind");
} // namespace

const char *flexpipe::sched::opKindName(OpKind kind) {
  return kOpKindNames[static_cast<size_t>(kind)].name;
}

const char *flexpipe::sched::opLetter(OpKind kind) {
  return kOpKindNames[static_cast<size_t>(kind)].letter;
}

Program flexpipe::sched::toProgram(
    const Problem &problem, const ScheduleResult &schedule, int32_t numStages,
    const std::vector<std::pair<int32_t, int32_t>> &stageEdges,
    const std::vector<int32_t> &sharedStages) {
  Program program;
  program.numActors = problem.numActors;
  program.numStages = numStages;
  program.numMicrobatches = problem.numMicrobatches;
  program.edges = stageEdges;
  program.sharedStages = sharedStages;
  program.actors.resize(problem.numActors);
  // One group per registered instruction: its actors, ascending.
  for (const Registered &r : problem.registered) {
    program.groups.push_back(r.actors);
    program.instructions.push_back(r.name);
  }
  int32_t nextToken = 0;
  for (int32_t a = 0; a < problem.numActors; ++a) {
    std::vector<ProgOp> &out = program.actors[a];
    out.reserve(schedule.actors[a].size());
    // Asynchronous instances posted here and not yet waited: (r, first mb,
    // token).
    std::vector<std::tuple<int32_t, int32_t, int32_t>> open;
    for (const ScheduledItem &item : schedule.actors[a]) {
      if (item.isRegistered()) {
        const Registered &r = problem.registered[item.inst];
        ProgOp op{r.runtime == InstRuntime::AllGather ? OpKind::AllGather
                  : r.runtime == InstRuntime::Gather  ? OpKind::Gather
                                                      : OpKind::Exec,
                  r.stage, item.mb};
        op.group = item.inst;
        op.inst = item.inst;
        if (r.runtime == InstRuntime::Gather)
          op.peer = r.root;
        if (r.mode == InstMode::Async) {
          op.token = nextToken++;
          open.emplace_back(item.inst, item.mb, op.token);
        }
        out.push_back(op);
        continue;
      }
      for (auto it = open.begin(); it != open.end();) {
        auto [r, first, token] = *it;
        if (waitsForInstance(problem, r, first, item.kind, item.part,
                             item.mb)) {
          out.push_back(waitOp(token));
          it = open.erase(it);
        } else {
          ++it;
        }
      }
      out.push_back(
          ProgOp{toOpKind(item.kind), problem.parts[item.part].stage, item.mb});
    }
    for (auto [r, first, token] : open)
      out.push_back(waitOp(token));
  }
  return program;
}

namespace {

/// Per stage: whether it is shared (computed in slices on several actors).
std::vector<uint8_t> sharedMask(const Program &program) {
  std::vector<uint8_t> shared(program.numStages, 0);
  for (int32_t s : program.sharedStages)
    if (s >= 0 && s < program.numStages)
      shared[s] = 1;
  return shared;
}

/// The stage DAG and where each stage's computations run.
struct Topology : flexpipe::StageGraph<int32_t> {
  std::vector<std::vector<int32_t>> actorsOf; // sorted, unique
  /// Per stage: a vocabulary-parallel head, whose slices need the
  /// all_gather of each micro-batch's loss statistics before its backward
  /// (known from the stage metadata, when the program has it).
  std::vector<uint8_t> vocabHead;
  /// Per (shared stage, micro-batch): the actors that run its forward, and
  /// those that run its backward (or input gradient). Each computes a slice
  /// (vocabulary parallelism): what takes the stage's output or gradient
  /// needs every slice, its own and the others' messages.
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> fwdSlices,
      bwdSlices;
  /// Per stage: shared (computed in slices on several actors).
  std::vector<uint8_t> shared;

  explicit Topology(const Program &program)
      : StageGraph(program.numStages, program.edges),
        actorsOf(stageActors(program)), vocabHead(program.numStages, 0),
        shared(sharedMask(program)) {
    for (int32_t a = 0; a < program.numActors; ++a)
      for (const ProgOp &op : program.actors[a]) {
        const bool fwd = op.kind == OpKind::Fwd;
        if (op.stage < 0 || op.stage >= program.numStages ||
            !shared[op.stage] || !(fwd || makesInputGradient(op.kind)))
          continue;
        std::vector<int32_t> &actors =
            (fwd ? fwdSlices : bwdSlices)[{op.stage, op.mb}];
        if (actors.empty() || actors.back() != a)
          actors.push_back(a);
      }
    if (program.stageMeta.size() == static_cast<size_t>(program.numStages))
      for (int32_t s : program.sharedStages)
        if (s >= 0 && s < program.numStages)
          vocabHead[s] = program.stageMeta[s].isVocabHead();
  }
};

/// The Facts place of the slice of shared stage `stage` that `actor`
/// computes (a stage's own place is its id).
int64_t slicePlace(int32_t stage, int32_t actor) {
  return -1 - (static_cast<int64_t>(actor) << 32 | static_cast<uint32_t>(stage));
}

/// What an actor may have of a stage's micro-batch (Facts).
enum Tag : int32_t {
  Act = 0,      // activation of stage available here
  Grad = 1,     // input gradient of stage available here
  FwdDone = 2,  // forward of stage ran here
  IgDone = 3,   // input gradient of stage ran here
  Gathered = 4, // all_gather of stage completed here
};
constexpr int32_t kNumTags = 5;

/// What one actor has: a bit per (tag, place, micro-batch) of the places it
/// meets (a stage, or a stage and the peer it came from), numbered as they
/// come, so that it holds the micro-batches of a few places rather than the
/// whole grid (nor a hash set of packed keys, which cost verify and
/// insertCommunication a fifth of their time). Micro-batches are in range.
class Facts {
public:
  explicit Facts(int32_t numMbs) : numMbs(numMbs) {}
  /// Sets the bit; false when it was set already.
  bool insert(Tag tag, int64_t place, int32_t mb) {
    auto [it, added] = localOf.try_emplace(place, numLocal);
    if (added) {
      ++numLocal;
      words.resize(
          (static_cast<size_t>(numLocal) * kNumTags * numMbs + 63) / 64, 0);
    }
    const size_t b = bit(it->second, tag, mb);
    const uint64_t mask = uint64_t(1) << (b & 63);
    const bool fresh = !(words[b >> 6] & mask);
    words[b >> 6] |= mask;
    return fresh;
  }
  bool count(Tag tag, int64_t place, int32_t mb) const {
    auto it = localOf.find(place);
    if (it == localOf.end())
      return false;
    const size_t b = bit(it->second, tag, mb);
    return words[b >> 6] >> (b & 63) & 1;
  }

private:
  size_t bit(int32_t local, Tag tag, int32_t mb) const {
    return (static_cast<size_t>(local) * kNumTags + tag) * numMbs + mb;
  }
  /// Per place met: its number here (few per actor; a table over every
  /// stage would cost actors x stages, 16 GB at 65,536 actors).
  llvm::SmallDenseMap<int64_t, int32_t, 8> localOf;
  std::vector<uint64_t> words;
  int32_t numMbs, numLocal = 0;
};

} // namespace

std::vector<std::vector<int32_t>>
flexpipe::sched::stageActors(const Program &program) {
  // Actors are visited in ascending order: each list comes out sorted, and
  // an actor is added once when its last entry is not already it.
  std::vector<std::vector<int32_t>> actorsOf(program.numStages);
  for (int32_t a = 0; a < program.numActors; ++a)
    for (const ProgOp &op : program.actors[a])
      if (isCompute(op.kind) && op.stage >= 0 && op.stage < program.numStages &&
          (actorsOf[op.stage].empty() || actorsOf[op.stage].back() != a))
        actorsOf[op.stage].push_back(a);
  return actorsOf;
}

void flexpipe::sched::markRegistered(std::vector<StageMeta> &meta) {
  auto shaped = [](const StageMeta &m) {
    return m.layers == 0 && !m.first && !m.last;
  };
  std::set<int32_t> computing;
  for (const StageMeta &m : meta)
    if (!shaped(m))
      computing.insert(m.module);
  for (StageMeta &m : meta)
    m.registered = shaped(m) && !computing.count(m.module);
}

/// Whether `from` -> `to` is an edge inside one module (between modules a
/// stage starts its own module's layers).
static bool moduleEdge(const std::vector<StageMeta> &meta, int32_t from,
                       int32_t to) {
  const int32_t n = static_cast<int32_t>(meta.size());
  return from >= 0 && to >= 0 && from < n && to < n &&
         meta[from].module == meta[to].module;
}

std::vector<int64_t> flexpipe::sched::stageFirstLayers(
    const std::vector<StageMeta> &meta,
    const std::vector<std::pair<int32_t, int32_t>> &edges) {
  const int32_t numStages = static_cast<int32_t>(meta.size());
  const flexpipe::StageGraph<int32_t> graph(
      numStages, edges,
      [&](int32_t from, int32_t to) { return moduleEdge(meta, from, to); });
  // A stage is placed once every predecessor is.
  std::vector<int64_t> first(numStages, 0);
  for (int32_t s : graph.topologicalOrder())
    for (int32_t next : graph.succs[s])
      first[next] = std::max(first[next], first[s] + meta[s].layers);
  return first;
}

std::vector<int64_t> flexpipe::sched::moduleLayers(const Program &program) {
  std::vector<int64_t> depth(program.moduleNames.size(), 0);
  if (static_cast<int32_t>(program.stageMeta.size()) != program.numStages)
    return depth;
  const std::vector<int64_t> first =
      stageFirstLayers(program.stageMeta, program.edges);
  for (int32_t s = 0; s < program.numStages; ++s) {
    const StageMeta &meta = program.stageMeta[s];
    if (!meta.isRegistered() && meta.module >= 0 &&
        meta.module < static_cast<int32_t>(depth.size()))
      depth[meta.module] = std::max(depth[meta.module], first[s] + meta.layers);
  }
  return depth;
}

llvm::Error flexpipe::sched::checkStageChains(const Program &program) {
  if (static_cast<int32_t>(program.stageMeta.size()) != program.numStages)
    return llvm::Error::success();
  const std::vector<StageMeta> &meta = program.stageMeta;
  std::vector<uint8_t> fed(program.numStages, 0), feeds(program.numStages, 0);
  for (auto [from, to] : program.edges)
    if (moduleEdge(meta, from, to))
      feeds[from] = fed[to] = 1;
  auto nameOf = [&](int32_t s) {
    const int32_t m = meta[s].module;
    return m >= 0 && m < static_cast<int32_t>(program.moduleNames.size())
               ? program.moduleNames[m]
               : std::string("?");
  };
  std::vector<int64_t> firsts(program.moduleNames.size(), 0),
      lasts(program.moduleNames.size(), 0);
  for (int32_t s = 0; s < program.numStages; ++s) {
    if (meta[s].isRegistered())
      continue;
    if (!meta[s].first && !fed[s])
      return llvm::createStringError(
          "stage " + std::to_string(s) + " of module '" + nameOf(s) +
          "' is not a first stage (stage_info), but no stage of its module "
          "feeds it");
    if (!meta[s].last && !feeds[s])
      return llvm::createStringError(
          "stage " + std::to_string(s) + " of module '" + nameOf(s) +
          "' is not a last stage (stage_info), but it feeds no stage of its "
          "module");
    if (meta[s].module >= 0 &&
        meta[s].module < static_cast<int32_t>(firsts.size())) {
      firsts[meta[s].module] += meta[s].first;
      lasts[meta[s].module] += meta[s].last;
    }
  }
  for (size_t m = 0; m < firsts.size(); ++m)
    if (firsts[m] != lasts[m])
      return llvm::createStringError(
          "module '" + program.moduleNames[m] + "' has " +
          std::to_string(firsts[m]) + " first and " + std::to_string(lasts[m]) +
          " last stages (stage_info); a module has one of each per "
          "direction");
  return llvm::Error::success();
}

std::optional<MessageClash> flexpipe::sched::findMessageClash(
    const std::vector<std::pair<int32_t, int32_t>> &edges,
    const std::vector<std::vector<int32_t>> &actorsOf) {
  const int32_t numStages = static_cast<int32_t>(actorsOf.size());
  const flexpipe::StageGraph<int32_t> graph(numStages, edges);
  for (int32_t stage = 0; stage < numStages; ++stage)
    for (bool join : {true, false}) {
      const std::vector<int32_t> &mine = actorsOf[stage];
      std::map<int32_t, int32_t> seen; // actor -> first neighbour on it
      for (int32_t other : join ? graph.preds[stage] : graph.succs[stage])
        for (int32_t actor : actorsOf[other]) {
          if (llvm::all_of(mine, [&](int32_t a) { return a == actor; }))
            continue; // no message: every part of `stage` is on `actor`
          auto [it, fresh] = seen.try_emplace(actor, other);
          if (!fresh && it->second != other)
            return MessageClash{stage,
                                it->second,
                                other,
                                actor,
                                mine.front() == actor ? mine.back()
                                                      : mine.front(),
                                join};
        }
    }
  return std::nullopt;
}

void flexpipe::sched::insertCommunication(Program &program) {
  Topology topo(program);
  std::vector<int32_t> peers;
  const int32_t numMbs = std::max(1, program.numMicrobatches);
  for (int32_t a = 0; a < program.numActors; ++a) {
    std::vector<ProgOp> out;
    out.reserve(program.actors[a].size() * 3);
    // What this actor has received: (kind, source stage and peer,
    // micro-batch). A micro-batch out of range (a hand-written program the
    // verifier will refuse) gets a receive each time.
    Facts received(numMbs);
    auto firstTime = [&](Tag tag, int32_t src, int32_t mb, int32_t peer) {
      return mb < 0 || mb >= numMbs ||
             received.insert(
                 tag, static_cast<int64_t>(src) * program.numActors + peer, mb);
    };
    for (const ProgOp &op : program.actors[a]) {
      const bool fwd = op.kind == OpKind::Fwd;
      if (!(fwd || makesInputGradient(op.kind)) || op.stage < 0 ||
          op.stage >= program.numStages) {
        out.push_back(op);
        continue;
      }
      // Receives right before the first computation that needs them.
      const auto &sources = fwd ? topo.preds[op.stage] : topo.succs[op.stage];
      for (int32_t src : sources)
        for (int32_t peer : topo.actorsOf[src])
          if (peer != a && firstTime(fwd ? Act : Grad, src, op.mb, peer))
            out.push_back({fwd ? OpKind::RecvAct : OpKind::RecvGrad, op.stage,
                           op.mb, peer, -1, -1, op.source});
      out.push_back(op);
      // One send per consuming actor, right after the producer.
      peers.clear();
      for (int32_t dst : fwd ? topo.succs[op.stage] : topo.preds[op.stage])
        for (int32_t peer : topo.actorsOf[dst])
          if (peer != a && !llvm::is_contained(peers, peer))
            peers.push_back(peer);
      for (int32_t peer : peers)
        out.push_back({fwd ? OpKind::SendAct : OpKind::SendGrad, op.stage,
                       op.mb, peer, -1, -1, op.source});
    }
    program.actors[a] = std::move(out);
  }
}

namespace {

/// How a failure names an op: "fwd stage 2 mb 3 on actor 1".
std::string describeOp(const Program &p, int32_t actor, int32_t index) {
  const ProgOp &op = p.actors[actor][index];
  std::ostringstream os;
  os << opKindName(op.kind) << " stage " << op.stage << " mb " << op.mb;
  if (isTransfer(op.kind))
    os << (isSend(op.kind) ? " to " : " from ") << op.peer;
  os << " on actor " << actor;
  return os.str();
}

VerifyFailure failureAt(int32_t actor, int32_t index, std::string message) {
  VerifyFailure f;
  f.message = std::move(message);
  f.at.push_back({actor, index, ""});
  return f;
}

/// One instruction list per actor, at least one actor.
std::optional<VerifyFailure> checkShape(const Program &p) {
  if (p.numActors >= 1 && static_cast<int32_t>(p.actors.size()) == p.numActors)
    return std::nullopt;
  return VerifyFailure{"the program needs one instruction list per actor", {}};
}

/// A computation of checkStatic: where its (stage, micro-batch) is, and
/// whether it is a forward or ends the backward.
struct Computed {
  int32_t stage, mb, actor, index;
  bool forward;
};

/// Operands in range, tokens waited once; collects the computations.
std::optional<VerifyFailure> checkOperands(const Program &p,
                                           std::vector<Computed> &computed) {
  llvm::DenseSet<int32_t> waited;
  for (int32_t a = 0; a < p.numActors; ++a) {
    for (int32_t i = 0; i < static_cast<int32_t>(p.actors[a].size()); ++i) {
      const ProgOp &op = p.actors[a][i];
      if (op.kind == OpKind::Wait) {
        if (op.token < 0)
          return failureAt(a, i, "wait names no transfer");
        if (!waited.insert(op.token).second)
          return failureAt(a, i, "a transfer is waited twice");
        continue;
      }
      if (op.stage < 0 || op.stage >= p.numStages || op.mb < 0 ||
          op.mb >= p.numMicrobatches)
        return failureAt(a, i, describeOp(p, a, i) + " is out of range");
      if (op.kind == OpKind::Fwd || endsBackward(op.kind))
        computed.push_back({op.stage, op.mb, a, i, op.kind == OpKind::Fwd});
      if (isTransfer(op.kind) &&
          (op.peer < 0 || op.peer >= p.numActors || op.peer == a))
        return failureAt(a, i, describeOp(p, a, i) + " names an invalid peer");
      if (isCollective(op.kind) &&
          (op.group < 0 || op.group >= static_cast<int32_t>(p.groups.size())))
        return failureAt(a, i, describeOp(p, a, i) + " has no group");
    }
  }
  return std::nullopt;
}

/// Module `module`'s name (its number where the program has none).
std::string moduleName(const Program &p, int32_t module) {
  return module >= 0 && module < static_cast<int32_t>(p.moduleNames.size())
             ? p.moduleNames[module]
             : std::to_string(module);
}

/// "actors 0, 2 and 3".
std::string actorList(llvm::ArrayRef<int32_t> actors) {
  std::ostringstream os;
  os << (actors.size() == 1 ? "actor " : "actors ");
  for (size_t i = 0; i < actors.size(); ++i)
    os << (i == 0 ? "" : i + 1 == actors.size() ? " and " : ", ") << actors[i];
  return os.str();
}

/// Per (stage, micro-batch), in that order: a forward has its backward and
/// a backward its forward, on every member of a shared stage.
std::optional<VerifyFailure> checkPairs(const Program &p,
                                        std::vector<Computed> &computed) {
  std::sort(computed.begin(), computed.end(),
            [](const Computed &x, const Computed &y) {
              return std::tie(x.stage, x.mb, x.actor, x.index) <
                     std::tie(y.stage, y.mb, y.actor, y.index);
            });
  const std::vector<std::vector<int32_t>> members = stageActors(p);
  const std::vector<uint8_t> shared = sharedMask(p);
  for (size_t begin = 0, end; begin < computed.size(); begin = end) {
    const Computed &first = computed[begin];
    // Actors, ascending (no allocation per (stage, micro-batch) in the
    // common case of one or a few).
    llvm::SmallVector<int32_t, 4> fwdOn, backOn;
    const Computed *fwd = nullptr, *back = nullptr;
    for (end = begin;
         end < computed.size() && computed[end].stage == first.stage &&
         computed[end].mb == first.mb;
         ++end) {
      const Computed &c = computed[end];
      llvm::SmallVectorImpl<int32_t> &on = c.forward ? fwdOn : backOn;
      // An actor's computations are together, in program order: a second
      // forward or backward of the cell there repeats it (the export put
      // the gradient reduction after the first).
      if (!on.empty() && on.back() == c.actor)
        return failureAt(c.actor, c.index,
                         "stage " + std::to_string(c.stage) + " micro-batch " +
                             std::to_string(c.mb) + " runs its " +
                             (c.forward ? "forward" : "backward") +
                             " twice on actor " + std::to_string(c.actor) +
                             "; each computation runs once per stage and "
                             "micro-batch");
      on.push_back(c.actor);
      if (c.forward && !fwd)
        fwd = &c;
      if (!c.forward && !back)
        back = &c;
    }
    // (The message only on a failure: this loop runs per computation.)
    auto cell = [&] {
      return "stage " + std::to_string(first.stage) + " micro-batch " +
             std::to_string(first.mb);
    };
    if (fwd && !back)
      return failureAt(fwd->actor, fwd->index,
                       cell() + " runs a forward but never completes its "
                                "backward; every forward needs a bwd (or "
                                "igrad and wgrad)");
    if (back && !fwd)
      return failureAt(back->actor, back->index,
                       cell() + " completes a backward but runs no forward; "
                                "every backward needs its forward");
    const llvm::ArrayRef<int32_t> all = members[first.stage];
    if (shared[first.stage] &&
        (all != llvm::ArrayRef(fwdOn) || all != llvm::ArrayRef(backOn))) {
      const bool forwards = all != llvm::ArrayRef(fwdOn);
      const llvm::ArrayRef<int32_t> on = forwards ? fwdOn : backOn;
      std::ostringstream os;
      os << cell() << " runs its " << (forwards ? "forward" : "backward")
         << " on " << actorList(on) << " only, but the stage is shared by "
         << actorList(all) << "; every member computes its part for every "
         << "micro-batch";
      // At the first member without it: its forward, when it has one.
      int32_t missing = 0;
      while (missing < static_cast<int32_t>(on.size()) &&
             on[missing] == all[missing])
        ++missing;
      const Computed *at = fwd;
      for (size_t i = begin; i < end; ++i)
        if (computed[i].forward && computed[i].actor == all[missing])
          at = &computed[i];
      return failureAt(at->actor, at->index, os.str());
    }
  }
  return std::nullopt;
}

/// Every micro-batch is computed (the runtime averages the loss and the
/// gradients over all of them), on every stage of each part of the stage
/// DAG it enters, and on one part per module: a bidirectional pipeline's
/// down and up copies are two parts of one module, and a micro-batch that
/// took both would count its gradient twice. `computed` is in checkPairs'
/// order.
std::optional<VerifyFailure>
checkMicrobatches(const Program &p, std::vector<Computed> &computed) {
  // A program of registered instructions only computes nothing, and has
  // nothing to: its stages hold no layers.
  const bool modules = static_cast<int32_t>(p.stageMeta.size()) == p.numStages;
  if (computed.empty()) {
    for (int32_t s = 0; s < p.numStages; ++s)
      if (!modules || !p.stageMeta[s].isRegistered())
        return VerifyFailure{
            "no actor computes stage " + std::to_string(s) +
                ": every micro-batch needs its forward and backward on "
                "every stage",
            {}};
    return std::nullopt;
  }
  // The stage DAG's weakly connected parts and how many stages each has.
  llvm::IntEqClasses parts(p.numStages);
  for (auto [from, to] : p.edges)
    if (from >= 0 && from < p.numStages && to >= 0 && to < p.numStages)
      parts.join(from, to);
  parts.compress();
  auto root = [&](int32_t s) { return static_cast<int32_t>(parts[s]); };
  // A part's stages: those any forward computes, and every other one but a
  // registered stage's (which holds nothing to compute; a stage of 0
  // layers may be computed all the same).
  std::vector<bool> computes(p.numStages, false);
  for (const Computed &c : computed)
    computes[c.stage] = computes[c.stage] || c.forward;
  std::vector<int32_t> size(p.numStages, 0);
  // The modules a micro-batch must each run one part of.
  std::set<int32_t> required;
  for (int32_t s = 0; s < p.numStages; ++s)
    if (computes[s] || !modules || !p.stageMeta[s].isRegistered()) {
      ++size[root(s)];
      if (modules && computes[s])
        required.insert(p.stageMeta[s].module);
    }
  // One forward per (stage, micro-batch), by micro-batch.
  llvm::erase_if(computed, [](const Computed &c) { return !c.forward; });
  computed.erase(llvm::unique(computed,
                              [](const Computed &x, const Computed &y) {
                                return x.stage == y.stage && x.mb == y.mb;
                              }),
                 computed.end());
  std::stable_sort(
      computed.begin(), computed.end(),
      [](const Computed &x, const Computed &y) { return x.mb < y.mb; });
  std::vector<int32_t> count(p.numStages, 0);
  size_t begin = 0;
  for (int32_t mb = 0; mb < p.numMicrobatches; ++mb) {
    size_t end = begin;
    while (end < computed.size() && computed[end].mb == mb)
      ++end;
    auto name = [&] { return "micro-batch " + std::to_string(mb); };
    if (begin == end)
      return VerifyFailure{
          name() + " is never computed, but the schedule has " +
              std::to_string(p.numMicrobatches) +
              " micro-batches; every one needs its forward and backward on "
              "every stage",
          {}};
    for (size_t i = begin; i < end; ++i)
      ++count[root(computed[i].stage)];
    std::optional<VerifyFailure> failure;
    // Per module the first forward of its part (few modules: a list).
    llvm::SmallVector<std::pair<int32_t, const Computed *>, 4> partOfModule;
    auto partOf = [&](int32_t module) {
      return llvm::find_if(partOfModule,
                           [&](const auto &m) { return m.first == module; });
    };
    for (size_t i = begin; i < end && !failure; ++i) {
      const Computed &c = computed[i];
      const int32_t r = root(c.stage);
      if (count[r] != size[r]) {
        std::ostringstream os;
        os << name() << " runs " << count[r] << " of the " << size[r]
           << " stages connected to stage " << c.stage
           << "; it needs its forward and backward on every one";
        failure = failureAt(c.actor, c.index, os.str());
        break;
      }
      if (!modules)
        continue;
      const int32_t module = p.stageMeta[c.stage].module;
      auto it = partOf(module);
      if (it == partOfModule.end()) {
        partOfModule.push_back({module, &c});
      } else if (root(it->second->stage) != r) {
        std::ostringstream os;
        os << name() << " runs stage " << it->second->stage << " and stage "
           << c.stage << " of module '" << moduleName(p, module)
           << "', which no stage edge connects (two directions of a "
              "bidirectional pipeline); a micro-batch takes one";
        failure = failureAt(c.actor, c.index, os.str());
        failure->at.push_back(
            {it->second->actor, it->second->index, "its other forward"});
      }
    }
    if (failure)
      return failure;
    if (modules && partOfModule.size() != required.size())
      for (int32_t module : required)
        if (partOf(module) == partOfModule.end())
          return failureAt(computed[begin].actor, computed[begin].index,
                           name() + " runs no stage of module '" +
                               moduleName(p, module) +
                               "'; every micro-batch runs each module");
    for (size_t i = begin; i < end; ++i)
      count[root(computed[i].stage)] = 0;
    begin = end;
  }
  return std::nullopt;
}

/// The members of one collective (its kind, stage and micro-batch) name one
/// group and one root: a member that counts another group would let the
/// replay complete an instance the ranks never can.
std::optional<VerifyFailure> checkCollectiveGroups(const Program &p) {
  std::map<std::tuple<int, int32_t, int32_t>, std::pair<int32_t, int32_t>>
      first;
  for (int32_t a = 0; a < p.numActors; ++a)
    for (int32_t i = 0; i < static_cast<int32_t>(p.actors[a].size()); ++i) {
      const ProgOp &op = p.actors[a][i];
      if (!isCollective(op.kind))
        continue;
      auto [it, inserted] = first.try_emplace(
          {static_cast<int>(op.kind), op.stage, op.mb}, std::pair{a, i});
      if (inserted)
        continue;
      auto [fa, fi] = it->second;
      const ProgOp &other = p.actors[fa][fi];
      auto members = [&](const ProgOp &member) {
        std::vector<int32_t> group = p.groups[member.group];
        llvm::sort(group);
        return group;
      };
      const bool sameGroup = members(op) == members(other);
      if (sameGroup && op.peer == other.peer)
        continue;
      auto says = [&](const ProgOp &member) {
        return sameGroup ? "root " + std::to_string(member.peer)
                         : "the group of " + actorList(members(member));
      };
      VerifyFailure failure = failureAt(
          a, i,
          describeOp(p, a, i) + " names " + says(op) + ", but actor " +
              std::to_string(fa) + "'s names " + says(other) +
              "; every member of a collective names the same");
      failure.at.push_back({fa, fi, "the other member"});
      return failure;
    }
  return std::nullopt;
}

/// Every actor of a stage runs its own instance of a runtime operation on
/// the stage's outputs: an exec on an actor that does not compute its stage
/// reads nothing there (and the runtime would count it with the stage's
/// instances elsewhere). Registered stages hold no layers: any actor.
std::optional<VerifyFailure>
checkExecActors(const Program &p, llvm::ArrayRef<Computed> computed) {
  std::set<std::pair<int32_t, int32_t>> runs; // (actor, stage)
  for (const Computed &c : computed)
    runs.insert({c.actor, c.stage});
  const bool modules = static_cast<int32_t>(p.stageMeta.size()) == p.numStages;
  for (int32_t a = 0; a < p.numActors; ++a)
    for (int32_t i = 0; i < static_cast<int32_t>(p.actors[a].size()); ++i) {
      const ProgOp &op = p.actors[a][i];
      if (op.kind != OpKind::Exec ||
          (modules && p.stageMeta[op.stage].isRegistered()) ||
          runs.count({a, op.stage}))
        continue;
      std::vector<int32_t> holders;
      for (const auto &[actor, stage] : runs)
        if (stage == op.stage)
          holders.push_back(actor);
      return failureAt(
          a, i,
          describeOp(p, a, i) + ", but actor " + std::to_string(a) +
              " does not compute stage " + std::to_string(op.stage) + " (" +
              (holders.empty() ? std::string("no actor does")
                               : actorList(holders) +
                                     (holders.size() == 1 ? " does" : " do")) +
              "): every actor of the stage runs its own "
              "instance, on the outputs it computed");
    }
  return std::nullopt;
}

/// Two stages whose messages to a third would share one transfer's name
/// (findMessageClash): located at the third's first computation on the
/// actor that would receive both, with notes at the two senders.
std::optional<VerifyFailure> checkMessageNames(const Program &p) {
  std::optional<MessageClash> clash = findMessageClash(p.edges, stageActors(p));
  if (!clash)
    return std::nullopt;
  const MessageClash &c = *clash;
  auto at = [&](int32_t actor, int32_t stage, bool forward,
                std::string note) -> std::vector<VerifyFailure::At> {
    const std::vector<ProgOp> &ops = p.actors[actor];
    for (int32_t i = 0; i < static_cast<int32_t>(ops.size()); ++i)
      if (ops[i].stage == stage && (forward ? ops[i].kind == OpKind::Fwd
                                            : makesInputGradient(ops[i].kind)))
        return {{actor, i, std::move(note)}};
    return {};
  };
  const std::string pair =
      std::to_string(c.first) + " and " + std::to_string(c.second);
  VerifyFailure failure;
  const std::string stage = "stage " + std::to_string(c.stage);
  failure.message =
      (c.join ? stage + " takes the outputs of stages " + pair + ", which"
              : "stages " + pair + " take the output of " + stage + " and") +
      " both run on actor " + std::to_string(c.actor) + ", while " + stage +
      " runs on actor " + std::to_string(c.peer) +
      ": a transfer names the stage it serves, so the two " +
      (c.join ? "messages" : "gradients sent back") +
      " between one pair of actors could not be told apart; place stages " +
      pair + " on different actors";
  failure.at = at(c.peer, c.stage, c.join, "");
  for (int32_t other : {c.first, c.second})
    for (VerifyFailure::At &note :
         at(c.actor, other, c.join,
            "stage " + std::to_string(other) + " " +
                (c.join ? "computes here" : "sends its gradient from here")))
      failure.at.push_back(std::move(note));
  return failure;
}

/// Operands in range, tokens waited once, every forward with its backward,
/// every micro-batch computed: what verify() checks before replaying. Time
/// and memory grow with the program's computations, not with its stages
/// times micro-batches.
std::optional<VerifyFailure> checkStatic(const Program &p) {
  std::vector<Computed> computed;
  if (auto f = checkOperands(p, computed))
    return f;
  if (auto f = checkCollectiveGroups(p))
    return f;
  if (auto f = checkExecActors(p, computed))
    return f;
  if (auto f = checkPairs(p, computed))
    return f;
  if (auto f = checkMicrobatches(p, computed))
    return f;
  return checkMessageNames(p);
}

/// Builds a ProgramGraph: static matching, then a replay to the end.
class Replay {
public:
  Replay(const Program &program, ChannelRule rule, ProgramGraph &graph,
         bool checkData)
      : p(program), topo(program), rule(rule), g(graph), checkData(checkData) {}
  std::optional<VerifyFailure> run() {
    if (auto f = match())
      return f;
    return replay();
  }

private:
  /// Receives take the sends of their channel in order; waits and
  /// collectives find what they complete.
  std::optional<VerifyFailure> match();
  /// match()'s steps: the graph's per-op arrays; the sends per channel, in
  /// each sender's program order; a collective joins its instance; a wait
  /// finds its post; a receive takes the next send of its channel.
  void indexOps();
  std::optional<VerifyFailure> collectSends();
  void joinInstance(int32_t id, const ProgOp &op);
  void matchWait(int32_t id, const ProgOp &op);
  std::optional<VerifyFailure> matchReceive(int32_t actor, int32_t index);
  VerifyFailure outOfRange(int32_t actor, int32_t index) const;
  /// Runs every actor as far as it can until all are done or blocked.
  std::optional<VerifyFailure> replay();
  std::optional<VerifyFailure> checkInputs(int32_t actor, int32_t index);
  void produce(int32_t actor, const ProgOp &op);
  void deliver(int32_t actor, int32_t send);
  /// A collective completed on `actor`: an all_gather's result is there.
  void gathered(int32_t actor, const ProgOp &collective) {
    if (collective.kind == OpKind::AllGather && collective.stage >= 0 &&
        collective.stage < p.numStages && collective.mb >= 0 &&
        collective.mb < p.numMicrobatches)
      have[actor].insert(Gathered, collective.stage, collective.mb);
  }
  std::optional<VerifyFailure> deadlock();
  VerifyFailure mismatch(int32_t recv, int32_t send) const;

  /// The channel of messages from `src` to `dst` of one kind sent by stage
  /// `senderStage` (per actor pair: every message from `src` to `dst`);
  /// -1 when nothing was sent on it.
  int32_t findChannel(int32_t src, int32_t dst, bool grad,
                      int32_t senderStage) const {
    auto it = channels.find(channelKey(src, dst, grad, senderStage));
    return it == channels.end() ? -1 : it->second;
  }
  uint64_t channelKey(int32_t src, int32_t dst, bool grad,
                      int32_t senderStage) const {
    if (rule == ChannelRule::PerPair) {
      grad = false;
      senderStage = 0;
    }
    return ((static_cast<uint64_t>(src) * p.numActors + dst) * 2 +
            (grad ? 1 : 0))
               << 32 |
           static_cast<uint32_t>(senderStage);
  }
  int32_t opId(int32_t actor, int32_t index) const {
    return g.actorBegin[actor] + index;
  }
  const ProgOp &opAt(int32_t id) const { return g.op(p, id); }
  /// The actor a blocked actor waits for.
  int32_t waitsFor(int32_t actor) const;
  int32_t blockedCollective(int32_t actor) const;
  std::string mismatchedCollectives(llvm::ArrayRef<int32_t> cycle) const;

  const Program &p;
  Topology topo;
  ChannelRule rule;
  ProgramGraph &g;
  bool checkData;
  const std::vector<int32_t> &actorOf = g.actorOf; ///< (indexOps fills it)

  llvm::DenseMap<uint64_t, int32_t> channels;
  std::vector<std::vector<int32_t>> channelSends; // send op ids, in order
  std::vector<int32_t> consumed; ///< per channel: sends taken by receives
  /// Collective instances by (kind, stage, micro-batch), and the last
  /// member found of each.
  std::map<std::tuple<int, int32_t, int32_t>, int32_t> instances;
  std::vector<int32_t> lastMember;
  /// Collectives: per instance the number of members that must arrive, and
  /// how many have.
  std::vector<int32_t> instanceOf, instanceSize, instanceArrived;
  /// Asynchronous transfers and collectives by token: the posting op; for
  /// a receive's token, the send that its wait takes.
  std::vector<int32_t> postOfToken, sendOfToken;
  /// Receives (or waits of asynchronous ones) that no send matches: they
  /// block the replay for good.
  std::vector<uint8_t> unmatched;
  /// Receives whose message is for another receive.
  std::vector<uint8_t> mismatched;
  std::vector<Facts> have;
  std::vector<uint8_t> done;
  /// Per send or receive: the actor blocked until it runs, or -1 (the
  /// receiver of a send, the sender waiting on a send for its receive).
  std::vector<int32_t> waiterOn;
  /// Per collective member: whether it has arrived.
  std::vector<uint8_t> arrived;
  /// After a replay that did not finish: each actor's position.
  std::vector<int32_t> blockedAt;
};

std::optional<VerifyFailure> Replay::match() {
  indexOps();
  if (auto failure = collectSends())
    return failure;
  // Receives take the next send of their channel; a receive whose channel
  // has no send left stays unmatched and blocks the replay.
  consumed.assign(channelSends.size(), 0);
  for (int32_t a = 0; a < p.numActors; ++a)
    for (int32_t i = 0; i < static_cast<int32_t>(p.actors[a].size()); ++i) {
      const ProgOp &op = p.actors[a][i];
      const int32_t id = opId(a, i);
      if (op.token >= 0 && (isTransfer(op.kind) || isCollective(op.kind))) {
        if (op.token >= static_cast<int32_t>(postOfToken.size())) {
          postOfToken.resize(op.token + 1, -1);
          sendOfToken.resize(op.token + 1, -1);
        }
        postOfToken[op.token] = id;
      }
      if (isCollective(op.kind))
        joinInstance(id, op);
      else if (op.kind == OpKind::Wait)
        matchWait(id, op);
      else if (isReceive(op.kind))
        if (auto failure = matchReceive(a, i))
          return failure;
    }
  // Instances without a declared group complete when every member present
  // in the programs has arrived.
  for (int32_t id = 0; id < g.numOps(); ++id)
    if (instanceOf[id] >= 0 && g.groupFirst[id] == id &&
        instanceSize[instanceOf[id]] == 0)
      for (int32_t m = id; m >= 0; m = g.groupNext[m])
        ++instanceSize[instanceOf[id]];
  return std::nullopt;
}

void Replay::indexOps() {
  const int32_t n = p.numActors;
  g.actorBegin.assign(n + 1, 0);
  g.actorOf.clear();
  for (int32_t a = 0; a < n; ++a) {
    const int32_t size = static_cast<int32_t>(p.actors[a].size());
    g.actorBegin[a + 1] = g.actorBegin[a] + size;
    g.actorOf.insert(g.actorOf.end(), size, a);
  }
  const int32_t numOps = g.numOps();
  g.dependsOn.assign(numOps, -1);
  g.postedBy.assign(numOps, -1);
  g.groupFirst.assign(numOps, -1);
  g.groupNext.assign(numOps, -1);
  g.waitsPost.assign(numOps, -1);
  g.waitsSend.assign(numOps, -1);
  g.takenBy.assign(numOps, -1);
  instanceOf.assign(numOps, -1);
  unmatched.assign(numOps, 0);
  mismatched.assign(numOps, 0);
}

VerifyFailure Replay::outOfRange(int32_t actor, int32_t index) const {
  return failureAt(actor, index,
                   describeOp(p, actor, index) + " is out of range");
}

std::optional<VerifyFailure> Replay::collectSends() {
  channels.reserve(4 * static_cast<size_t>(p.numStages) + 16);
  for (int32_t a = 0; a < p.numActors; ++a)
    for (int32_t i = 0; i < static_cast<int32_t>(p.actors[a].size()); ++i) {
      const ProgOp &op = p.actors[a][i];
      if (!isSend(op.kind))
        continue;
      if (op.peer < 0 || op.peer >= p.numActors || op.stage < 0 ||
          op.stage >= p.numStages)
        return outOfRange(a, i);
      // A message goes to an actor that runs a stage next to the sender's
      // (a send to another was reported as a deadlock at other ops).
      const bool grad = op.kind == OpKind::SendGrad;
      const auto &next = grad ? topo.preds[op.stage] : topo.succs[op.stage];
      if (llvm::none_of(next, [&](int32_t s) {
            return std::binary_search(topo.actorsOf[s].begin(),
                                      topo.actorsOf[s].end(), op.peer);
          }))
        return failureAt(
            a, i,
            describeOp(p, a, i) + " sends to actor " + std::to_string(op.peer) +
                ", which runs no stage " + (grad ? "before" : "after") +
                " stage " + std::to_string(op.stage) +
                " that would take the message");
      auto [it, inserted] = channels.try_emplace(
          channelKey(a, op.peer, op.kind == OpKind::SendGrad, op.stage),
          static_cast<int32_t>(channelSends.size()));
      if (inserted)
        channelSends.emplace_back();
      channelSends[it->second].push_back(opId(a, i));
    }
  return std::nullopt;
}

void Replay::joinInstance(int32_t id, const ProgOp &op) {
  auto [it, inserted] =
      instances.try_emplace({static_cast<int>(op.kind), op.stage, op.mb},
                            static_cast<int32_t>(instanceSize.size()));
  if (inserted) {
    const bool declared =
        op.group >= 0 && op.group < static_cast<int32_t>(p.groups.size());
    instanceSize.push_back(
        declared ? static_cast<int32_t>(p.groups[op.group].size()) : 0);
    instanceArrived.push_back(0);
    lastMember.push_back(-1);
  }
  const int32_t inst = it->second;
  instanceOf[id] = inst;
  if (lastMember[inst] < 0) {
    g.groupFirst[id] = id;
  } else {
    g.groupFirst[id] = g.groupFirst[lastMember[inst]];
    g.groupNext[lastMember[inst]] = id;
  }
  lastMember[inst] = id;
}

void Replay::matchWait(int32_t id, const ProgOp &op) {
  if (op.token < 0 || op.token >= static_cast<int32_t>(postOfToken.size()))
    return; // an exec's token, or one never posted: complete at once
  const int32_t post = postOfToken[op.token];
  if (post < 0)
    return;
  if (isSend(opAt(post).kind)) {
    g.waitsSend[id] = post; // the replay finds the receive that takes it
    return;
  }
  if (isCollective(opAt(post).kind)) {
    g.waitsPost[id] = post;
    return;
  }
  g.dependsOn[id] = sendOfToken[op.token];
  g.postedBy[id] = post;
  unmatched[id] = g.dependsOn[id] < 0;
}

std::optional<VerifyFailure> Replay::matchReceive(int32_t a, int32_t i) {
  const ProgOp &op = p.actors[a][i];
  const int32_t id = opId(a, i);
  if (op.peer < 0 || op.peer >= p.numActors || op.stage < 0 ||
      op.stage >= p.numStages)
    return outOfRange(a, i);
  // A receive names the stage it receives for, on its own actor.
  if (const auto &own = topo.actorsOf[op.stage];
      !std::binary_search(own.begin(), own.end(), a))
    return failureAt(a, i,
                     describeOp(p, a, i) + " receives for stage " +
                         std::to_string(op.stage) + ", which actor " +
                         std::to_string(a) + " does not compute");
  const bool grad = op.kind == OpKind::RecvGrad;
  int32_t ch = -1;
  if (rule == ChannelRule::PerPair) {
    ch = findChannel(op.peer, a, grad, 0);
  } else {
    // The channel from a stage next to this one that runs on the peer; with
    // several, the one whose next message is for this micro-batch.
    bool adjacent = false;
    for (int32_t sender : grad ? topo.succs[op.stage] : topo.preds[op.stage]) {
      const auto &actors = topo.actorsOf[sender];
      if (!std::binary_search(actors.begin(), actors.end(), op.peer))
        continue;
      adjacent = true;
      const int32_t c = findChannel(op.peer, a, grad, sender);
      if (c < 0 || consumed[c] >= static_cast<int32_t>(channelSends[c].size()))
        continue;
      if (ch < 0)
        ch = c;
      if (opAt(channelSends[c][consumed[c]]).mb == op.mb) {
        ch = c;
        break;
      }
    }
    if (!adjacent)
      return failureAt(a, i,
                       describeOp(p, a, i) + " expects a message from actor " +
                           std::to_string(op.peer) +
                           ", which runs no stage adjacent to stage " +
                           std::to_string(op.stage));
  }
  if (ch < 0 || consumed[ch] >= static_cast<int32_t>(channelSends[ch].size())) {
    unmatched[id] = op.token < 0; // the replay diagnoses the wait
    return std::nullopt;
  }
  const int32_t send = channelSends[ch][consumed[ch]++];
  const ProgOp &msg = opAt(send);
  const bool msgGrad = msg.kind == OpKind::SendGrad;
  const bool matches = msg.mb == op.mb && msgGrad == grad &&
                       (grad ? topo.hasEdge(op.stage, msg.stage)
                             : topo.hasEdge(msg.stage, op.stage));
  // A mismatch is reported when the replay delivers the message, so that
  // the first one to happen is named.
  mismatched[id] = !matches;
  g.takenBy[send] = id;
  if (op.token >= 0) {
    sendOfToken[op.token] = send; // its wait takes the message
  } else {
    g.dependsOn[id] = send;
    g.postedBy[id] = id;
  }
  return std::nullopt;
}

void Replay::produce(int32_t actor, const ProgOp &op) {
  auto &h = have[actor];
  // A shared stage's slice, as the actor's own (Topology::fwdSlices).
  auto slice = [&](Tag tag) {
    if (topo.shared[op.stage])
      h.insert(tag, slicePlace(op.stage, actor), op.mb);
  };
  if (op.kind == OpKind::Fwd) {
    h.insert(FwdDone, op.stage, op.mb);
    h.insert(Act, op.stage, op.mb);
    slice(Act);
  } else if (makesInputGradient(op.kind)) {
    if (op.kind == OpKind::Igrad)
      h.insert(IgDone, op.stage, op.mb);
    h.insert(Grad, op.stage, op.mb);
    slice(Grad);
  }
}

void Replay::deliver(int32_t actor, int32_t send) {
  const ProgOp &msg = opAt(send);
  const Tag tag = msg.kind == OpKind::SendGrad ? Grad : Act;
  have[actor].insert(tag, msg.stage, msg.mb);
  if (topo.shared[msg.stage])
    have[actor].insert(tag, slicePlace(msg.stage, actorOf[send]), msg.mb);
}

/// Every input of the computation or send at (actor, index) is available
/// there.
std::optional<VerifyFailure> Replay::checkInputs(int32_t actor, int32_t index) {
  const ProgOp &op = p.actors[actor][index];
  const auto &h = have[actor];
  auto missing = [&](const std::string &what) {
    return failureAt(actor, index,
                     describeOp(p, actor, index) + " runs before " + what +
                         "; every dependency must be satisfied in program "
                         "order");
  };
  auto stageMb = [&](const char *what, int32_t stage) {
    std::ostringstream os;
    os << what << " stage " << stage << " mb " << op.mb;
    return os.str();
  };
  // The output `tag` (and every slice of it, where a stage has slices) of
  // each of `stages` is here.
  auto available = [&](Tag tag, const std::vector<int32_t> &stages,
                       const char *what) -> std::optional<VerifyFailure> {
    const auto &slices = tag == Act ? topo.fwdSlices : topo.bwdSlices;
    for (int32_t stage : stages) {
      // From another actor in a program without any transfer: one before
      // communication was inserted.
      auto computes = [&](const ProgOp &o) {
        return isCompute(o.kind) && o.stage == stage;
      };
      auto transfers = [](const std::vector<ProgOp> &ops) {
        return llvm::any_of(ops,
                            [](const ProgOp &o) { return isTransfer(o.kind); });
      };
      if (!h.count(tag, stage, op.mb))
        return missing(stageMb(what, stage) + " is computed or received here" +
                       (llvm::any_of(p.actors[actor], computes) ||
                                llvm::any_of(p.actors, transfers)
                            ? ""
                            : " (the program has no sends or receives: insert "
                              "communication first, -flexpipe-insert-comm)"));
      auto it = slices.find({stage, op.mb});
      if (it != slices.end())
        for (int32_t x : it->second)
          if (!h.count(tag, slicePlace(stage, x), op.mb))
            return missing(stageMb(what, stage) + " (the slice of actor " +
                           std::to_string(x) +
                           ") is computed or received here");
    }
    return std::nullopt;
  };
  switch (op.kind) {
  case OpKind::Fwd:
    if (auto f = available(Act, topo.preds[op.stage], "the activation of"))
      return f;
    break;
  case OpKind::Bwd:
  case OpKind::Igrad:
    if (!h.count(FwdDone, op.stage, op.mb))
      return missing(stageMb("the fwd of", op.stage));
    if (topo.vocabHead[op.stage] && !h.count(Gathered, op.stage, op.mb))
      return missing(
          stageMb("the all_gather of the loss statistics of", op.stage) +
          " (a vocabulary-parallel head's slices exchange them) completes "
          "here");
    if (auto f = available(Grad, topo.succs[op.stage], "the gradient from"))
      return f;
    break;
  case OpKind::Wgrad:
    if (!h.count(IgDone, op.stage, op.mb))
      return missing(stageMb("the igrad of", op.stage));
    break;
  case OpKind::SendAct:
    if (!h.count(FwdDone, op.stage, op.mb))
      return missing(stageMb("the fwd of", op.stage) + " that it sends");
    break;
  case OpKind::SendGrad:
    if (!h.count(Grad, op.stage, op.mb) || !h.count(FwdDone, op.stage, op.mb))
      return missing(stageMb("the gradient of", op.stage) + " that it sends");
    break;
  case OpKind::AllGather:
    // A vocabulary-parallel head's slices exchange its loss statistics.
    if (op.stage >= 0 && op.stage < p.numStages && topo.vocabHead[op.stage] &&
        !h.count(FwdDone, op.stage, op.mb))
      return missing(stageMb("the fwd of", op.stage) +
                     ", whose loss statistics it exchanges");
    break;
  default:
    break;
  }
  return std::nullopt;
}

std::optional<VerifyFailure> Replay::replay() {
  const int32_t n = p.numActors;
  const int32_t numOps = g.numOps();
  if (checkData) {
    have.assign(n, Facts(std::max(1, p.numMicrobatches)));
  }
  done.assign(numOps, 0);
  waiterOn.assign(numOps, -1);
  arrived.assign(numOps, 0);

  std::vector<int32_t> pc(n), worklist(n);
  for (int32_t a = 0; a < n; ++a) {
    pc[a] = g.actorBegin[a];
    worklist[a] = n - 1 - a;
  }
  std::vector<uint8_t> queued(n, 1);
  auto wake = [&](int32_t actor) {
    if (!queued[actor]) {
      queued[actor] = 1;
      worklist.push_back(actor);
    }
  };
  // A collective member arrives; the arrival that completes the instance
  // wakes every member.
  auto arrive = [&](int32_t id) {
    if (arrived[id])
      return;
    arrived[id] = 1;
    const int32_t inst = instanceOf[id];
    if (++instanceArrived[inst] == instanceSize[inst]) {
      for (int32_t m = g.groupFirst[id]; m >= 0; m = g.groupNext[m])
        wake(actorOf[m]);
    }
  };
  auto complete = [&](int32_t inst) {
    return instanceArrived[inst] >= instanceSize[inst];
  };
  // Op `on` has run; otherwise actor a waits until it does.
  auto after = [&](int32_t a, int32_t on) {
    if (done[on])
      return true;
    waiterOn[on] = a;
    return false;
  };
  // A receive, or the wait of an asynchronous one, can take its message.
  auto ready = [&](int32_t a, int32_t id) {
    if (unmatched[id])
      return false;
    const int32_t send = g.dependsOn[id];
    return send < 0 || after(a, send);
  };

  while (!worklist.empty()) {
    const int32_t a = worklist.back();
    worklist.pop_back();
    queued[a] = 0;
    for (; pc[a] < g.actorBegin[a + 1]; ++pc[a]) {
      const int32_t id = pc[a];
      const int32_t i = id - g.actorBegin[a];
      const ProgOp &op = p.actors[a][i];
      // (Only computations, sends and all_gathers have inputs to check, and
      // only computations produce.)
      if (checkData) {
        if (auto f = checkInputs(a, i))
          return f;
        produce(a, op);
      }
      bool advance = true;
      switch (op.kind) {
      case OpKind::RecvAct:
      case OpKind::RecvGrad:
      case OpKind::Wait: {
        if (op.kind == OpKind::Wait && g.waitsPost[id] >= 0) {
          advance = complete(instanceOf[g.waitsPost[id]]);
          if (advance && checkData)
            gathered(a, opAt(g.waitsPost[id]));
          break;
        }
        if (const int32_t send = g.waitsSend[id]; send >= 0) {
          // Delivered once its receive is posted; never, without one.
          const int32_t recv = g.takenBy[send];
          advance = recv >= 0 && after(a, recv);
          break;
        }
        if (op.token >= 0 && op.kind != OpKind::Wait)
          break; // posted; its wait takes the message
        advance = ready(a, id);
        const int32_t send = g.dependsOn[id];
        if (!advance || send < 0)
          break;
        if (mismatched[g.postedBy[id]])
          return mismatch(g.postedBy[id], send);
        if (checkData)
          deliver(a, send);
        break;
      }
      case OpKind::AllGather:
      case OpKind::Gather:
        arrive(id);
        advance = op.token >= 0 || complete(instanceOf[id]);
        if (advance && op.token < 0 && checkData)
          gathered(a, op);
        break;
      default:
        break;
      }
      if (!advance)
        break;
      done[id] = 1;
      if (waiterOn[id] >= 0)
        wake(waiterOn[id]);
    }
  }
  for (int32_t a = 0; a < n; ++a)
    if (pc[a] < g.actorBegin[a + 1]) {
      for (int32_t b = 0; b < n; ++b)
        blockedAt.push_back(pc[b] - g.actorBegin[b]);
      return deadlock();
    }
  // The runtimes end an iteration by waiting until every send is delivered.
  for (int32_t id = 0; id < numOps; ++id)
    if (isSend(opAt(id).kind) && g.takenBy[id] < 0) {
      const int32_t a = actorOf[id], i = id - g.actorBegin[a];
      return failureAt(a, i,
                       describeOp(p, a, i) + " is never received: actor " +
                           std::to_string(opAt(id).peer) +
                           " posts no receive for it, and an iteration ends "
                           "when every send has been delivered");
    }
  return std::nullopt;
}

VerifyFailure Replay::mismatch(int32_t recv, int32_t send) const {
  const int32_t a = actorOf[recv], i = recv - g.actorBegin[a];
  const int32_t sender = actorOf[send], sendIndex = send - g.actorBegin[sender];
  VerifyFailure f = failureAt(
      a, i,
      describeOp(p, a, i) + " would receive the message of " +
          describeOp(p, sender, sendIndex) +
          (rule == ChannelRule::PerPair
               ? ": without tags, the receives an actor posts for a peer "
                 "must come in the order of that peer's sends"
               : ": sends and receives between two actors must match one "
                 "to one and in the same order"));
  f.at.push_back({sender, sendIndex, "the send it would match"});
  return f;
}

int32_t Replay::waitsFor(int32_t a) const {
  const int32_t id = g.actorBegin[a] + blockedAt[a];
  const ProgOp &op = p.actors[a][blockedAt[a]];
  if (isReceive(op.kind))
    return op.peer;
  int32_t collective = id;
  if (op.kind == OpKind::Wait) {
    if (g.waitsSend[id] >= 0)
      return opAt(g.waitsSend[id]).peer; // for the receive
    if (g.waitsPost[id] < 0) {
      const ProgOp &post =
          opAt(g.postedBy[id] >= 0 ? g.postedBy[id] : postOfToken[op.token]);
      return post.peer;
    }
    collective = g.waitsPost[id];
  }
  // A collective: the first member that has not arrived.
  const ProgOp &c = opAt(collective);
  std::vector<int32_t> present;
  for (int32_t m = g.groupFirst[collective]; m >= 0; m = g.groupNext[m])
    if (arrived[m])
      present.push_back(actorOf[m]);
  std::vector<int32_t> members;
  if (c.group >= 0 && c.group < static_cast<int32_t>(p.groups.size()))
    members = p.groups[c.group];
  else
    for (int32_t m = g.groupFirst[collective]; m >= 0; m = g.groupNext[m])
      members.push_back(actorOf[m]);
  for (int32_t member : members)
    if (std::find(present.begin(), present.end(), member) == present.end())
      return member;
  return a;
}

/// The collective a blocked actor is held at (its op, or the one its wait
/// completes), as a global op id; -1 when it waits for something else.
int32_t Replay::blockedCollective(int32_t a) const {
  const int32_t id = g.actorBegin[a] + blockedAt[a];
  const ProgOp &op = p.actors[a][blockedAt[a]];
  if (isCollective(op.kind))
    return id;
  if (op.kind == OpKind::Wait && g.waitsSend[id] < 0 && g.waitsPost[id] >= 0)
    return g.waitsPost[id];
  return -1;
}

/// In a cycle, two actors held at collectives of one stage and micro-batch
/// but of different kinds (an all_gather meeting a gather): a mistake, not
/// an ordering problem; says so, or "".
std::string Replay::mismatchedCollectives(llvm::ArrayRef<int32_t> cycle) const {
  for (size_t i = 0; i < cycle.size(); ++i)
    for (size_t j = i + 1; j < cycle.size(); ++j) {
      const int32_t x = blockedCollective(cycle[i]);
      const int32_t y = blockedCollective(cycle[j]);
      if (x < 0 || y < 0)
        continue;
      const ProgOp &u = opAt(x), &v = opAt(y);
      if (u.kind == v.kind || u.stage != v.stage || u.mb != v.mb)
        continue;
      return ": actor " + std::to_string(cycle[i]) + " runs " +
             std::string(opKindName(u.kind)) + " and actor " +
             std::to_string(cycle[j]) + " runs " + opKindName(v.kind) +
             " of stage " + std::to_string(u.stage) + " mb " +
             std::to_string(u.mb) +
             "; every member of a collective runs the same kind";
    }
  return {};
}

/// Follows wait-for edges from a blocked actor to a cycle (or to an actor
/// that finished without sending what is awaited).
std::optional<VerifyFailure> Replay::deadlock() {
  const int32_t n = p.numActors;
  auto blocked = [&](int32_t a) {
    return blockedAt[a] < static_cast<int32_t>(p.actors[a].size());
  };
  int32_t start = 0;
  while (!blocked(start))
    ++start;
  std::vector<int32_t> chain, seenAt(n, -1);
  int32_t a = start;
  while (a >= 0 && a < n && blocked(a) && seenAt[a] < 0) {
    seenAt[a] = static_cast<int32_t>(chain.size());
    chain.push_back(a);
    a = waitsFor(a);
  }
  VerifyFailure f;
  if (a >= 0 && a < n && blocked(a) && seenAt[a] >= 0) {
    std::ostringstream os;
    os << "the programs deadlock: actors";
    for (size_t i = seenAt[a]; i < chain.size(); ++i)
      os << ' ' << chain[i];
    os << " wait for each other in a cycle";
    os << mismatchedCollectives(
        llvm::ArrayRef<int32_t>(chain).drop_front(seenAt[a]));
    f.message = os.str();
    for (size_t i = seenAt[a]; i < chain.size(); ++i) {
      const int32_t actor = chain[i];
      f.at.push_back({actor, blockedAt[actor],
                      "actor " + std::to_string(actor) +
                          " waits here for actor " +
                          std::to_string(waitsFor(actor))});
    }
    return f;
  }
  const int32_t last = chain.back();
  const int32_t send = g.waitsSend[g.actorBegin[last] + blockedAt[last]];
  if (send >= 0 && g.takenBy[send] < 0) {
    const int32_t sender = actorOf[send];
    return failureAt(
        last, blockedAt[last],
        "the wait for " + describeOp(p, sender, send - g.actorBegin[sender]) +
            " never completes: actor " + std::to_string(opAt(send).peer) +
            " posts no receive for it");
  }
  return failureAt(last, blockedAt[last],
                   describeOp(p, last, blockedAt[last]) + " waits for actor " +
                       std::to_string(waitsFor(last)) +
                       ", which finishes its program without providing it");
}

} // namespace

flexpipe::sched::HappensBefore::HappensBefore(const Program &program,
                                              const ProgramGraph &graph)
    : graph(graph) {
  const int32_t n = graph.numOps();
  // An asynchronous collective's posts stay apart; each wait comes after
  // all of them.
  node.resize(n);
  blockingInstance.assign(n, 0);
  for (size_t a = 0; a < program.actors.size(); ++a)
    for (size_t i = 0; i < program.actors[a].size(); ++i) {
      const int32_t op = graph.actorBegin[a] + static_cast<int32_t>(i);
      const int32_t first = graph.groupFirst[op];
      const bool blocking = first >= 0 && program.actors[a][i].token < 0;
      node[op] = blocking ? first : op;
      blockingInstance[node[op]] |= blocking;
    }
  // The edges, counted and then placed (compressed rows).
  std::vector<std::pair<int32_t, int32_t>> edges;
  for (size_t a = 0; a + 1 < graph.actorBegin.size(); ++a)
    for (int32_t op = graph.actorBegin[a]; op < graph.actorBegin[a + 1]; ++op) {
      auto edge = [&](int32_t from) {
        if (node[from] != node[op])
          edges.push_back({node[from], node[op]});
      };
      if (op > graph.actorBegin[a])
        edge(op - 1);
      if (graph.dependsOn[op] >= 0)
        edge(graph.dependsOn[op]);
      if (graph.waitsPost[op] >= 0)
        for (int32_t m = graph.groupFirst[graph.waitsPost[op]]; m >= 0;
             m = graph.groupNext[m])
          edge(m);
    }
  flexpipe::buildCompressedRows(
      n,
      [&](auto &&edge) {
        for (auto [from, to] : edges)
          edge(from, to);
      },
      successorBegin, successors);
  std::vector<int32_t> pending(n, 0);
  for (int32_t to : successors)
    ++pending[to];
  // Kahn's order over the nodes (the replay that built the graph ran the
  // programs to their end, so they form no cycle).
  for (int32_t op = 0; op < n; ++op)
    if (node[op] == op && pending[op] == 0)
      order.push_back(op);
  for (size_t k = 0; k < order.size(); ++k)
    for (int32_t i = successorBegin[order[k]]; i < successorBegin[order[k] + 1];
         ++i)
      if (--pending[successors[i]] == 0)
        order.push_back(successors[i]);
  place.assign(n, 0);
  for (size_t k = 0; k < order.size(); ++k)
    place[order[k]] = static_cast<int32_t>(k);
  for (int32_t op = 0; op < n; ++op)
    place[op] = place[node[op]];
}

void flexpipe::sched::HappensBefore::lastOf(int32_t actor,
                                            std::vector<int32_t> &last) const {
  const int32_t n = graph.numOps();
  const int32_t begin = graph.actorBegin[actor],
                end = graph.actorBegin[actor + 1];
  auto mine = [&](int32_t op) { return op >= begin && op < end ? op : -1; };
  last.assign(n, -1);
  // Nodes before the actor's first one in the order have nothing of it
  // before them.
  size_t from = order.size();
  for (int32_t op = begin; op < end; ++op)
    from = std::min<size_t>(from, place[op]);
  for (size_t k = from; k < order.size(); ++k) {
    const int32_t v = order[k];
    last[v] = std::max(last[v], mine(v));
    if (blockingInstance[v]) // every member
      for (int32_t m = v; m >= 0; m = graph.groupNext[m])
        last[v] = std::max(last[v], mine(m));
    for (int32_t i = successorBegin[v]; i < successorBegin[v + 1]; ++i)
      last[successors[i]] = std::max(last[successors[i]], last[v]);
  }
  for (int32_t op = 0; op < n; ++op)
    if (node[op] != op)
      last[op] = last[node[op]];
}

std::optional<VerifyFailure> flexpipe::sched::buildGraph(const Program &program,
                                                         ChannelRule rule,
                                                         ProgramGraph &graph,
                                                         bool checkData) {
  if (auto f = checkShape(program))
    return f;
  return Replay(program, rule, graph, checkData).run();
}

std::optional<VerifyFailure>
flexpipe::sched::verifyComputations(const Program &program) {
  if (auto f = checkShape(program))
    return f;
  return checkStatic(program);
}

std::optional<VerifyFailure> flexpipe::sched::verify(const Program &program,
                                                     ChannelRule rule) {
  if (auto f = verifyComputations(program))
    return f;
  ProgramGraph graph;
  return buildGraph(program, rule, graph, /*checkData=*/true);
}

std::vector<TransferPair>
flexpipe::sched::mirroredTransferPairs(const Program &program,
                                       const ProgramGraph &graph) {
  const int32_t numOps = graph.numOps();
  const std::vector<int32_t> &actorOf = graph.actorOf;
  std::vector<int32_t> takes(numOps, -1);
  // Per receive (or asynchronous post): the send whose message it takes.
  for (int32_t id = 0; id < numOps; ++id)
    if (graph.takenBy[id] >= 0)
      takes[graph.takenBy[id]] = id;
  auto opAt = [&](int32_t id) -> const ProgOp & {
    return graph.op(program, id);
  };
  // Ops id and id + 1 of one actor: a send and a receive with one peer, a
  // blocking receive not first. Returns the send, or -1.
  auto pairSend = [&](int32_t id) {
    if (id < 0 || id + 1 >= graph.actorBegin[actorOf[id] + 1])
      return -1;
    const ProgOp &x = opAt(id), &y = opAt(id + 1);
    if (x.peer != y.peer || x.peer < 0)
      return -1;
    if (isSend(x.kind) && isReceive(y.kind))
      return id;
    if (isReceive(x.kind) && x.token >= 0 && isSend(y.kind))
      return id + 1;
    return -1;
  };
  std::vector<uint8_t> claimed(numOps, 0);
  std::vector<TransferPair> pairs;
  for (int32_t id = 0; id < numOps; ++id) {
    const int32_t send = pairSend(id);
    if (send < 0 || claimed[id] || claimed[id + 1])
      continue;
    const int32_t recv = send == id ? id + 1 : id;
    // The peer's receive of our send and its send of our receive.
    const int32_t theirRecv = graph.takenBy[send], theirSend = takes[recv];
    if (theirRecv < 0 || theirSend < 0 ||
        actorOf[theirRecv] != actorOf[theirSend])
      continue;
    const int32_t first = std::min(theirRecv, theirSend);
    if (std::max(theirRecv, theirSend) != first + 1 || pairSend(first) < 0 ||
        claimed[first] || claimed[first + 1])
      continue;
    for (int32_t op : {id, id + 1, first, first + 1})
      claimed[op] = 1;
    pairs.push_back({actorOf[id], id - graph.actorBegin[actorOf[id]]});
    pairs.push_back({actorOf[first], first - graph.actorBegin[actorOf[first]]});
  }
  return pairs;
}

int32_t flexpipe::sched::nextFreeToken(const Program &program) {
  int32_t next = 0;
  for (const std::vector<ProgOp> &ops : program.actors)
    for (const ProgOp &op : ops)
      next = std::max(next, op.token + 1);
  return next;
}

int64_t flexpipe::sched::postReceivesEarly(Program &program,
                                           int64_t lookahead) {
  int32_t nextToken = nextFreeToken(program);
  int64_t changed = 0;
  for (std::vector<ProgOp> &ops : program.actors) {
    // Where each computation is, and how many precede each op.
    std::vector<size_t> computations, before(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      before[i] = computations.size();
      if (isCompute(ops[i].kind))
        computations.push_back(i);
    }
    // Per op: the posts that go right before it, in receive order.
    std::vector<std::vector<ProgOp>> postsBefore(ops.size());
    std::vector<int32_t> waitFor(ops.size(), -1);
    // Per peer: just after its last receive that was asynchronous already,
    // the earliest a later post from it may go.
    std::map<int32_t, size_t> afterPosted;
    int64_t posted = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      const ProgOp &op = ops[i];
      if (!isReceive(op.kind))
        continue;
      if (op.token >= 0) {
        afterPosted[op.peer] = i + 1;
        continue;
      }
      const size_t n = before[i];
      const size_t back = static_cast<size_t>(lookahead);
      size_t at = n == 0 ? i : computations[n >= back ? n - back : 0];
      if (auto it = afterPosted.find(op.peer); it != afterPosted.end())
        at = std::max(at, it->second);
      ProgOp post = op; // keeps the receive's source, for its location
      post.token = nextToken++;
      waitFor[i] = post.token;
      postsBefore[at].push_back(post);
      ++posted;
    }
    if (posted == 0)
      continue;
    changed += posted;
    std::vector<ProgOp> out;
    out.reserve(ops.size() + static_cast<size_t>(posted));
    for (size_t i = 0; i < ops.size(); ++i) {
      out.insert(out.end(), postsBefore[i].begin(), postsBefore[i].end());
      // (A wait as readSchedule reads a flexpipe.wait.)
      out.push_back(waitFor[i] < 0 ? ops[i]
                                   : waitOp(waitFor[i], ops[i].source));
    }
    ops = std::move(out);
  }
  return changed;
}
