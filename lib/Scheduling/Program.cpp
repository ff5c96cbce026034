//===- Program.cpp - Communication insertion and schedule verification ----===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Scheduling/Program.h"

#include <algorithm>
#include <deque>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

using namespace flexpipe::sched;

const char *flexpipe::sched::opKindName(OpKind kind) {
  switch (kind) {
  case OpKind::Fwd:
    return "fwd";
  case OpKind::Bwd:
    return "bwd";
  case OpKind::Igrad:
    return "igrad";
  case OpKind::Wgrad:
    return "wgrad";
  case OpKind::SendAct:
    return "send_act";
  case OpKind::RecvAct:
    return "recv_act";
  case OpKind::SendGrad:
    return "send_grad";
  case OpKind::RecvGrad:
    return "recv_grad";
  case OpKind::AllGather:
    return "all_gather";
  case OpKind::Gather:
    return "gather";
  case OpKind::Exec:
    return "exec";
  case OpKind::Wait:
    return "wait";
  }
  return "?";
}

const char *flexpipe::sched::opLetter(OpKind kind) {
  switch (kind) {
  case OpKind::Fwd:
    return "F";
  case OpKind::Bwd:
    return "B";
  case OpKind::Igrad:
    return "I";
  case OpKind::Wgrad:
    return "W";
  case OpKind::SendAct:
    return "SEND_F";
  case OpKind::RecvAct:
    return "RECV_F";
  case OpKind::SendGrad:
    return "SEND_B";
  case OpKind::RecvGrad:
    return "RECV_B";
  default:
    return nullptr;
  }
}

OpKind flexpipe::sched::toOpKind(CompKind kind) {
  switch (kind) {
  case CompKind::Fwd:
    return OpKind::Fwd;
  case CompKind::Bwd:
    return OpKind::Bwd;
  case CompKind::Igrad:
    return OpKind::Igrad;
  case CompKind::Wgrad:
    return OpKind::Wgrad;
  }
  return OpKind::Fwd;
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
          ProgOp wait{OpKind::Wait};
          wait.token = token;
          out.push_back(wait);
          it = open.erase(it);
        } else {
          ++it;
        }
      }
      out.push_back(
          ProgOp{toOpKind(item.kind), problem.parts[item.part].stage, item.mb});
    }
    for (auto [r, first, token] : open) {
      ProgOp wait{OpKind::Wait};
      wait.token = token;
      out.push_back(wait);
    }
  }
  return program;
}

namespace {

/// The stage DAG and where each stage's computations run.
struct Topology {
  std::vector<std::vector<int32_t>> preds, succs;
  std::vector<std::vector<int32_t>> actorsOf; // sorted, unique

  explicit Topology(const Program &program)
      : preds(program.numStages), succs(program.numStages),
        actorsOf(program.numStages) {
    for (auto [from, to] : program.edges) {
      if (from < 0 || to < 0 || from >= program.numStages ||
          to >= program.numStages)
        continue;
      succs[from].push_back(to);
      preds[to].push_back(from);
    }
    for (int32_t a = 0; a < program.numActors; ++a)
      for (const ProgOp &op : program.actors[a])
        if (isCompute(op.kind) && op.stage >= 0 && op.stage < program.numStages)
          actorsOf[op.stage].push_back(a);
    for (auto &actors : actorsOf) {
      std::sort(actors.begin(), actors.end());
      actors.erase(std::unique(actors.begin(), actors.end()), actors.end());
    }
  }
  bool hasEdge(int32_t from, int32_t to) const {
    if (from < 0 || from >= static_cast<int32_t>(succs.size()))
      return false;
    return std::find(succs[from].begin(), succs[from].end(), to) !=
           succs[from].end();
  }
};

inline bool carriesGradient(OpKind kind) {
  return kind == OpKind::Bwd || kind == OpKind::Igrad;
}

/// (tag, stage, mb) packed for hash sets; tags below.
enum Tag : uint64_t {
  Act = 0,     // activation of stage available here
  Grad = 1,    // input gradient of stage available here
  FwdDone = 2, // forward of stage ran here
  IgDone = 3,  // input gradient of stage ran here
  BwdDone = 4, // full backward ran here
};
inline uint64_t key(uint64_t tag, int32_t stage, int32_t mb) {
  return (tag << 61) |
         (static_cast<uint64_t>(static_cast<uint32_t>(stage)) << 32) |
         static_cast<uint32_t>(mb);
}

} // namespace

void flexpipe::sched::insertCommunication(Program &program) {
  Topology topo(program);
  std::unordered_set<uint64_t> received;
  for (int32_t a = 0; a < program.numActors; ++a) {
    std::vector<ProgOp> out;
    out.reserve(program.actors[a].size() * 3);
    received.clear();
    for (const ProgOp &op : program.actors[a]) {
      const bool fwd = op.kind == OpKind::Fwd;
      const bool grad = carriesGradient(op.kind);
      if ((fwd || grad) && op.stage >= 0 && op.stage < program.numStages) {
        // Receives right before the first computation that needs them.
        const auto &sources = fwd ? topo.preds[op.stage] : topo.succs[op.stage];
        for (int32_t src : sources)
          for (int32_t peer : topo.actorsOf[src])
            if (peer != a && received
                                 .insert(key(fwd ? Act : Grad, src, op.mb) ^
                                         (static_cast<uint64_t>(peer) << 48))
                                 .second)
              out.push_back({fwd ? OpKind::RecvAct : OpKind::RecvGrad, op.stage,
                             op.mb, peer});
      }
      out.push_back(op);
      if ((fwd || grad) && op.stage >= 0 && op.stage < program.numStages) {
        // One send per consuming actor, right after the producer.
        const auto &targets = fwd ? topo.succs[op.stage] : topo.preds[op.stage];
        std::vector<int32_t> peers;
        for (int32_t dst : targets)
          for (int32_t peer : topo.actorsOf[dst])
            if (peer != a &&
                std::find(peers.begin(), peers.end(), peer) == peers.end())
              peers.push_back(peer);
        for (int32_t peer : peers)
          out.push_back({fwd ? OpKind::SendAct : OpKind::SendGrad, op.stage,
                         op.mb, peer});
      }
    }
    program.actors[a] = std::move(out);
  }
}

namespace {

class Replay {
public:
  Replay(const Program &program, ChannelRule rule)
      : p(program), topo(program), rule(rule) {}
  std::optional<VerifyFailure> run();

private:
  struct Message {
    int32_t srcStage, mb, actor, index;
    bool grad;
  };
  /// The channel of messages from `src` to `dst` of one kind sent by stage
  /// `senderStage` (per actor pair: every message from `src` to `dst`),
  /// created on first use.
  int32_t channel(int32_t src, int32_t dst, bool grad, int32_t senderStage) {
    if (rule == ChannelRule::PerPair) {
      grad = false;
      senderStage = 0;
    }
    const uint64_t k =
        ((static_cast<uint64_t>(src) * p.numActors + dst) * 2 + (grad ? 1 : 0))
            << 32 |
        static_cast<uint32_t>(senderStage);
    auto [it, inserted] =
        channels.try_emplace(k, static_cast<int32_t>(sent.size()));
    if (inserted) {
      sent.emplace_back();
      posted.push_back(0);
      waitersOnChannel.emplace_back();
      channelSender.push_back(src);
    }
    return it->second;
  }
  /// The channel a receive reads: from the stage next to its own that runs
  /// on the peer. Returns -1 when there is none.
  int32_t recvChannel(int32_t actor, const ProgOp &recv);
  std::string describe(int32_t actor, int32_t index) const {
    const ProgOp &op = p.actors[actor][index];
    std::ostringstream os;
    os << opKindName(op.kind) << " stage " << op.stage << " mb " << op.mb;
    if (op.kind >= OpKind::SendAct && op.kind <= OpKind::RecvGrad)
      os << ((op.kind == OpKind::SendAct || op.kind == OpKind::SendGrad)
                 ? " to "
                 : " from ")
         << op.peer;
    os << " on actor " << actor;
    return os.str();
  }
  VerifyFailure failure(int32_t actor, int32_t index, std::string message) {
    VerifyFailure f;
    f.message = std::move(message);
    f.at.push_back({actor, index, ""});
    return f;
  }
  std::optional<VerifyFailure> checkStatic();
  std::optional<VerifyFailure> checkInputs(int32_t actor, int32_t index);
  void produce(int32_t actor, const ProgOp &op);
  /// Tries to complete the receive that reserved `slot`; sets `matched`.
  std::optional<VerifyFailure> tryDeliver(int32_t actor, int32_t index,
                                          int32_t ch, int32_t slot,
                                          bool &delivered);
  std::optional<VerifyFailure> deadlock();

  const Program &p;
  Topology topo;
  ChannelRule rule;
  std::vector<std::unordered_set<uint64_t>> have;
  std::vector<std::vector<Message>> sent;
  std::vector<int32_t> posted;
  std::vector<int32_t> pc;
  /// Blocked receive: (channel, slot); blocked collective: key.
  std::vector<int32_t> waitChannel, waitSlot;
  std::vector<int8_t> inCollective;
  std::map<std::tuple<int, int32_t, int32_t>, std::vector<int32_t>> arrivals;
  std::vector<std::pair<int32_t, int32_t>> tokenSlot; // token -> (ch, slot)
  /// Asynchronous collectives: token -> the op that posted it.
  std::map<int32_t, std::pair<int32_t, int32_t>> tokenCollective;
  std::vector<std::vector<int32_t>> waitersOnChannel;
  std::vector<int32_t> channelSender;
  std::unordered_map<uint64_t, int32_t> channels;
};

int32_t Replay::recvChannel(int32_t actor, const ProgOp &recv) {
  const bool grad = recv.kind == OpKind::RecvGrad;
  const auto &neighbours =
      grad ? topo.succs[recv.stage] : topo.preds[recv.stage];
  if (rule == ChannelRule::PerPair)
    return channel(recv.peer, actor, grad, 0);
  int32_t first = -1;
  for (int32_t sender : neighbours) {
    const auto &actors = topo.actorsOf[sender];
    if (!std::binary_search(actors.begin(), actors.end(), recv.peer))
      continue;
    const int32_t ch = channel(recv.peer, actor, grad, sender);
    if (first < 0)
      first = ch;
    // Several candidate stages on the peer: the one whose next message is
    // for this micro-batch.
    const int32_t slot = posted[ch];
    if (slot < static_cast<int32_t>(sent[ch].size()) &&
        sent[ch][slot].mb == recv.mb)
      return ch;
  }
  return first;
}

std::optional<VerifyFailure> Replay::checkStatic() {
  // Operands in range, tokens waited once, every forward with its backward.
  std::vector<int32_t> tokenUses;
  const int64_t cells =
      static_cast<int64_t>(p.numStages) * std::max(1, p.numMicrobatches);
  // Per (stage, mb): 1 + the actor and index of its forward, packed.
  std::vector<int64_t> fwdAt(cells, 0);
  std::vector<int8_t> backAt(cells, 0);
  for (int32_t a = 0; a < p.numActors; ++a) {
    for (int32_t i = 0; i < static_cast<int32_t>(p.actors[a].size()); ++i) {
      const ProgOp &op = p.actors[a][i];
      if (op.kind == OpKind::Wait) {
        if (op.token < 0)
          return failure(a, i, "wait names no transfer");
        if (op.token >= static_cast<int32_t>(tokenUses.size()))
          tokenUses.resize(op.token + 1, 0);
        if (++tokenUses[op.token] > 1)
          return failure(a, i, "a transfer is waited twice");
        continue;
      }
      if (op.stage < 0 || op.stage >= p.numStages || op.mb < 0 ||
          op.mb >= p.numMicrobatches)
        return failure(a, i, describe(a, i) + " is out of range");
      const int64_t cell =
          static_cast<int64_t>(op.stage) * p.numMicrobatches + op.mb;
      if (op.kind == OpKind::Fwd)
        fwdAt[cell] = 1 + (static_cast<int64_t>(a) << 32 | i);
      if (op.kind == OpKind::Bwd || op.kind == OpKind::Wgrad)
        backAt[cell] = 1;
      const bool p2p =
          op.kind >= OpKind::SendAct && op.kind <= OpKind::RecvGrad;
      if (p2p && (op.peer < 0 || op.peer >= p.numActors || op.peer == a))
        return failure(a, i, describe(a, i) + " names an invalid peer");
      if ((op.kind == OpKind::AllGather || op.kind == OpKind::Gather) &&
          (op.group < 0 || op.group >= static_cast<int32_t>(p.groups.size())))
        return failure(a, i, describe(a, i) + " has no group");
    }
  }
  for (int32_t s = 0; s < p.numStages; ++s)
    for (int32_t mb = 0; mb < p.numMicrobatches; ++mb) {
      const int64_t cell = static_cast<int64_t>(s) * p.numMicrobatches + mb;
      if (fwdAt[cell] && !backAt[cell]) {
        VerifyFailure f;
        std::ostringstream os;
        os << "stage " << s << " micro-batch " << mb
           << " runs a forward but never completes its backward; every "
              "forward needs a bwd (or igrad and wgrad)";
        f.message = os.str();
        const int64_t at = fwdAt[cell] - 1;
        f.at.push_back({static_cast<int32_t>(at >> 32),
                        static_cast<int32_t>(at & 0xffffffff), ""});
        return f;
      }
    }
  // Every micro-batch is computed: the runtime averages the loss and the
  // gradients over all of them.
  // (A program of registered instructions only computes nothing.)
  bool anyComputation = false;
  for (const std::vector<ProgOp> &ops : p.actors)
    for (const ProgOp &op : ops)
      anyComputation |= isCompute(op.kind);
  for (int32_t mb = 0; anyComputation && mb < p.numMicrobatches; ++mb) {
    bool computed = false;
    for (int32_t s = 0; s < p.numStages && !computed; ++s)
      computed = fwdAt[static_cast<int64_t>(s) * p.numMicrobatches + mb] != 0;
    if (!computed) {
      VerifyFailure f;
      std::ostringstream os;
      os << "micro-batch " << mb << " is never computed, but the schedule has "
         << p.numMicrobatches
         << " micro-batches; every one needs its forward and backward on "
            "every stage";
      f.message = os.str();
      return f;
    }
  }
  return std::nullopt;
}

void Replay::produce(int32_t actor, const ProgOp &op) {
  auto &h = have[actor];
  switch (op.kind) {
  case OpKind::Fwd:
    h.insert(key(FwdDone, op.stage, op.mb));
    h.insert(key(Act, op.stage, op.mb));
    break;
  case OpKind::Bwd:
    h.insert(key(BwdDone, op.stage, op.mb));
    h.insert(key(Grad, op.stage, op.mb));
    break;
  case OpKind::Igrad:
    h.insert(key(IgDone, op.stage, op.mb));
    h.insert(key(Grad, op.stage, op.mb));
    break;
  default:
    break;
  }
}

/// Every input of the computation at (actor, index) is available there.
std::optional<VerifyFailure> Replay::checkInputs(int32_t actor, int32_t index) {
  const ProgOp &op = p.actors[actor][index];
  const auto &h = have[actor];
  auto missing = [&](const std::string &what) {
    return failure(actor, index,
                   describe(actor, index) + " runs before " + what +
                       "; every dependency must be satisfied in program order");
  };
  auto stageMb = [&](const char *what, int32_t stage) {
    std::ostringstream os;
    os << what << " stage " << stage << " mb " << op.mb;
    return os.str();
  };
  switch (op.kind) {
  case OpKind::Fwd:
    for (int32_t pred : topo.preds[op.stage])
      if (!h.count(key(Act, pred, op.mb)))
        return missing(stageMb("the activation of", pred) +
                       " is computed or received here");
    break;
  case OpKind::Bwd:
  case OpKind::Igrad:
    if (!h.count(key(FwdDone, op.stage, op.mb)))
      return missing(stageMb("the fwd of", op.stage));
    for (int32_t succ : topo.succs[op.stage])
      if (!h.count(key(Grad, succ, op.mb)))
        return missing(stageMb("the gradient from", succ) +
                       " is computed or received here");
    break;
  case OpKind::Wgrad:
    if (!h.count(key(IgDone, op.stage, op.mb)))
      return missing(stageMb("the igrad of", op.stage));
    break;
  case OpKind::SendAct:
    if (!h.count(key(FwdDone, op.stage, op.mb)))
      return missing(stageMb("the fwd of", op.stage) + " that it sends");
    break;
  case OpKind::SendGrad:
    if (!h.count(key(Grad, op.stage, op.mb)) ||
        h.count(key(FwdDone, op.stage, op.mb)) == 0)
      return missing(stageMb("the gradient of", op.stage) + " that it sends");
    break;
  default:
    break;
  }
  return std::nullopt;
}

std::optional<VerifyFailure> Replay::tryDeliver(int32_t actor, int32_t index,
                                                int32_t ch, int32_t slot,
                                                bool &delivered) {
  delivered = false;
  if (slot >= static_cast<int32_t>(sent[ch].size()))
    return std::nullopt;
  const Message &msg = sent[ch][slot];
  const ProgOp &recv = p.actors[actor][index];
  const bool grad = recv.kind == OpKind::RecvGrad;
  const bool matches = msg.mb == recv.mb && msg.grad == grad &&
                       (grad ? topo.hasEdge(recv.stage, msg.srcStage)
                             : topo.hasEdge(msg.srcStage, recv.stage));
  if (!matches) {
    VerifyFailure f;
    f.message = describe(actor, index) + " would receive the message of " +
                describe(msg.actor, msg.index) +
                (rule == ChannelRule::PerPair
                     ? ": without tags, the receives an actor posts for a "
                       "peer must come in the order of that peer's sends"
                     : ": sends and receives between two actors must match "
                       "one to one and in the same order");
    f.at.push_back({actor, index, ""});
    f.at.push_back({msg.actor, msg.index, "the send it would match"});
    return f;
  }
  have[actor].insert(key(grad ? Grad : Act, msg.srcStage, msg.mb));
  delivered = true;
  return std::nullopt;
}

std::optional<VerifyFailure> Replay::run() {
  if (auto f = checkStatic())
    return f;
  const int32_t n = p.numActors;
  have.assign(n, {});
  for (int32_t a = 0; a < n; ++a)
    have[a].reserve(p.actors[a].size() * 2);
  pc.assign(n, 0);
  waitChannel.assign(n, -1);
  waitSlot.assign(n, -1);
  inCollective.assign(n, 0);

  std::vector<int32_t> worklist(n);
  for (int32_t a = 0; a < n; ++a)
    worklist[a] = n - 1 - a;
  std::vector<int8_t> queued(n, 1);
  auto wake = [&](int32_t actor) {
    if (!queued[actor]) {
      queued[actor] = 1;
      worklist.push_back(actor);
    }
  };

  while (!worklist.empty()) {
    const int32_t a = worklist.back();
    worklist.pop_back();
    queued[a] = 0;
    const auto &ops = p.actors[a];
    while (pc[a] < static_cast<int32_t>(ops.size())) {
      const int32_t i = pc[a];
      const ProgOp &op = ops[i];
      bool advance = true;
      switch (op.kind) {
      case OpKind::Fwd:
      case OpKind::Bwd:
      case OpKind::Igrad:
      case OpKind::Wgrad:
        if (auto f = checkInputs(a, i))
          return f;
        produce(a, op);
        break;
      case OpKind::SendAct:
      case OpKind::SendGrad: {
        if (auto f = checkInputs(a, i))
          return f;
        const int32_t ch =
            channel(a, op.peer, op.kind == OpKind::SendGrad, op.stage);
        sent[ch].push_back(
            {op.stage, op.mb, a, i, op.kind == OpKind::SendGrad});
        for (int32_t waiter : waitersOnChannel[ch])
          wake(waiter);
        waitersOnChannel[ch].clear();
        if (op.token >= 0) {
          if (op.token >= static_cast<int32_t>(tokenSlot.size()))
            tokenSlot.resize(op.token + 1, {-1, -1});
          tokenSlot[op.token] = {-1, -1}; // sends complete at once
        }
        break;
      }
      case OpKind::RecvAct:
      case OpKind::RecvGrad: {
        int32_t ch = waitChannel[a];
        int32_t slot = waitSlot[a];
        if (ch < 0) {
          ch = recvChannel(a, op);
          if (ch < 0)
            return failure(a, i,
                           describe(a, i) + " expects a message from actor " +
                               std::to_string(op.peer) +
                               ", which runs no stage adjacent to stage " +
                               std::to_string(op.stage));
          slot = posted[ch]++;
        }
        if (op.token >= 0) {
          if (op.token >= static_cast<int32_t>(tokenSlot.size()))
            tokenSlot.resize(op.token + 1, {-1, -1});
          tokenSlot[op.token] = {ch, slot};
          // Record which op the slot belongs to for matching at the wait.
          waitChannel[a] = -1;
          break;
        }
        bool delivered;
        if (auto f = tryDeliver(a, i, ch, slot, delivered))
          return f;
        if (!delivered) {
          waitChannel[a] = ch;
          waitSlot[a] = slot;
          waitersOnChannel[ch].push_back(a);
          advance = false;
        } else {
          waitChannel[a] = -1;
        }
        break;
      }
      case OpKind::Wait: {
        if (auto it = tokenCollective.find(op.token);
            it != tokenCollective.end()) {
          const ProgOp &post = ops[it->second.second];
          const auto k =
              std::make_tuple(static_cast<int>(post.kind), post.stage, post.mb);
          if (arrivals[k].size() < p.groups[post.group].size())
            advance = false;
          break;
        }
        auto [ch, slot] = op.token < static_cast<int32_t>(tokenSlot.size())
                              ? tokenSlot[op.token]
                              : std::pair<int32_t, int32_t>{-1, -1};
        if (ch < 0)
          break; // a send, or a transfer already complete
        // Find the receive that posted this token to match the message.
        int32_t recvIndex = -1;
        for (int32_t j = i - 1; j >= 0; --j)
          if (ops[j].token == op.token && ops[j].kind != OpKind::Wait) {
            recvIndex = j;
            break;
          }
        bool delivered;
        if (auto f = tryDeliver(a, recvIndex, ch, slot, delivered))
          return f;
        if (!delivered) {
          waitersOnChannel[ch].push_back(a);
          advance = false;
        }
        break;
      }
      case OpKind::AllGather:
      case OpKind::Gather: {
        const auto k =
            std::make_tuple(static_cast<int>(op.kind), op.stage, op.mb);
        auto &arrived = arrivals[k];
        if (op.token >= 0) {
          // Posted: the wait completes it.
          arrived.push_back(a);
          tokenCollective[op.token] = {a, i};
          for (int32_t member : p.groups[op.group])
            wake(member);
          break;
        }
        if (!inCollective[a]) {
          arrived.push_back(a);
          inCollective[a] = 1;
          for (int32_t member : p.groups[op.group])
            wake(member);
        }
        if (arrived.size() < p.groups[op.group].size()) {
          advance = false;
        } else {
          inCollective[a] = 0;
        }
        break;
      }
      case OpKind::Exec:
        break;
      }
      if (!advance)
        break;
      ++pc[a];
    }
  }
  for (int32_t a = 0; a < n; ++a)
    if (pc[a] < static_cast<int32_t>(p.actors[a].size()))
      return deadlock();
  return std::nullopt;
}

/// Follows wait-for edges from a blocked actor to a cycle (or to an actor
/// that finished without sending what is awaited).
std::optional<VerifyFailure> Replay::deadlock() {
  const int32_t n = p.numActors;
  auto blocked = [&](int32_t a) {
    return pc[a] < static_cast<int32_t>(p.actors[a].size());
  };
  auto waitsFor = [&](int32_t a) -> int32_t {
    const ProgOp &op = p.actors[a][pc[a]];
    if (op.kind == OpKind::RecvAct || op.kind == OpKind::RecvGrad)
      return op.peer;
    const ProgOp *collective = &op;
    if (op.kind == OpKind::Wait) {
      auto it = tokenCollective.find(op.token);
      if (it == tokenCollective.end()) {
        auto [ch, slot] = tokenSlot[op.token];
        return channelSender[ch];
      }
      collective = &p.actors[a][it->second.second];
    }
    // A collective: the first member that has not arrived.
    const auto k = std::make_tuple(static_cast<int>(collective->kind),
                                   collective->stage, collective->mb);
    const auto &arrived = arrivals[k];
    for (int32_t member : p.groups[collective->group])
      if (std::find(arrived.begin(), arrived.end(), member) == arrived.end())
        return member;
    return a;
  };

  int32_t start = 0;
  while (!blocked(start))
    ++start;
  std::vector<int32_t> order, seenAt(n, -1);
  int32_t a = start;
  while (a >= 0 && blocked(a) && seenAt[a] < 0) {
    seenAt[a] = static_cast<int32_t>(order.size());
    order.push_back(a);
    a = waitsFor(a);
  }
  VerifyFailure f;
  if (a >= 0 && blocked(a) && seenAt[a] >= 0) {
    std::ostringstream os;
    os << "the programs deadlock: actors";
    for (size_t i = seenAt[a]; i < order.size(); ++i)
      os << ' ' << order[i];
    os << " wait for each other in a cycle";
    f.message = os.str();
    for (size_t i = seenAt[a]; i < order.size(); ++i) {
      int32_t actor = order[i];
      f.at.push_back({actor, pc[actor],
                      "actor " + std::to_string(actor) +
                          " waits here for actor " +
                          std::to_string(waitsFor(actor))});
    }
    return f;
  }
  const int32_t last = order.back();
  f.message = describe(last, pc[last]) + " waits for actor " +
              std::to_string(waitsFor(last)) +
              ", which finishes its program without providing it";
  f.at.push_back({last, pc[last], ""});
  return f;
}

} // namespace

std::optional<VerifyFailure> flexpipe::sched::verify(const Program &program,
                                                     ChannelRule rule) {
  if (program.numActors < 1 ||
      static_cast<int32_t>(program.actors.size()) != program.numActors) {
    VerifyFailure f;
    f.message = "the program needs one instruction list per actor";
    return f;
  }
  return Replay(program, rule).run();
}
