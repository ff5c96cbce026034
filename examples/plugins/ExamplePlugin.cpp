//===- ExamplePlugin.cpp - A FlexPipe plugin with one hook of each kind ---===//
//
// Part of the FlexPipe project, under the Apache License v2.0 with LLVM
// Exceptions. See LICENSE for license information.
// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
//
//===----------------------------------------------------------------------===//
//
// Registers one hook of each kind:
//
//  - the priority "one_f_one_b": 1F1B written as a step function. Actor a
//    runs pp - a forwards (its warm-up), then strictly one backward and one
//    forward, then the remaining backwards; it waits (idles) when the item
//    its turn asks for is not ready. With split backward each input gradient
//    is followed at once by its weight gradient. It needs no in-flight limit.
//    It counts the actor's items by position, so it assumes no registered
//    instructions on the actor (no vocabulary parallelism).
//  - the check "max_two_inflight": vetoes a forward while the actor holds
//    two micro-batches' activations (a memory budget of two micro-batches per
//    device, whatever the priorities and in-flight limits say); as in-flight
//    limits, not the forwards of vocabulary-parallel slices.
//  - the in-flight rule "twice_the_stages_after": 2 (s - i), at least 1,
//    for index i of a scope of s stages. per_stage: twice the stages from i
//    to the last; per_actor on a one-to-one placement (s = pp): twice 1F1B's
//    warm-up of pp - a.
//
// Build it with the project (build/lib/FlexPipeExamplePlugin.so), or alone:
//   c++ -std=c++17 -O2 -fPIC -shared -I include \
//       examples/plugins/ExamplePlugin.cpp -o FlexPipeExamplePlugin.so
// and load it with `--load-plugin FlexPipeExamplePlugin.so`.
//
//===----------------------------------------------------------------------===//

#include "flexpipe/Plugin.h"

#include <algorithm>

using namespace flexpipe;
using sched::CompKind;
using sched::ReadyItem;
using sched::StepView;

namespace {

/// Which kind of item 1F1B runs at a position of an actor's program.
enum class Turn { Forward, Backward, WeightGradient };

/// The kind at position `k` of an actor that runs `n` forwards with a
/// warm-up of `w`: w forwards; n - w times a backward (an input gradient and
/// a weight gradient when split) and a forward; w backwards.
Turn turnAt(int64_t k, int64_t n, int64_t w, bool split) {
  const int64_t backward = split ? 2 : 1; // items per backward
  if (k < w)
    return Turn::Forward;
  k -= w;
  const int64_t steady = (n - w) * (backward + 1);
  if (k < steady) {
    const int64_t offset = k % (backward + 1);
    return offset == 0          ? Turn::Backward
           : offset == backward ? Turn::Forward
                                : Turn::WeightGradient;
  }
  return (k - steady) % backward == 0 ? Turn::Backward : Turn::WeightGradient;
}

bool matches(Turn turn, CompKind kind) {
  switch (turn) {
  case Turn::Forward:
    return kind == CompKind::Fwd;
  case Turn::Backward:
    return kind == CompKind::Bwd || kind == CompKind::Igrad;
  case Turn::WeightGradient:
    return kind == CompKind::Wgrad;
  }
  return false;
}

int oneFOneB(const StepView &view, const std::vector<ReadyItem> &ready) {
  const sched::Problem &problem = *view.problem;
  int64_t forwards = 0; // this actor's: every micro-batch of its parts
  for (const sched::StagePart &part : problem.parts)
    if (part.actor == view.actor)
      forwards += part.mbEnd - part.mbBegin;
  const int64_t warmup =
      std::min<int64_t>(problem.numActors - view.actor, forwards);
  const Turn turn =
      turnAt(view.scheduled, forwards, warmup, problem.splitBackward);
  // The items come in reorder-queue order: the first match is the oldest
  // micro-batch of the first stage.
  for (size_t i = 0; i < ready.size(); ++i)
    if (matches(turn, ready[i].kind))
      return static_cast<int>(i);
  return -1; // not ready yet: wait for it
}

bool maxTwoInflight(const StepView &view, const ReadyItem &item) {
  // The vocabulary-parallel slices hold no micro-batch of their own (every
  // actor runs them for every micro-batch): like in-flight limits, the
  // check leaves them be (vetoed, the head's exchange never completed).
  return item.kind != CompKind::Fwd || view.inflight < 2 ||
         !view.problem->parts[item.part].countsInflight;
}

int64_t twiceTheStagesAfter(const plugin::InflightQuery &query) {
  return std::max<int64_t>(1, 2 * (query.numStages - query.index));
}

} // namespace

FLEXPIPE_PLUGIN(registry) {
  registry.addPriority("one_f_one_b", oneFOneB);
  registry.addCheck("max_two_inflight", maxTwoInflight);
  registry.addInflightRule("twice_the_stages_after", twiceTheStagesAfter);
}
