//===- Program.h - Per-actor programs, communication, verification -*- C++
//-*-=//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// The schedule level as flat arrays: each actor's ordered instructions. The
// insert-comm and verify-schedule passes convert IR to a Program, call these
// functions and map results back; the tuner and benchmarks call them directly.
//
// Runtime semantics that insertion targets and the verifier replays:
//  - a send is posted where it stands and the actor goes on (MPI_Isend,
//    ncclSend on a side stream); the message is delivered once its receive
//    is posted. An asynchronous send (with a token) blocks at its wait until
//    then, as MPI_Wait and NCCL's completion event do; every other send must
//    be delivered by the end of the iteration (the runtime's final wait), so
//    every send needs a receive;
//  - a receive blocks until its message has arrived; an asynchronous one
//    (with a token) is posted where it stands and blocks at its wait;
//  - a message is identified by its sender, receiver, kind (activation or
//    gradient) and sending stage; messages with the same identity travel in
//    FIFO order, so receives must be posted in the order of the sends (an MPI
//    tag per sending stage and kind implements this; FlexPipe's runtimes rely
//    on it). Untagged runtimes (PyTorch's pipelining runtime over gloo or
//    NCCL) have one FIFO channel per ordered pair of actors instead:
//    ChannelRule::PerPair checks that stricter rule;
//  - all_gather / gather block until every member of the group has reached
//    the same (stage, micro-batch) instance.
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_SCHEDULING_PROGRAM_H
#define FLEXPIPE_SCHEDULING_PROGRAM_H

#include "flexpipe/Scheduling/Scheduler.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flexpipe::sched {

enum class OpKind : uint8_t {
  Fwd,
  Bwd,
  Igrad,
  Wgrad,
  SendAct,
  RecvAct,
  SendGrad,
  RecvGrad,
  AllGather,
  Gather,
  Exec, ///< a registered instruction
  Wait,
};
const char *opKindName(OpKind kind);
/// The letter PyTorch's CSV uses: F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B;
/// nullptr for kinds it has no letter for.
const char *opLetter(OpKind kind);
inline bool isCompute(OpKind kind) { return kind <= OpKind::Wgrad; }
/// Work an actor does itself: a computation or a registered instruction
/// (exec). Timelines draw it and critical paths count it.
inline bool isWork(OpKind kind) {
  return isCompute(kind) || kind == OpKind::Exec;
}
inline bool isSend(OpKind kind) {
  return kind == OpKind::SendAct || kind == OpKind::SendGrad;
}
inline bool isReceive(OpKind kind) {
  return kind == OpKind::RecvAct || kind == OpKind::RecvGrad;
}
/// A point-to-point transfer: a send or a receive.
inline bool isTransfer(OpKind kind) { return isSend(kind) || isReceive(kind); }
inline bool isCollective(OpKind kind) {
  return kind == OpKind::AllGather || kind == OpKind::Gather;
}
/// A computation that makes its stage's input gradient (what the stage
/// before receives): a full backward or its input-gradient half.
inline bool makesInputGradient(OpKind kind) {
  return kind == OpKind::Bwd || kind == OpKind::Igrad;
}
/// A computation that ends a micro-batch's backward on its stage (its
/// activations are freed): a full backward or its weight-gradient half.
inline bool endsBackward(OpKind kind) {
  return kind == OpKind::Bwd || kind == OpKind::Wgrad;
}
/// The scheduler's computation kinds are the first four op kinds, in order.
static_assert(
    static_cast<int>(OpKind::Fwd) == static_cast<int>(CompKind::Fwd) &&
    static_cast<int>(OpKind::Bwd) == static_cast<int>(CompKind::Bwd) &&
    static_cast<int>(OpKind::Igrad) == static_cast<int>(CompKind::Igrad) &&
    static_cast<int>(OpKind::Wgrad) == static_cast<int>(CompKind::Wgrad));
inline OpKind toOpKind(CompKind kind) { return static_cast<OpKind>(kind); }

struct ProgOp {
  OpKind kind;
  int32_t stage = 0;
  int32_t mb = 0;
  /// Peer actor of a point-to-point transfer; root of a gather.
  int32_t peer = -1;
  /// Asynchronous transfers: the token id a later Wait names (-1: blocking).
  /// Wait: the token it completes.
  int32_t token = -1;
  /// Collectives: index into Program::groups.
  int32_t group = -1;
  /// Position of the op this entry was read from (for mapping results back to
  /// IR); -1 for entries a transformation added.
  int32_t source = -1;
  /// Exec: index into Program::instructions.
  int32_t inst = -1;
};

/// A Wait that completes `token` (`source`: as ProgOp::source).
inline ProgOp waitOp(int32_t token, int32_t source = -1) {
  ProgOp wait{OpKind::Wait};
  wait.token = token;
  wait.source = source;
  return wait;
}

/// What a stage holds, for the cost model: `layers` transformer layers of
/// module `module`, the module's first layers (embedding) and/or last
/// (LM head and loss).
struct StageMeta {
  int32_t module = -1;
  int64_t layers = 1;
  bool first = false, last = false;
  /// A registered stage (flexpipe.stage): no layers, neither first nor last,
  /// and `module` names the stage itself (markRegistered). A module's empty
  /// middle stage (`partition [4, 0, 4]`) has the same shape but is not one:
  /// it passes the module's activations on.
  bool registered = false;
  bool isRegistered() const { return registered; }
  /// Shaped as a vocabulary-parallel LM head, which it is when shared: no
  /// layers, last and not first.
  bool isVocabHead() const { return layers == 0 && last && !first; }
};

/// Sets StageMeta::registered from what stage_info records: a stage of no
/// layers, neither first nor last, whose module has no other kind of stage.
void markRegistered(std::vector<StageMeta> &meta);

struct Program {
  int32_t numActors = 0, numStages = 0, numMicrobatches = 0;
  /// Optional: per stage what it holds, and the module names StageMeta
  /// refers to (empty when unknown, e.g. for a hand-written schedule).
  std::vector<StageMeta> stageMeta;
  std::vector<std::string> moduleNames;
  /// The stage DAG (forward direction), in stage ids.
  std::vector<std::pair<int32_t, int32_t>> edges;
  std::vector<int32_t> sharedStages;
  std::vector<std::vector<ProgOp>> actors;
  std::vector<std::vector<int32_t>> groups;
  /// Names of the registered instructions Exec ops run.
  std::vector<std::string> instructions;
};

/// Builds the compute-only program of a schedule (stage ids from the parts).
/// Registered instructions become all_gather, gather (group: their actors)
/// or exec ops; an asynchronous one gets a token and a wait right before the
/// first computation on its actor that depends on it (or at the end).
Program toProgram(const Problem &problem, const ScheduleResult &schedule,
                  int32_t numStages,
                  const std::vector<std::pair<int32_t, int32_t>> &stageEdges,
                  const std::vector<int32_t> &sharedStages);

/// Per stage, the actors that compute it (ascending, each once).
std::vector<std::vector<int32_t>> stageActors(const Program &program);

/// Per stage, the first of its module's layers it holds: a stage follows the
/// deepest of its predecessors of the same module along `edges` (a DAG), so
/// a module's layers are counted along its chain of stages and each
/// direction of a bidirectional module holds them all. Stages without one of
/// the module's stages before them start at 0.
std::vector<int64_t>
stageFirstLayers(const std::vector<StageMeta> &meta,
                 const std::vector<std::pair<int32_t, int32_t>> &edges);

/// Per module (Program::moduleNames), the layers its stages hold along
/// their chain (stageFirstLayers); 0 for registered stages' names and for
/// every module of a program without stage metadata.
std::vector<int64_t> moduleLayers(const Program &program);

/// Whether the stage metadata agrees with the edges, as pricing a model
/// needs (the first stages hold the embedding, the last ones the head): a
/// module stage that no stage of its module feeds is a first stage, one that
/// feeds none of them is a last stage, and a module has as many first as
/// last stages (one of each per direction). Success without metadata.
llvm::Error checkStageChains(const Program &program);

/// Two stages whose messages to a third over one pair of actors could not
/// be told apart: a transfer names the stage it serves and the peer, not the
/// edge (insertCommunication), so a stage can take activations from one
/// stage per other actor (`join`: `first` and `second` feed `stage`) and
/// gradients from one (not `join`: `stage` feeds both).
struct MessageClash {
  int32_t stage, first, second;
  /// Where `first` and `second` run, and an actor of `stage` other than it.
  int32_t actor, peer;
  bool join;
};

/// The first such pair, in stage order (joins before fan-outs per stage);
/// `actorsOf` gives each stage's actors (several for a shared stage).
std::optional<MessageClash>
findMessageClash(const std::vector<std::pair<int32_t, int32_t>> &edges,
                 const std::vector<std::vector<int32_t>> &actorsOf);

/// Adds a send after every computation whose output another actor needs and
/// a blocking receive right before the first computation that needs it.
/// Same-actor edges get nothing. Existing transfers are kept; the program
/// must not contain transfers for the edges it adds. A transfer's `source`
/// is that of the computation it serves (so its diagnostics point there).
void insertCommunication(Program &program);

/// The first token after every token the program uses (0 when it uses
/// none): where new asynchronous transfers number theirs.
int32_t nextFreeToken(const Program &program);

/// Asynchronous receives: every blocking receive is posted `lookahead`
/// computations earlier on its actor (before its first computation at the
/// most; where it was when no computation precedes it) and completed by a
/// wait where it was, so that the message moves while the actor computes.
/// Posts that land before the same computation keep their order, and none
/// goes before a receive from its peer that was asynchronous already (an
/// imported or hand-written program mixes both): every channel keeps its
/// order. New tokens
/// follow the largest one in the program. Returns the receives changed.
/// Requires lookahead >= 1.
int64_t postReceivesEarly(Program &program, int64_t lookahead);

/// A verification failure: a message and the ops involved, the first being
/// the primary location.
struct VerifyFailure {
  struct At {
    int32_t actor, index;
    std::string note;
  };
  std::string message;
  std::vector<At> at;
};

/// Which messages share one FIFO channel.
enum class ChannelRule : uint8_t {
  /// One channel per (sender, receiver, kind, sending stage): tagged
  /// point-to-point, as FlexPipe's MPI and NCCL runtimes implement it.
  PerStage,
  /// One channel per ordered pair of actors: untagged point-to-point, where
  /// the n-th receive from a peer takes the n-th send to it (PyTorch's
  /// pipelining runtime).
  PerPair,
};

/// The ops of a program as one graph: what each receive, wait and collective
/// waits for, and an order in which the programs run to their end. It is the
/// one place where receives are matched to sends and the programs replayed:
/// verify() checks through it, and the simulator times it.
///
/// Op ids: the ops of actor a are [actorBegin[a], actorBegin[a + 1]), in
/// program order.
struct ProgramGraph {
  /// Ops are numbered actor by actor: actor a's op i is actorBegin[a] + i.
  std::vector<int32_t> actorBegin;
  /// Per op: its actor.
  std::vector<int32_t> actorOf;
  /// Per op: the send a blocking receive, or the wait of an asynchronous
  /// one, takes its message from; -1 for other ops.
  std::vector<int32_t> dependsOn;
  /// Per op with a dependsOn: the op that posted the receive (itself for a
  /// blocking one, the asynchronous receive for a wait).
  std::vector<int32_t> postedBy;
  /// Collectives: per member op, the first member of its instance and the
  /// next one (-1 at the end of the chain); -1 for other ops.
  std::vector<int32_t> groupFirst, groupNext;
  /// Per wait of an asynchronous collective: the op that posted it; -1.
  std::vector<int32_t> waitsPost;
  /// Per wait of an asynchronous send: that send; -1 for other ops.
  std::vector<int32_t> waitsSend;
  /// Per send: the receive that takes its message (a blocking receive or an
  /// asynchronous post); -1 for other ops and for a send nothing receives.
  std::vector<int32_t> takenBy;

  int32_t numOps() const { return actorBegin.empty() ? 0 : actorBegin.back(); }
  /// Op `id` of `program` (the program the graph was built from).
  const ProgOp &op(const Program &program, int32_t id) const {
    return program.actors[actorOf[id]][id - actorBegin[actorOf[id]]];
  }
};

/// Matches receives to sends (one FIFO channel per `rule`) and collectives
/// to their instances, and replays the programs under the semantics above
/// to their end, filling `graph`. With `checkData`, also checks that every
/// computation and send finds its inputs in program order (verify() does;
/// programs that insertCommunication made from a schedule satisfy it by
/// construction). Returns the first failure: a receive that would take
/// another message, a deadlock cycle, an actor waiting for one that
/// finished, or a send that no receive takes.
std::optional<VerifyFailure> buildGraph(const Program &program,
                                        ChannelRule rule, ProgramGraph &graph,
                                        bool checkData = false);

/// What happens before what in the ops of `graph` (built from `program`):
/// program order, the messages receives and waits take, and collectives (a
/// blocking instance ends after every member reached it, an asynchronous
/// one's wait after every member posted). The graph of those orders is
/// built once, in topological order; each actor's table is one pass over it
/// from that actor's first op on.
class HappensBefore {
public:
  HappensBefore(const Program &program, const ProgramGraph &graph);
  /// Fills `last`: for every op, the last op of `actor` that happens before
  /// it or is it; -1 where no op of `actor` does.
  void lastOf(int32_t actor, std::vector<int32_t> &last) const;

private:
  const ProgramGraph &graph;
  /// Per op, its node: a blocking collective instance is one node (its
  /// first member), since every member leaves it after all arrived.
  std::vector<int32_t> node;
  /// Per op, whether it is the node of a blocking collective instance.
  std::vector<uint8_t> blockingInstance;
  /// The nodes in topological order, and each op's node's place in it.
  std::vector<int32_t> order, place;
  /// The nodes' successors: those of node v are
  /// successors[successorBegin[v], successorBegin[v + 1]).
  std::vector<int32_t> successorBegin, successors;
};

/// Two transfers that an actor posts one right after the other, ops `first`
/// and `first + 1` of `actor`: a send to a peer and a receive from the same
/// peer (a blocking receive only second: it waits where it stands).
struct TransferPair {
  int32_t actor, first;
};

/// The pairs whose counterparts the peer posts as a pair too: the receive
/// of our send and the send of our receive, one right after the other. Both
/// pairs are returned, each op in one pair at most (the first found, in
/// actor and program order). Posting each as one NCCL group (ncclGroupStart
/// / End, what PyTorch's batch_isend_irecv does in 1F1B's steady state)
/// lets NCCL progress the two directions together; it cannot deadlock a
/// program that the replay passes, because both actors post all four
/// transfers of the two pairs at once: each would complete at the same
/// moment alone (docs/Rationale.md). `graph` is the program's (buildGraph).
std::vector<TransferPair> mirroredTransferPairs(const Program &program,
                                                const ProgramGraph &graph);

/// verify()'s checks of the computations alone, which a compute-only program
/// (before insertCommunication) passes too: operands in range, every forward
/// with its backward and every backward with its forward (on every member
/// of a shared stage), every micro-batch computed on every stage of the
/// part of the stage DAG it enters, and on one part per module (a
/// bidirectional pipeline's directions are two parts of one module).
std::optional<VerifyFailure> verifyComputations(const Program &program);

/// Checks verifyComputations(), then, through buildGraph, that every data
/// dependency is satisfied in program order, that sends and receives match
/// one to one and in the same order per channel (channels as `rule` says)
/// and that the programs terminate. Returns the first failure.
std::optional<VerifyFailure> verify(const Program &program,
                                    ChannelRule rule = ChannelRule::PerStage);

} // namespace flexpipe::sched

#endif // FLEXPIPE_SCHEDULING_PROGRAM_H
