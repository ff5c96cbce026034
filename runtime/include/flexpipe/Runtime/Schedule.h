//===- Schedule.h - The schedule description rank programs embed -*- C++ -*-=//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//

#ifndef FLEXPIPE_RUNTIME_SCHEDULE_H
#define FLEXPIPE_RUNTIME_SCHEDULE_H

#include "flexpipe/Runtime/Model.h"
#include "flexpipe/Runtime/UserOps.h"

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace flexpipe::rt {

/// What every rank knows about the schedule (docs/Runtime.md has the text
/// format): sizes, the model, where each stage runs and what it holds.
struct ScheduleDesc {
  std::string name;
  uint64_t hash = 0;
  /// The actor whose program the executable embedding this description
  /// runs (its `program` line); -1 where the description serves every rank
  /// (schedule.txt, flexpipe-reference).
  int program = -1;
  int actors = 1, stages = 1, microbatches = 1, dp = 1;
  /// The GPT's sizes; for a two-tower model only microBatch and seed count.
  GptConfig model;
  /// The two-tower model: tower 0 and tower 1 (`tower` lines), each with its
  /// sizes, `embed` and parameter prefix; empty for the GPT.
  std::vector<GptConfig> towers;
  struct Stage {
    int actor = 0;
    int firstBlock = 0, blocks = 0;
    bool first = false, last = false;
    /// A shared stage runs on every actor of `actors` (sorted; `actor` is the
    /// first); any other stage on `actor` alone.
    std::vector<int> actors;
    /// Holds the final LayerNorm without the head: the stage feeds a
    /// vocabulary-parallel head (derived from the edges).
    bool finalNorm = false;
    /// The tower of a two-tower model the stage belongs to; -1 for the GPT's
    /// stages and the sync stage.
    int tower = -1;
    /// The registered stage that joins the two towers: it computes nothing;
    /// `actors` (sorted) is its all-gather's group, the actors of the towers'
    /// last stages.
    bool sync = false;
    bool shared() const { return !sync && actors.size() > 1; }
    /// The last stage of a tower: its forward ends in the tower's embeddings,
    /// which the sync stage's all-gather exchanges.
    bool towerLast() const { return tower >= 0 && last; }
    /// The vocabulary-parallel token embedding and LM head + loss: shared
    /// stages without blocks, each actor holding a slice of the vocabulary.
    bool vocabEmbedding() const {
      return shared() && blocks == 0 && first && !last;
    }
    bool vocabHead() const { return shared() && blocks == 0 && last && !first; }
    /// This actor's place among `actors`, or -1.
    int part(int a) const;
  };
  std::vector<Stage> stage;
  std::vector<std::pair<int, int>> edges;
  /// One instance of a registered compute instruction in an actor's program
  /// (flexpipe.exec), in program order per actor: the operation `name` on
  /// `stage` for micro-batches [mb, mb + count); `outputs` are those of them
  /// whose forward of `stage` has run on `actor` before the instance, whose
  /// output the operation sees; `attrs` as flexpipe_rt_exec gets them.
  struct Exec {
    std::string name;
    int stage = 0, actor = 0;
    int64_t mb = 0, count = 1;
    std::vector<int64_t> outputs;
    std::string attrs;
  };
  std::vector<Exec> execs;
  /// Per actor: the peak activation memory the cost model predicts, in bytes
  /// (the 'predicted' line, which flexpipe-compile writes when it has a
  /// model); empty when there is none. Printed beside the measured peak.
  std::vector<double> predictedPeak;

  bool twoTower() const { return !towers.empty(); }
  /// Whether a stage is a vocabulary-parallel embedding or head.
  bool vocabParallel() const {
    for (const Stage &s : stage)
      if (s.vocabEmbedding() || s.vocabHead())
        return true;
    return false;
  }
  /// The sizes of the model that stage `s` belongs to: its tower's, or the
  /// GPT's.
  const GptConfig &config(int s) const {
    const int tower = stage[s].tower;
    return tower >= 0 ? towers[tower] : model;
  }
  /// The shape of `size` floats of stage `s`'s output for one micro-batch:
  /// [micro-batch, embed] after a tower's last stage, [micro-batch, seq,
  /// hidden] for hidden states, flat otherwise.
  std::vector<int64_t> outputShape(int s, size_t size) const;
  /// The sync stage of a two-tower model, or -1.
  int syncStage() const;
  /// The last stage of tower `tower`, or -1.
  int towerLastStage(int tower) const;
};

/// One FIFO channel of messages: every (sender, receiver, tag) that isend
/// and irecv use, and for exchanges and ping-pongs one entry per pair of
/// ranks (from < to) used both ways (`both`). Replica r's actor a is rank
/// a * dp + r (flexpipe::rankOf, flexpipe/Support/Layout.h).
struct MessageChannel {
  int from, to, tag;
  bool both = false;
  bool operator<(const MessageChannel &o) const {
    return std::tie(from, to, tag, both) <
           std::tie(o.from, o.to, o.tag, o.both);
  }
  bool operator==(const MessageChannel &o) const {
    return from == o.from && to == o.to && tag == o.tag && both == o.both;
  }
};

/// Message tags: one FIFO channel per (kind, sending stage). MPI guarantees
/// tags up to 32767; the gradient exchange of bidirectional copies and of
/// vocabulary-parallel stages uses the last one.
inline int messageTag(bool gradient, int senderStage) {
  return senderStage * 2 + gradient;
}
constexpr int kExchangeTag = 32767;

/// Stages `a` and `b` are the two copies of one stage of a bidirectional
/// pipeline on two actors. (The two directions' vocabulary-parallel stages
/// put their copies on the same actors; the device sums those.) The towers
/// of a two-tower model are different models. A stage that holds nothing
/// (no blocks, neither first nor last) has no copy.
bool areCopies(const ScheduleDesc::Stage &a, const ScheduleDesc::Stage &b);

/// Every pair of different actors (a, b) with a running stage `from` and b
/// stage `to`.
std::vector<std::pair<int, int>> actorPairs(const ScheduleDesc &desc, int from,
                                            int to);

/// Every message channel of the run, the same list on every rank (sorted):
/// one per (sender, receiver, tag) of the pipelines' edges and one exchange
/// channel per pair of actors that talk or hold stage copies, in every
/// replica.
std::vector<MessageChannel> channelsOf(const ScheduleDesc &desc);

/// The hardware queues a GPU gives a process's streams at most (the largest
/// CUDA_DEVICE_MAX_CONNECTIONS; CUDA's default is 8). The CUDA backend gives
/// a rank's compute stream and each of its channels a stream of their own,
/// so a rank there takes part in at most kDeviceConnections - 1 channels.
constexpr int kDeviceConnections = 32;

/// Per actor: how many of channelsOf(desc) its ranks take part in (the same
/// in every replica).
std::vector<int> channelsPerActor(const ScheduleDesc &desc);

/// What is wrong, for the CUDA backend, with a rank that takes part in
/// `channels` channels: more than kDeviceConnections - 1 ("" if not). The
/// lowering checks every actor before it writes a rank (flexpipe-compile
/// --backend=cuda), the backend again when it opens the channels.
std::string tooManyChannels(int channels);

/// What of `desc` a device that runs no vocabulary-parallel stages (unless
/// `vocabParallel`) or no two-tower model (unless `twoTower`) cannot run,
/// as "vocabulary-parallel stages (...)" or "the two-tower model (...)";
/// "" when it runs all of it. The compiler asks for the CUDA backend, the
/// ranks for their device.
std::string unsupportedStages(const ScheduleDesc &desc, bool vocabParallel,
                              bool twoTower);

/// Parses the text; returns an empty string or what is wrong (with the line).
std::string parseSchedule(const std::string &text, ScheduleDesc &desc);

/// The body of a description (docs/Runtime.md): everything after the header,
/// as parseSchedule reads it back to `desc` (the lowering writes it; the one
/// place the format is written, next to the one place it is read).
std::string formatScheduleBody(const ScheduleDesc &desc);

/// A whole description: the header (`flexpipe-schedule 1`, `hash` and the
/// check sum of the body that parseSchedule verifies) and `body`.
std::string withScheduleHeader(const std::string &body, uint64_t hash);

/// `description` (a whole one) as actor `actor`'s executable embeds it: with
/// a `program` line after the first, which the runtime checks against the
/// rank the executable was started as.
std::string forProgram(const std::string &description, int actor);

/// One encoded attribute, `KEY=K:VALUE` (the format decodeOpAttributes
/// reads; `kind` one of s, i, f, b, u, `value` as text). The lowering joins
/// them with single spaces.
std::string encodeOpAttribute(const std::string &key, char kind,
                              const std::string &value);

/// `text` with every byte that is not printable ASCII, or is a space, '%',
/// '"', '\\', '?' (no trigraphs) or, in a `key`, '=', written as %XX: one
/// word of a description line, safe in a C string literal.
std::string escapeDescriptionText(const std::string &text, bool key);
/// Undoes escapeDescriptionText; false when an escape is malformed.
bool unescapeDescriptionText(const std::string &text, std::string &out);

/// Whether an operation may be named `name`: [A-Za-z_][A-Za-z0-9_.-]*, the
/// names FLEXPIPE_OPERATION registers and the lowering accepts.
bool isOperationName(const std::string &name);

/// Decodes the attributes the lowering encodes for flexpipe_rt_exec and the
/// description's exec lines (docs/Runtime.md): `KEY=K:VALUE` entries
/// separated by single spaces, K one of s (string), i (integer), f (float),
/// b (bool), u (unit), every byte of KEY and VALUE that is not printable
/// ASCII or is one of space, '%', '"', '\\', '?' (and '=' in KEY) written as
/// %XX.
/// Returns an empty string or what is wrong.
std::string decodeOpAttributes(const std::string &encoded,
                               std::map<std::string, OpAttribute> &attributes);

} // namespace flexpipe::rt

#endif // FLEXPIPE_RUNTIME_SCHEDULE_H
